// The fixed layout of an expert-parallel forward (core/parallel/fixed_row_exchange.h), on CPU
// ranks:
//  - Ops::ship_rows with every_row gives every (destination, token) its row, empty ones all
//    pads with head_pair −1; sort_pairs_pads_last puts the pads after every expert and leaves
//    them unrouted, its segments the experts' over all rows;
//  - classic and MoK forwards in the fixed layout give the counted forwards' outputs bit for
//    bit (MoK: both plan places), for R = 2, 3, 4, with dropped pairs;
//  - they move exactly the fixed layout's bytes (every token, or every pair, to every rank) and
//    MoK's step log prices classic's fixed layout;
//  - only forwards without keep and within the row limit take it; a bank that is not exactly
//    the rank's own experts is refused.
#include <QtTest>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/util/counter_rng.h"
#include "support/dispatch_fixture.h"

using namespace mok;

namespace {

constexpr int kE = 6, kK = 3;
constexpr int64_t kD = 16, kF = 24, kN = 60;  // tokens in the global batch

using test::i32_values;
Tensor i32(const std::vector<int32_t>& v) { return test::i32_tensor(v); }

// Distinct experts per token, descending gates; the last slot of every 7th token dropped.
RoutingDecision make_routing(int64_t t0, int64_t t1) {
  static_assert(kK == 3, "test::top3_routing");
  return test::top3_routing(kE, t0, t1, 9, 20, [](int64_t t, int s) { return s == kK - 1 && t % 7 == 0; });
}

// The rank's own experts, stacked (expert e seeded as in test::make_expert_bank).
ExpertBank own_bank(const ExpertPlacement& place, int rank) {
  std::vector<GroupedSwiGlu::ExpertSpec> specs;
  std::vector<bool> local(kE, false);
  for (int e = 0; e < kE; ++e) {
    specs.push_back({"moe.expert" + std::to_string(e), static_cast<uint64_t>(100 + e)});
    local[e] = place.owner(e) == rank;
  }
  return make_stacked_expert_bank(specs, local, kD, kF, 0.3, 0.3, 0, "moe.expert");
}

enum class Kind { classic, mok_host, mok_device };

struct Run {
  std::vector<real> y;            // gathered over ranks, global token order
  std::vector<CommStats> stats;   // per rank, this forward only
  std::vector<MokStepLog> logs;   // MoK
  std::vector<DispatchCounts> counts;  // classic
};

// One inference forward (keep = false) of the global batch over R ranks; fixed_rows is the
// dispatchers' fixed layout limit (0: counted).
Run run_forward(int R, Kind kind, int64_t fixed_rows, const ExpertPlacement& place, bool keep = false) {
  Run run;
  run.y.assign(kN * kD, 0);
  run.stats.resize(R);
  run.logs.resize(R);
  run.counts.resize(R);
  std::mutex m;
  run_local_ranks(R, [&](Communicator& comm) {
    const int me = comm.rank();
    const int64_t t0 = kN * me / R, t1 = kN * (me + 1) / R;
    ExpertBank bank = own_bank(place, me);
    std::unique_ptr<ClassicDispatcher> classic;
    std::unique_ptr<MokDispatcher> mok;
    ExpertDispatcher* d = nullptr;
    if (kind == Kind::classic) {
      classic = std::make_unique<ClassicDispatcher>(comm, place);
      classic->set_fixed_layout_max_rows(fixed_rows);
      d = classic.get();
    } else {
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, ShadowMode::never};
      opt.overlap_chunks = 1;
      opt.plan = kind == Kind::mok_device ? MokPlanPlace::device : MokPlanPlace::host;
      opt.fixed_layout_max_rows = fixed_rows;
      mok = std::make_unique<MokDispatcher>(comm, place, opt);
      d = mok.get();
    }
    const Tensor x = test::token_rows(1, t0, t1, kD);
    const RoutingDecision r = make_routing(t0, t1);
    const CommStats before = comm.stats();
    Tensor y = d->forward(x, r, bank, keep);
    if (keep) {  // a kept forward must be able to run backward
      Tensor dgate;
      (void)d->backward(test::token_rows(2, t0, t1, kD), bank, dgate);
    }
    std::lock_guard<std::mutex> lock(m);
    std::memcpy(run.y.data() + t0 * kD, y.data(), y.bytes());
    run.stats[me] = comm.stats().since(before);
    if (mok) run.logs[me] = mok->last_log();
    if (classic) run.counts[me] = classic->last_counts();
  });
  return run;
}

const int64_t kRowBytes = kD * static_cast<int64_t>(sizeof(real));

}  // namespace

class TestFixedRowExchange : public QObject {
  Q_OBJECT
 private slots:
  void shipRowsWithEveryRowGivesEachTokenARowPerRank() {
    Ops& ops = cpu_context().ops();
    // token:            0      1       2        3
    const std::vector<int32_t> expert = {0, 2, 3, 2, 1, -1, 3, 0};
    Tensor gate = Tensor::empty({8}, kRealDType, cpu_allocator());
    for (int i = 0; i < 8; ++i) gate.data()[i] = static_cast<real>(i + 1);
    const ShipRows s = ops.ship_rows(i32(expert), gate, i32({0, 0, 1, 1}), i32({0, 1, 0, 1}), 2, 2, true);
    QCOMPARE(s.rows, (std::vector<int64_t>{4, 4}));
    QCOMPARE(i32_values(s.token), (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
    // Token 1 has nothing on rank 0, token 2 nothing on rank 1: rows of pads.
    QCOMPARE(i32_values(s.head_pair), (std::vector<int32_t>{0, -1, 4, 7, 1, 2, -1, 6}));
    QCOMPARE(i32_values(s.entry), (std::vector<int32_t>{0, -1, -1, -1, 1, -1, 0, -1,  //
                                                    0, -1, 1, 0, -1, -1, 1, -1}));
    // The same rows as the counted call, where both have one.
    const ShipRows counted = ops.ship_rows(i32(expert), gate, i32({0, 0, 1, 1}), i32({0, 1, 0, 1}), 2, 2);
    QCOMPARE(counted.rows, (std::vector<int64_t>{3, 3}));
    QCOMPARE(i32_values(counted.head_pair), (std::vector<int32_t>{0, 4, 7, 1, 2, 6}));
  }

  void padsSortAfterEveryExpertAndStayUnrouted() {
    Ops& ops = cpu_context().ops();
    Tensor entry = i32({1, -1, 0, 1, -1, 0, -1, 1});
    const PairOrder o = sort_pairs_pads_last(ops, entry, 2);
    QCOMPARE(i32_values(o.order), (std::vector<int32_t>{2, 5, 0, 3, 7, 1, 4, 6}));
    QCOMPARE(i32_values(o.row_of_pair), (std::vector<int32_t>{2, -1, 0, 3, -1, 1, -1, 4}));
    QCOMPARE(o.segments.groups(), 2);
    QCOMPARE(o.segments.rows(), int64_t{8});  // the matrix's rows: the pads' ride along
    QVERIFY(o.segments.bounded());
    QCOMPARE(o.segments.host(), (std::vector<int64_t>{0, 2, 5}));
    QCOMPARE(o.load.numel(), int64_t{2});
  }

  void classicFixedLayoutMatchesCountedBitwise() {
    for (int R : {2, 3, 4}) {
      const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
      const Run counted = run_forward(R, Kind::classic, 0, place);
      const Run fixed = run_forward(R, Kind::classic, kN, place);
      const QString what = QString("R=%1").arg(R);
      QVERIFY2(test::same_bits(fixed.y, counted.y), qPrintable(what));
      for (int me = 0; me < R; ++me) {
        const int64_t n = kN * (me + 1) / R - kN * me / R;
        QVERIFY(fixed.counts[me].fixed_layout);
        QVERIFY(!counted.counts[me].fixed_layout);
        // Every pair to every other rank, and its result back: n·k rows each way per peer.
        QCOMPARE(fixed.stats[me].remote_sent(CommPurpose::dispatch), (R - 1) * n * kK * kRowBytes);
        QCOMPARE(fixed.stats[me].remote_sent(CommPurpose::combine), (R - 1) * n * kK * kRowBytes);
        QVERIFY(counted.stats[me].remote_sent(CommPurpose::dispatch) < fixed.stats[me].remote_sent(CommPurpose::dispatch));
      }
    }
    // Another placement (experts dealt round robin): still the same bits.
    const ExpertPlacement rr = ExpertPlacement::parse("round_robin", kE, 3);
    QVERIFY(test::same_bits(run_forward(3, Kind::classic, kN, rr).y, run_forward(3, Kind::classic, 0, rr).y));
  }

  void mokFixedLayoutMatchesBothCountedPlansBitwise() {
    for (int R : {2, 3, 4}) {
      const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
      const Run host = run_forward(R, Kind::mok_host, 0, place);
      const Run device = run_forward(R, Kind::mok_device, 0, place);
      const Run fixed = run_forward(R, Kind::mok_device, kN, place);
      const QString what = QString("R=%1").arg(R);
      QVERIFY2(test::same_bits(fixed.y, host.y), qPrintable(what));
      QVERIFY2(test::same_bits(fixed.y, device.y), qPrintable(what));
      for (int me = 0; me < R; ++me) {
        const int64_t n = kN * (me + 1) / R - kN * me / R;
        const MokStepLog& log = fixed.logs[me];
        QVERIFY(log.fixed_layout);
        QVERIFY(!host.logs[me].fixed_layout);
        QVERIFY(log.shadowed.empty());
        QCOMPARE(log.shipped_rows, (R - 1) * n);
        // One row per token to every other rank, and one back.
        QCOMPARE(log.dispatch_bytes, (R - 1) * n * kRowBytes);
        QCOMPARE(log.combine_bytes, (R - 1) * n * kRowBytes);
        QCOMPARE(fixed.stats[me].remote_sent(CommPurpose::dispatch), log.dispatch_bytes);
        // Against classic's fixed layout: k rows per token each way.
        QCOMPARE(log.classic_bytes, 2 * (R - 1) * n * kK * kRowBytes);
        QCOMPARE(log.bytes_saved, 2 * (R - 1) * n * (kK - 1) * kRowBytes);
      }
    }
  }

  void onlyUnkeptForwardsWithinTheLimitUseIt() {
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, 2);
    const Run above = run_forward(2, Kind::mok_device, kN / 2 - 1, place);  // 30 rows per rank
    QVERIFY(!above.logs[0].fixed_layout);
    const Run at = run_forward(2, Kind::mok_device, kN / 2, place);
    QVERIFY(at.logs[0].fixed_layout);
    QVERIFY(test::same_bits(above.y, at.y));
    const Run kept = run_forward(2, Kind::mok_device, kN, place, /*keep=*/true);
    QVERIFY(!kept.logs[0].fixed_layout);
    QVERIFY(test::same_bits(kept.y, at.y));
    const Run kept_classic = run_forward(2, Kind::classic, kN, place, /*keep=*/true);
    QVERIFY(!kept_classic.counts[0].fixed_layout);
    QVERIFY(test::same_bits(kept_classic.y, run_forward(2, Kind::classic, kN, place).y));
  }

  void aBankBeyondTheRanksOwnExpertsIsRefused() {
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, 2);
    const ExpertBank all = test::make_expert_bank(kE, kD, kF);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, check_fixed_layout_bank(place, 0, all));
    const ExpertBank other = own_bank(place, 1);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, check_fixed_layout_bank(place, 0, other));
    check_fixed_layout_bank(place, 0, own_bank(place, 0));  // the rank's own: accepted
  }
};

QTEST_GUILESS_MAIN(TestFixedRowExchange)
#include "test_fixed_row_exchange.moc"
