// MokDispatcher over local ranks, with the batch split into consecutive shards:
//  - R = 1…4, shadowing never / always / by the cost model: outputs, input, gate and expert
//    weight gradients equal the single-rank LocalDispatcher's (and the ClassicDispatcher's)
//    within float reduction noise, bounded tightly; R = 1 equals LocalDispatcher bit for bit;
//  - repeated runs are bitwise identical;
//  - dispatch/combine bytes equal an independent count of unique (token, rank) rows, never
//    exceed the classic dispatcher's, and shadowing moves exactly the expert weights and
//    their gradients;
//  - the step log's saved bytes and local fraction agree with the counters;
//  - transfers in C chunks on a helper thread (overlap) give the same bits and the same
//    bytes as the blocking single-chunk order, for every C;
//  - the plan made by the rank's ops (MokPlanPlace::device, what GPU ranks use) gives the
//    same bits, the same bytes by purpose and the same step log as the host plan;
//  - with that plan the rows travel beside the shadow copies' products (started groups) and
//    nothing is read before it arrives nor written while it travels (a plane that delivers
//    only at finish and poisons the buffers until then), in one chunk and in chunks of each
//    rank's experts (each chunk's transfers beside the previous chunk's products): the bits
//    of one chunk, whose rows and order every expert keeps.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/model/saved_input_policy.h"
#include "core/util/counter_rng.h"
#include "support/deferring_data_plane.h"
#include "support/dispatch_fixture.h"

using namespace mok;

class TestMokDispatcher : public QObject {
  Q_OBJECT
 private slots:
  void matchesLocalDispatcherForAnyRankCountAndShadowMode();
  void matchesClassicDispatcher();
  void repeatedRunsAreBitwiseIdentical();
  void sendsOneRowPerTokenAndRank();
  void shadowingMovesWeightsAndGradientsOnly();
  void stepLogAgreesWithCounters();
  void inferenceForwardNeedsNoBackward();
  void startedGroupsDeliverOnlyAtFinish();
  void classicChunksChangeNoBitNorByte();
  void overlapChunksChangeNoBitNorByte();
  void shadowCopiesKeepInputsLikeTheLayersExperts();
  void fewRowsUseFewerChunks();
  void devicePlanMatchesHostPlanBitwise();
};

namespace {

constexpr int kE = 6, kK = 3;
constexpr int64_t kD = 16, kN = 72;  // tokens in the global batch

using test::rel_diff;
using test::same_bits;

ExpertBank make_bank(int64_t f) { return test::make_expert_bank(kE, kD, f); }

// Distinct experts per token, descending gates summing to 1; some pairs dropped.
RoutingDecision make_routing(int64_t t0, int64_t t1) {
  static_assert(kK == 3, "test::top3_routing");
  return test::top3_routing(kE, t0, t1, 5, 10,
                            [](int64_t t, int s) { return s > 0 && counter_bits(5, 4 + s, t) % 9 == 0; });
}

Tensor rows(uint64_t stream, int64_t t0, int64_t t1) { return test::token_rows(stream, t0, t1, kD); }

struct Result {
  std::vector<real> y, dx, dgate;
  std::vector<std::vector<real>> expert_grad;  // [e] → up then down weight grads (owner)
};

Result reference(int64_t f) {
  ExpertBank bank = make_bank(f);
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
  Result result;  // gathered over ranks, global token order
  std::vector<CommStats> stats;
  std::vector<MokStepLog> logs;
  std::vector<int> started;         // groups started beside the compute, per rank (deferring plane)
  std::vector<std::string> faults;  // what the deferring plane found, per rank
};

// classic = true runs ClassicDispatcher instead (same harness).
// chunks = MokOptions::overlap_chunks.
// plan = MokOptions::plan.
RankRun run_ranks(int R, ShadowMode mode, int64_t f, bool classic = false, int chunks = 4,
                  MokPlanPlace plan = MokPlanPlace::automatic, bool deferring = false, int classic_chunks = 1) {
  RankRun run;
  run.result.y.assign(kN * kD, 0);
  run.result.dx.assign(kN * kD, 0);
  run.result.dgate.assign(kN * kK, 0);
  run.result.expert_grad.assign(kE, {});
  run.stats.resize(R);
  run.logs.resize(R);
  run.started.resize(R);
  run.faults.resize(R);
  std::mutex m;
  run_local_ranks(R, [&](Communicator& comm) {
    const int me = comm.rank();
    const int64_t t0 = kN * me / R, t1 = kN * (me + 1) / R;
    ExpertBank bank = make_bank(f);
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
    test::DeferringDataPlane deferring_plane(comm);
    std::unique_ptr<ExpertDispatcher> dispatcher;
    MokDispatcher* mok = nullptr;
    if (classic) {
      auto cd = deferring ? std::make_unique<ClassicDispatcher>(deferring_plane, place)
                          : std::make_unique<ClassicDispatcher>(comm, place);
      cd->set_overlap_chunks(classic_chunks);
      dispatcher = std::move(cd);
    } else {
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, mode};
      opt.overlap_chunks = chunks;
      opt.min_chunk_rows = 1;  // this small batch still uses every chunk asked for
      opt.plan = plan;
      auto md = deferring ? std::make_unique<MokDispatcher>(deferring_plane, place, opt)
                          : std::make_unique<MokDispatcher>(comm, place, opt);
      mok = md.get();
      dispatcher = std::move(md);
    }
    const Tensor x = rows(1, t0, t1), dy = rows(2, t0, t1);
    const RoutingDecision r = make_routing(t0, t1);
    Tensor dgate;
    Tensor y = dispatcher->forward(x, r, bank, true);
    Tensor dx = dispatcher->backward(dy, bank, dgate);
    std::lock_guard<std::mutex> lock(m);
    std::memcpy(run.result.y.data() + t0 * kD, y.data(), y.bytes());
    std::memcpy(run.result.dx.data() + t0 * kD, dx.data(), dx.bytes());
    std::memcpy(run.result.dgate.data() + t0 * kK, dgate.data(), dgate.bytes());
    for (int e : place.experts_on(me)) run.result.expert_grad[e] = test::expert_grads(*bank.experts[e]);
    run.stats[me] = comm.stats();
    if (mok) run.logs[me] = mok->last_log();
    run.started[me] = deferring_plane.started();
    run.faults[me] = deferring_plane.fault();
  });
  return run;
}

// Float noise: sums regrouped by rank (a few roundings of values of order 1).
constexpr double kTol = sizeof(real) == 4 ? 2e-6 : 1e-14;

void check_close(const Result& got, const Result& ref, const QString& what) {
  QVERIFY2(rel_diff(got.y, ref.y) <= kTol, qPrintable("y " + what));
  QVERIFY2(rel_diff(got.dx, ref.dx) <= kTol, qPrintable("dx " + what));
  QVERIFY2(rel_diff(got.dgate, ref.dgate) <= kTol, qPrintable("dgate " + what));
  for (int e = 0; e < kE; ++e)
    QVERIFY2(rel_diff(got.expert_grad[e], ref.expert_grad[e]) <= kTol,
             qPrintable(QString("expert %1 grad ").arg(e) + what));
}

}  // namespace

void TestMokDispatcher::matchesLocalDispatcherForAnyRankCountAndShadowMode() {
  // f = 4: the cost model's crossover (1.5·f = 6 rows) falls inside the per-rank counts,
  // so `auto` mixes shipped and shadowed experts.
  for (int64_t f : {int64_t{24}, int64_t{4}}) {
    const Result ref = reference(f);
    for (int R : {1, 2, 3, 4})
      for (ShadowMode mode : {ShadowMode::never, ShadowMode::always, ShadowMode::automatic}) {
        const RankRun run = run_ranks(R, mode, f);
        const QString what = QString("R=%1 mode=%2 f=%3").arg(R).arg(shadow_mode_name(mode)).arg(f);
        check_close(run.result, ref, what);
        if (R == 1) {  // one rank: the local dispatcher's sums in the same order
          QVERIFY2(same_bits(run.result.y, ref.y), qPrintable(what));
          QVERIFY2(same_bits(run.result.dx, ref.dx), qPrintable(what));
          QVERIFY2(same_bits(run.result.dgate, ref.dgate), qPrintable(what));
        }
      }
  }
  // The auto case above did shadow some experts and ship others (else it tested nothing new).
  const RankRun mixed = run_ranks(4, ShadowMode::automatic, 4);
  int64_t shadowed = 0, shipped = 0;
  for (const MokStepLog& log : mixed.logs) {
    shadowed += log.shadow_pairs;
    shipped += log.shipped_pairs;
  }
  QVERIFY(shadowed > 0);
  QVERIFY(shipped > 0);
}

void TestMokDispatcher::matchesClassicDispatcher() {
  for (int R : {2, 4}) {
    const RankRun classic = run_ranks(R, ShadowMode::never, 24, true);
    const RankRun mok = run_ranks(R, ShadowMode::never, 24);
    check_close(mok.result, classic.result, QString("vs classic R=%1").arg(R));
    // Without shadows every expert sees the same rows in the same order: weight gradients
    // are the classic ones bit for bit.
    for (int e = 0; e < kE; ++e) QVERIFY(same_bits(mok.result.expert_grad[e], classic.result.expert_grad[e]));
  }
}

void TestMokDispatcher::repeatedRunsAreBitwiseIdentical() {
  for (int R : {2, 3, 4})
    for (ShadowMode mode : {ShadowMode::never, ShadowMode::always, ShadowMode::automatic}) {
      const RankRun a = run_ranks(R, mode, 4), b = run_ranks(R, mode, 4);
      QVERIFY(same_bits(a.result.y, b.result.y));
      QVERIFY(same_bits(a.result.dx, b.result.dx));
      QVERIFY(same_bits(a.result.dgate, b.result.dgate));
      for (int e = 0; e < kE; ++e) QVERIFY(same_bits(a.result.expert_grad[e], b.result.expert_grad[e]));
    }
}

// Without shadows: per peer q, forward sends one row per (my token, rank q) with a routed
// expert there (dispatch) and returns one per (q's token, my rank) (combine); backward the
// reverse. So dispatch sent to q = (rows_to[q] + rows_from[q]) · d · sizeof(real), as combine.
void TestMokDispatcher::sendsOneRowPerTokenAndRank() {
  for (int R : {2, 3, 4}) {
    const RankRun run = run_ranks(R, ShadowMode::never, 24);
    const RankRun classic = run_ranks(R, ShadowMode::never, 24, true);
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
    auto unique_rows = [&](int src, int dst) {
      const RoutingDecision r = make_routing(kN * src / R, kN * (src + 1) / R);
      const std::vector<int32_t> ids = expert_ids(r);
      int64_t count = 0;
      for (int64_t t = 0; t < r.tokens; ++t) {
        bool hit = false;
        for (int s = 0; s < kK; ++s) hit |= ids[t * kK + s] >= 0 && place.owner(ids[t * kK + s]) == dst;
        count += hit;
      }
      return count;
    };
    const int64_t row = kD * sizeof(real);
    int64_t duplicates_somewhere = 0;
    for (int me = 0; me < R; ++me) {
      const CommStats& st = run.stats[me];
      for (int q = 0; q < R; ++q) {
        const int64_t expect = (unique_rows(me, q) + unique_rows(q, me)) * row;
        QCOMPARE(st.sent(CommPurpose::dispatch, q), expect);
        QCOMPARE(st.sent(CommPurpose::combine, q), expect);
        QCOMPARE(st.received(CommPurpose::dispatch, q), expect);
        QVERIFY(st.sent(CommPurpose::dispatch, q) <= classic.stats[me].sent(CommPurpose::dispatch, q));
        if (q != me)
          duplicates_somewhere += classic.stats[me].sent(CommPurpose::dispatch, q) - expect;
      }
      QCOMPARE(st.remote_sent(CommPurpose::weights), int64_t{0});
      QCOMPARE(st.remote_sent(CommPurpose::gradients), int64_t{0});
    }
    QVERIFY(duplicates_somewhere > 0);  // top-3 of 6 experts: some tokens share a rank
  }
}

// Shadow everything: no token row leaves its rank; each rank receives the weights of every
// remote expert it routes to (3·d·f values) and returns as many gradient values.
void TestMokDispatcher::shadowingMovesWeightsAndGradientsOnly() {
  const int64_t f = 24;
  for (int R : {2, 4}) {
    const RankRun run = run_ranks(R, ShadowMode::always, f);
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
    for (int me = 0; me < R; ++me) {
      const RoutingDecision r = make_routing(kN * me / R, kN * (me + 1) / R);
      std::set<int> remote;
      for (int e : expert_ids(r))
        if (e >= 0 && place.owner(e) != me) remote.insert(e);
      const int64_t P = 3 * kD * f * static_cast<int64_t>(sizeof(real));
      const CommStats& st = run.stats[me];
      QCOMPARE(st.remote_sent(CommPurpose::dispatch), int64_t{0});
      QCOMPARE(st.remote_sent(CommPurpose::combine), int64_t{0});
      QCOMPARE(st.remote_received(CommPurpose::weights), static_cast<int64_t>(remote.size()) * P);
      QCOMPARE(st.remote_sent(CommPurpose::gradients), static_cast<int64_t>(remote.size()) * P);
      QCOMPARE(static_cast<int64_t>(run.logs[me].shadowed.size()), static_cast<int64_t>(remote.size()));
    }
  }
}

void TestMokDispatcher::stepLogAgreesWithCounters() {
  for (ShadowMode mode : {ShadowMode::never, ShadowMode::automatic}) {
    const RankRun run = run_ranks(3, mode, 4);
    const RankRun classic = run_ranks(3, mode, 4, true);
    for (int me = 0; me < 3; ++me) {
      const MokStepLog& log = run.logs[me];
      const CommStats& st = run.stats[me];
      const CommStats& cst = classic.stats[me];
      QCOMPARE(log.pairs, log.own_pairs + log.shadow_pairs + log.shipped_pairs);
      QCOMPARE(log.dispatch_bytes, st.remote_sent(CommPurpose::dispatch));
      QCOMPARE(log.combine_bytes, st.remote_sent(CommPurpose::combine));
      // classic_bytes is what the classic dispatcher really sent for the same routing.
      QCOMPARE(log.classic_bytes,
               cst.remote_sent(CommPurpose::dispatch) + cst.remote_sent(CommPurpose::combine));
      QCOMPARE(log.bytes_saved, log.classic_bytes - log.payload_bytes());
      QCOMPARE(log.local_fraction(),
               static_cast<double>(log.own_pairs + log.shadow_pairs) / static_cast<double>(log.pairs));
      if (mode == ShadowMode::never) QVERIFY(log.bytes_saved > 0);
    }
  }
}

// Inference: forward only, no backward; the same outputs as a training forward.
void TestMokDispatcher::inferenceForwardNeedsNoBackward() {
  const Result ref = reference(4);
  for (ShadowMode mode : {ShadowMode::never, ShadowMode::automatic}) {
    std::vector<real> y(kN * kD, 0);
    std::vector<MokStepLog> logs(2);
    MokDecisionLog decisions[2];
    std::mutex m;
    run_local_ranks(2, [&](Communicator& comm) {
      const int me = comm.rank();
      const int64_t t0 = kN * me / 2, t1 = kN * (me + 1) / 2;
      ExpertBank bank = make_bank(4);
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, mode};
      MokDispatcher mok(comm, ExpertPlacement::contiguous(kE, 2), opt);
      mok.set_decision_log(&decisions[me]);
      Tensor out = mok.forward(rows(1, t0, t1), make_routing(t0, t1), bank, false);
      Tensor again = mok.forward(rows(1, t0, t1), make_routing(t0, t1), bank, false);
      std::lock_guard<std::mutex> lock(m);
      QCOMPARE(std::memcmp(out.data(), again.data(), out.bytes()), 0);
      std::memcpy(y.data() + t0 * kD, out.data(), out.bytes());
      logs[me] = mok.last_log();
    });
    QVERIFY(rel_diff(y, ref.y) <= kTol);
    for (int me = 0; me < 2; ++me) {
      QCOMPARE(static_cast<int>(decisions[me].records().size()), 2);
      QCOMPARE(decisions[me].records()[1].step, int64_t{1});
      QVERIFY(!logs[me].training);
      QCOMPARE(logs[me].gradient_bytes, int64_t{0});
      const std::string lines = decisions[me].to_json_lines();
      QCOMPARE(std::count(lines.begin(), lines.end(), '\n'), std::ptrdiff_t{2});
    }
  }
}

// The chunked order changes only when rows travel: every expert sees the same batch and
// every sum keeps its order, so results are bitwise those of the blocking path (C = 0), and
// only the number of exchanges grows.
void TestMokDispatcher::overlapChunksChangeNoBitNorByte() {
  for (int R : {2, 3, 4})
    for (ShadowMode mode : {ShadowMode::never, ShadowMode::automatic}) {
      const RankRun base = run_ranks(R, mode, 4, false, 0);
      for (int chunks : {1, 2, 3, 5}) {
        const RankRun run = run_ranks(R, mode, 4, false, chunks);
        const QString what = QString("R=%1 mode=%2 chunks=%3").arg(R).arg(shadow_mode_name(mode)).arg(chunks);
        QVERIFY2(same_bits(run.result.y, base.result.y), qPrintable("y " + what));
        QVERIFY2(same_bits(run.result.dx, base.result.dx), qPrintable("dx " + what));
        QVERIFY2(same_bits(run.result.dgate, base.result.dgate), qPrintable("dgate " + what));
        for (int e = 0; e < kE; ++e)
          QVERIFY2(same_bits(run.result.expert_grad[e], base.result.expert_grad[e]), qPrintable("grad " + what));
        for (int me = 0; me < R; ++me)
          for (CommPurpose p : {CommPurpose::dispatch, CommPurpose::combine, CommPurpose::weights,
                                CommPurpose::gradients, CommPurpose::control})
            QCOMPARE(run.stats[me].remote_sent(p), base.stats[me].remote_sent(p));
        if (chunks > 1) QVERIFY(run.stats[0].calls > base.stats[0].calls);
        for (int me = 0; me < R; ++me) QCOMPARE(run.logs[me].chunks, chunks);
      }
    }
}

// The shadow copies take the saved-input policy and the hidden recompute of the layer's
// experts, so a kitten run keeps compact copies for shadowed tokens too.
void TestMokDispatcher::shadowCopiesKeepInputsLikeTheLayersExperts() {
  const std::shared_ptr<SavedInputPolicy> policy = make_exact_saved_input_policy();
  const Result ref = reference(4);
  // One chunk: the shadow copies are stacked (one grouped product); two: one copy each.
  for (int chunks : {1, 2}) {
    std::vector<int> checked(2, 0);
    std::vector<real> y(kN * kD);
    run_local_ranks(2, [&](Communicator& comm) {
      const int me = comm.rank();
      const int64_t t0 = kN * me / 2, t1 = kN * (me + 1) / 2;
      ExpertBank bank = make_bank(4);
      for (auto& e : bank.experts) {  // as TransformerBlock::set_policy does: views and stack
        e->up().set_policy(policy.get());
        e->down().set_policy(policy.get());
        e->set_saved_policy(policy.get());
        e->set_recompute_hidden(true);
      }
      bank.grouped->set_policy(policy.get());
      bank.grouped->set_recompute_hidden(true);
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, ShadowMode::always};
      opt.overlap_chunks = chunks;
      opt.min_chunk_rows = 1;
      MokDispatcher mok(comm, ExpertPlacement::contiguous(kE, 2), opt);
      const Tensor x = rows(1, t0, t1), dy = rows(2, t0, t1);
      Tensor out = mok.forward(x, make_routing(t0, t1), bank, true);
      Tensor dgate;
      mok.backward(dy, bank, dgate);
      std::memcpy(y.data() + t0 * kD, out.data(), out.bytes());
      for (int e : mok.last_log().shadowed) {
        const SwiGluMlp* sc = mok.shadow(e);
        if (sc && sc->up().policy() == policy.get() && sc->down().policy() == policy.get() &&
            sc->saved_policy() == policy.get() && sc->recompute_hidden())
          checked[me]++;
        else
          checked[me] = -1000;
      }
    });
    QVERIFY2(checked[0] > 0, qPrintable(QString("chunks %1").arg(chunks)));
    QVERIFY2(checked[1] > 0, qPrintable(QString("chunks %1").arg(chunks)));
    QVERIFY(rel_diff(y, ref.y) <= kTol);  // an exact policy: the same outputs
  }
}

// Every rank picks the same chunk count from the global row count: min(C, rows / (R · m)).
void TestMokDispatcher::fewRowsUseFewerChunks() {
  for (int64_t m : {int64_t{1}, int64_t{20}, int64_t{64}}) {
    std::vector<int> chunks(2, -1);
    int64_t sent = 0;
    std::mutex mu;
    run_local_ranks(2, [&](Communicator& comm) {
      const int me = comm.rank();
      const int64_t t0 = kN * me / 2, t1 = kN * (me + 1) / 2;
      ExpertBank bank = make_bank(24);
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, ShadowMode::never};
      opt.overlap_chunks = 4;
      opt.min_chunk_rows = m;
      MokDispatcher mok(comm, ExpertPlacement::contiguous(kE, 2), opt);
      mok.forward(rows(1, t0, t1), make_routing(t0, t1), bank, false);
      std::lock_guard<std::mutex> lock(mu);
      chunks[me] = mok.last_log().chunks;
      // Rows this rank sent, its own included: one per (token, rank with a routed expert).
      const RoutingDecision r = make_routing(t0, t1);
      const std::vector<int32_t> ids = expert_ids(r);
      for (int64_t t = 0; t < t1 - t0; ++t) {
        bool on[2] = {false, false};
        for (int s = 0; s < kK; ++s)
          if (ids[t * kK + s] >= 0) on[ids[t * kK + s] / (kE / 2)] = true;
        sent += on[0] + on[1];
      }
    });
    const int expected = static_cast<int>(std::min<int64_t>(4, std::max<int64_t>(1, sent / (2 * m))));
    QCOMPARE(chunks[0], expected);
    QCOMPARE(chunks[1], expected);
    if (m == 64) QCOMPARE(expected, 1);  // 72 tokens: too few rows to split
    if (m == 1) QCOMPARE(expected, 4);
  }
}

// What GPU ranks run: entries, gates and the expert-major batch from the rank's ops, only
// counts on the host. Against the host plan with one chunk (the same rows in the same order)
// and against the default (four chunks on a helper thread).
void TestMokDispatcher::devicePlanMatchesHostPlanBitwise() {
  for (int R : {2, 3, 4})
    for (ShadowMode mode : {ShadowMode::never, ShadowMode::always, ShadowMode::automatic})
      for (int64_t f : {4, 24}) {
        const RankRun host = run_ranks(R, mode, f, false, 1, MokPlanPlace::host);
        const RankRun chunked = run_ranks(R, mode, f, false, 4, MokPlanPlace::host);
        const RankRun device = run_ranks(R, mode, f, false, 4, MokPlanPlace::device);
        const QString what = QString("R=%1 mode=%2 f=%3").arg(R).arg(shadow_mode_name(mode)).arg(f);
        for (const RankRun* ref : {&host, &chunked}) {
          QVERIFY2(same_bits(device.result.y, ref->result.y), qPrintable("y " + what));
          QVERIFY2(same_bits(device.result.dx, ref->result.dx), qPrintable("dx " + what));
          QVERIFY2(same_bits(device.result.dgate, ref->result.dgate), qPrintable("dgate " + what));
          for (int e = 0; e < kE; ++e)
            QVERIFY2(same_bits(device.result.expert_grad[e], ref->result.expert_grad[e]), qPrintable("grad " + what));
        }
        // Chunks of every rank's experts: as many as asked, at most the most experts a rank
        // holds (6 experts: 3 a rank at R = 2, 2 at R = 3, 1 or 2 at R = 4).
        const int C = std::min(4, (kE + R - 1) / R);
        for (int me = 0; me < R; ++me) {
          for (CommPurpose p : {CommPurpose::dispatch, CommPurpose::combine, CommPurpose::weights,
                                CommPurpose::gradients})
            QVERIFY2(device.stats[me].remote_sent(p) == host.stats[me].remote_sent(p),
                     qPrintable(what + " bytes of " + comm_purpose_name(p)));
          // The heads carry each peer's rows by their lowest and their highest chunk: 2·C
          // int64 more per peer.
          QVERIFY2(device.stats[me].remote_sent(CommPurpose::control) ==
                       host.stats[me].remote_sent(CommPurpose::control) + (R - 1) * 2 * C * 8,
                   qPrintable(what + " control bytes"));
          const MokStepLog &a = device.logs[me], &b = host.logs[me];
          QCOMPARE(a.chunks, C);
          QCOMPARE(a.pairs, b.pairs);
          QCOMPARE(a.own_pairs, b.own_pairs);
          QCOMPARE(a.shadow_pairs, b.shadow_pairs);
          QCOMPARE(a.shipped_pairs, b.shipped_pairs);
          QCOMPARE(a.shipped_rows, b.shipped_rows);
          QVERIFY(a.shadowed == b.shadowed);
          QCOMPARE(a.bytes_saved, b.bytes_saved);
        }
        if (mode == ShadowMode::always) QVERIFY2(!device.logs[0].shadowed.empty(), qPrintable(what));
        if (mode == ShadowMode::never) QVERIFY2(device.logs[0].shipped_rows > 0, qPrintable(what));
      }
}

// The rows' group (forward) and dy's (backward) start before the shadow copies' products and
// finish after them, and in chunks each chunk's beside the previous chunk's products; a plane
// that delivers only at finish gives the blocking plan's bits (R = 4: ranks of one expert,
// an empty chunk).
void TestMokDispatcher::startedGroupsDeliverOnlyAtFinish() {
  for (int R : {2, 3, 4})
    for (ShadowMode mode : {ShadowMode::never, ShadowMode::always, ShadowMode::automatic}) {
      const int64_t f = 24;
      for (int chunks : {1, 4}) {
        const RankRun blocking = run_ranks(R, mode, f, false, 1, MokPlanPlace::device);
        const RankRun deferred = run_ranks(R, mode, f, false, chunks, MokPlanPlace::device, /*deferring=*/true);
        const int C = chunks == 1 ? 1 : std::min(chunks, (kE + R - 1) / R);
        const QString what = QString("R=%1 mode=%2 C=%3").arg(R).arg(shadow_mode_name(mode)).arg(C);
        QVERIFY2(same_bits(deferred.result.y, blocking.result.y), qPrintable("y " + what));
        QVERIFY2(same_bits(deferred.result.dx, blocking.result.dx), qPrintable("dx " + what));
        QVERIFY2(same_bits(deferred.result.dgate, blocking.result.dgate), qPrintable("dgate " + what));
        for (int e = 0; e < kE; ++e)
          QVERIFY2(same_bits(deferred.result.expert_grad[e], blocking.result.expert_grad[e]), qPrintable("grad " + what));
        for (int me = 0; me < R; ++me) {
          QVERIFY2(deferred.faults[me].empty(), qPrintable(what + ": " + QString::fromStdString(deferred.faults[me])));
          // Forward: the entries with the first chunk, then one group in each chunk's turn
          // (the next chunk out, the previous chunk's results back); backward the same.
          QCOMPARE(deferred.started[me], C == 1 ? 2 : 2 * (C + 1));
          for (CommPurpose p : {CommPurpose::dispatch, CommPurpose::combine, CommPurpose::weights,
                                CommPurpose::gradients})
            QVERIFY2(deferred.stats[me].remote_sent(p) == blocking.stats[me].remote_sent(p),
                     qPrintable(what + " bytes of " + comm_purpose_name(p)));
        }
      }
    }
}

// The classic dispatcher in chunks of each rank's experts, each chunk's transfers started
// beside the previous chunk's products on a plane that delivers only at finish: the bits and
// the bytes of one chunk, some ranks with an empty chunk (R = 4: ranks of one expert).
void TestMokDispatcher::classicChunksChangeNoBitNorByte() {
  for (int R : {2, 3, 4})
    for (int chunks : {2, 4}) {
      const RankRun one = run_ranks(R, ShadowMode::never, 24, true);
      const RankRun chunked = run_ranks(R, ShadowMode::never, 24, true, 4, MokPlanPlace::automatic, true, chunks);
      const QString what = QString("R=%1 chunks=%2").arg(R).arg(chunks);
      QVERIFY2(same_bits(chunked.result.y, one.result.y), qPrintable("y " + what));
      QVERIFY2(same_bits(chunked.result.dx, one.result.dx), qPrintable("dx " + what));
      QVERIFY2(same_bits(chunked.result.dgate, one.result.dgate), qPrintable("dgate " + what));
      for (int e = 0; e < kE; ++e)
        QVERIFY2(same_bits(chunked.result.expert_grad[e], one.result.expert_grad[e]), qPrintable("grad " + what));
      const int most = (kE + R - 1) / R;
      const int C = std::min(chunks, most);
      for (int me = 0; me < R; ++me) {
        QVERIFY2(chunked.faults[me].empty(), qPrintable(what + ": " + QString::fromStdString(chunked.faults[me])));
        QVERIFY2(chunked.started[me] == 2 * C,
                 qPrintable(what + QString(": %1 groups started").arg(chunked.started[me])));
        for (CommPurpose p : {CommPurpose::dispatch, CommPurpose::combine, CommPurpose::control})
          QVERIFY2(chunked.stats[me].remote_sent(p) == one.stats[me].remote_sent(p),
                   qPrintable(what + " bytes of " + comm_purpose_name(p)));
      }
    }
}

QTEST_GUILESS_MAIN(TestMokDispatcher)
#include "test_mok_dispatcher.moc"