// ClassicDispatcher over local ranks: with the batch split into consecutive shards, R = 1…4
// ranks give the outputs, input gradients, gate gradients and expert weight gradients of
// the single-rank LocalDispatcher (within float noise, the test bounds it tightly), for
// any expert placement (contiguous blocks, round robin, an explicit uneven list: the rows
// then leave in another order than the router's), the same bits on every repeat, and byte
// counters equal to a count of the routed pairs.
#include <QtTest>

class TestDistClassicDispatcher : public QObject {
  Q_OBJECT
 private slots:
  void matchesLocalDispatcherForAnyRankCount();
  void matchesLocalDispatcherForAnyPlacement();
  void repeatedRunsAreBitwiseIdentical();
  void byteCountersMatchRoutedPairs();
};


#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/local_communicator.h"
#include "core/util/counter_rng.h"
#include "support/dispatch_fixture.h"

using namespace mok;

namespace {

constexpr int kE = 6, kK = 2;
constexpr int64_t kD = 16, kF = 24, kN = 60;  // tokens in the global batch

using test::rel_diff;

ExpertBank make_bank() { return test::make_expert_bank(kE, kD, kF); }

// Distinct experts per token, descending gates renormalised to 1; some pairs dropped.
RoutingDecision make_routing(int64_t t0, int64_t t1) {
  std::vector<int32_t> ex;
  std::vector<real> gt;
  for (int64_t t = t0; t < t1; ++t) {
    const int a = static_cast<int>(counter_bits(5, 1, t) % kE);
    const int b = (a + 1 + static_cast<int>(counter_bits(5, 2, t) % (kE - 1))) % kE;
    const double u = 0.5 + 0.5 * counter_uniform(5, 3, t);
    ex.push_back(a);
    ex.push_back(counter_bits(5, 4, t) % 7 == 0 ? -1 : b);  // a few dropped
    gt.push_back(static_cast<real>(u));
    gt.push_back(static_cast<real>(1.0 - u));
  }
  return routing_decision_from(ex, gt, kK, kE);
}

Tensor rows(uint64_t stream, int64_t t0, int64_t t1) { return test::token_rows(stream, t0, t1, kD); }

struct Result {
  std::vector<real> y, dx, dgate;
  std::vector<std::vector<real>> expert_grad;  // [e] → up then down weight grads (owner only)
};

Result reference() {
  ExpertBank bank = make_bank();
  LocalDispatcher local;
  const Tensor x = rows(1, 0, kN), dy = rows(2, 0, kN);
  const RoutingDecision r = make_routing(0, kN);
  Result out;
  Tensor y = local.forward(x, r, bank, true);
  Tensor dgate;
  Tensor dx = local.backward(dy, bank, dgate);
  out.dgate.assign(dgate.span().begin(), dgate.span().end());
  out.y.assign(y.span().begin(), y.span().end());
  out.dx.assign(dx.span().begin(), dx.span().end());
  for (int e = 0; e < kE; ++e) out.expert_grad.push_back(test::expert_grads(*bank.experts[e]));
  return out;
}

struct RankRun {
  Result result;  // gathered over ranks: y/dx/dgate in global token order
  std::vector<CommStats> stats;
  std::vector<DispatchCounts> counts;
};

RankRun run_classic(int R, const std::string& placement = "contiguous") {
  RankRun run;
  run.result.y.assign(kN * kD, 0);
  run.result.dx.assign(kN * kD, 0);
  run.result.dgate.assign(kN * kK, 0);
  run.result.expert_grad.assign(kE, {});
  run.stats.resize(R);
  run.counts.resize(R);
  std::mutex m;
  run_local_ranks(R, [&](Communicator& comm) {
    const int me = comm.rank();
    const int64_t t0 = kN * me / R, t1 = kN * (me + 1) / R;
    ExpertBank bank = make_bank();
    ClassicDispatcher dispatcher(comm, ExpertPlacement::parse(placement, kE, R));
    const Tensor x = rows(1, t0, t1), dy = rows(2, t0, t1);
    const RoutingDecision r = make_routing(t0, t1);
    Tensor dgate;
    Tensor y = dispatcher.forward(x, r, bank, true);
    run.counts[me] = dispatcher.last_counts();
    Tensor dx = dispatcher.backward(dy, bank, dgate);
    std::lock_guard<std::mutex> lock(m);
    std::memcpy(run.result.y.data() + t0 * kD, y.data(), y.bytes());
    std::memcpy(run.result.dx.data() + t0 * kD, dx.data(), dx.bytes());
    std::memcpy(run.result.dgate.data() + t0 * kK, dgate.data(), dgate.bytes());
    for (int e : dispatcher.placement().experts_on(me))
      run.result.expert_grad[e] = test::expert_grads(*bank.experts[e]);
    run.stats[me] = comm.stats();
  });
  return run;
}

}  // namespace


void TestDistClassicDispatcher::matchesLocalDispatcherForAnyRankCount() {
  const Result ref = reference();
  for (int R : {1, 2, 3, 4}) {
    const RankRun run = run_classic(R);
    // Each expert sees its rows in global token order; only GEMM blocking can differ.
    const double tol = 1e-6;
    QVERIFY2(rel_diff(run.result.y, ref.y) <= tol, qPrintable(QString("y, R=%1").arg(R)));
    QVERIFY2(rel_diff(run.result.dx, ref.dx) <= tol, qPrintable(QString("dx, R=%1").arg(R)));
    QVERIFY2(rel_diff(run.result.dgate, ref.dgate) <= tol,
             qPrintable(QString("dgate, R=%1").arg(R)));
    for (int e = 0; e < kE; ++e) {
      QCOMPARE(run.result.expert_grad[e].size(), ref.expert_grad[e].size());
      QVERIFY2(rel_diff(run.result.expert_grad[e], ref.expert_grad[e]) <= tol,
               qPrintable(QString("expert %1 grad, R=%2").arg(e).arg(R)));
    }
    if (R == 1) {  // one rank is the local dispatcher, bit for bit
      QCOMPARE(std::memcmp(run.result.y.data(), ref.y.data(), ref.y.size() * sizeof(real)), 0);
      QCOMPARE(std::memcmp(run.result.dx.data(), ref.dx.data(), ref.dx.size() * sizeof(real)), 0);
    }
  }
}

void TestDistClassicDispatcher::matchesLocalDispatcherForAnyPlacement() {
  const Result ref = reference();
  const std::vector<std::pair<int, std::string>> cases = {
      {2, "round_robin"}, {3, "round_robin"}, {2, "1,0,1,1,0,1"}, {3, "2,2,0,1,0,2"}};
  for (const auto& [R, placement] : cases) {
    const RankRun run = run_classic(R, placement);
    const QString what = QString("R=%1 placement %2").arg(R).arg(QString::fromStdString(placement));
    const double tol = 1e-6;
    QVERIFY2(rel_diff(run.result.y, ref.y) <= tol, qPrintable("y, " + what));
    QVERIFY2(rel_diff(run.result.dx, ref.dx) <= tol, qPrintable("dx, " + what));
    QVERIFY2(rel_diff(run.result.dgate, ref.dgate) <= tol, qPrintable("dgate, " + what));
    for (int e = 0; e < kE; ++e) {
      QCOMPARE(run.result.expert_grad[e].size(), ref.expert_grad[e].size());
      QVERIFY2(rel_diff(run.result.expert_grad[e], ref.expert_grad[e]) <= tol,
               qPrintable(QString("expert %1 grad, ").arg(e) + what));
    }
  }
}

void TestDistClassicDispatcher::repeatedRunsAreBitwiseIdentical() {
  for (int R : {2, 4}) {
    const RankRun a = run_classic(R), b = run_classic(R);
    QCOMPARE(std::memcmp(a.result.y.data(), b.result.y.data(), a.result.y.size() * sizeof(real)), 0);
    QCOMPARE(std::memcmp(a.result.dx.data(), b.result.dx.data(), a.result.dx.size() * sizeof(real)), 0);
    for (int e = 0; e < kE; ++e) QVERIFY(a.result.expert_grad[e] == b.result.expert_grad[e]);
  }
}

// Forward ships each kept pair's row out and back; backward ships dy out and dx back:
// per peer, dispatch = combine = 2 · pairs · d · sizeof(real).
void TestDistClassicDispatcher::byteCountersMatchRoutedPairs() {
  for (int R : {2, 3, 4}) {
    const RankRun run = run_classic(R);
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
    for (int me = 0; me < R; ++me) {
      const int64_t t0 = kN * me / R, t1 = kN * (me + 1) / R;
      const RoutingDecision r = make_routing(t0, t1);
      std::vector<int64_t> to(R, 0), from(R, 0);
      for (int e : expert_ids(r))
        if (e >= 0) to[place.owner(e)]++;
      for (int s = 0; s < R; ++s) {  // rows other ranks route to my experts
        const RoutingDecision rs = make_routing(kN * s / R, kN * (s + 1) / R);
        for (int e : expert_ids(rs))
          if (e >= 0 && place.owner(e) == me) from[s]++;
      }
      const int64_t row = kD * sizeof(real);
      const CommStats& st = run.stats[me];
      int64_t local = 0, remote = 0;
      for (int q = 0; q < R; ++q) {
        QCOMPARE(st.sent(CommPurpose::dispatch, q), (to[q] + from[q]) * row);
        QCOMPARE(st.sent(CommPurpose::combine, q), (from[q] + to[q]) * row);
        QCOMPARE(st.received(CommPurpose::dispatch, q), (from[q] + to[q]) * row);
        (q == me ? local : remote) += to[q];
      }
      QCOMPARE(run.counts[me].local_pairs, local);
      QCOMPARE(run.counts[me].remote_pairs, remote);
      QCOMPARE(run.counts[me].pairs_to_rank, to);
      QCOMPARE(st.remote_sent(CommPurpose::gradients), int64_t{0});
    }
  }
}


QTEST_GUILESS_MAIN(TestDistClassicDispatcher)
#include "test_dist_classic_dispatcher.moc"
