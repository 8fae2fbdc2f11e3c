// TopKRouter with a count reducer (expert parallelism: global load fractions):
//  - the reducer runs in finish_forward, not in forward, once, on E + 1 counts (the pairs per
//    expert, then the tokens); forwards that keep nothing and ask for no losses never call it;
//  - with an identity reducer (one rank) the losses and backward's dx are bitwise those of a
//    router without one;
//  - a reducer that doubles the counts (two ranks with the same tokens) keeps the fractions,
//    so the losses are again the plain router's, bit for bit;
//  - finish_forward with other losses than the forward's throws; a forward drops the state a
//    forward that never finished left behind.
#include <QtTest>

#include <vector>

#include "core/backend/exec_context.h"
#include "core/routing/topk_router.h"
#include "core/util/counter_rng.h"

using namespace mok;

class TestRouterCountReducer : public QObject {
  Q_OBJECT
 private slots:
  void reducerRunsInFinishOnly();
  void identityReducerIsBitwiseThePlainRouter();
  void doubledCountsKeepTheFractions();
  void finishChecksItsLosses();
};

namespace {

constexpr int64_t kD = 16, kN = 96;
constexpr int kE = 8, kK = 2;

TopKRouter make_router() { return TopKRouter("r", kD, kE, kK, 0.5, 77, 0, 0.01, 0.001, 0.0); }

Tensor random_matrix(int64_t rows, int64_t cols, uint64_t stream) {
  Tensor t({rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t[i] = static_cast<real>(counter_normal(21, stream, i));
  return t;
}

std::vector<real> values(const Tensor& t) {
  std::vector<real> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t[i];
  return v;
}

}  // namespace

void TestRouterCountReducer::reducerRunsInFinishOnly() {
  TopKRouter router = make_router();
  std::vector<std::vector<int64_t>> calls;
  router.set_count_reducer([&](int64_t* c, int64_t n) { calls.emplace_back(c, c + n); });
  const Tensor x = random_matrix(kN, kD, 1);
  RouterLosses losses;
  router.forward(x, true, &losses);
  QVERIFY(calls.empty());
  QVERIFY(!losses.sums);
  router.finish_forward(&losses);
  QCOMPARE(calls.size(), size_t{1});
  QCOMPARE(calls[0].size(), size_t{kE + 1});
  int64_t pairs = 0;
  for (int e = 0; e < kE; ++e) pairs += calls[0][static_cast<size_t>(e)];
  QCOMPARE(pairs, kN * kK);  // no capacity: every pair routed
  QCOMPARE(calls[0][kE], kN);
  QVERIFY(losses.sums != nullptr);
  router.finish_forward(&losses);  // nothing pending: no second exchange
  QCOMPARE(calls.size(), size_t{1});
  router.forward(x, false, nullptr);  // decoding: no losses, nothing kept
  router.finish_forward(nullptr);
  QCOMPARE(calls.size(), size_t{1});
}

void TestRouterCountReducer::identityReducerIsBitwiseThePlainRouter() {
  TopKRouter plain = make_router(), reduced = make_router();
  reduced.set_count_reducer([](int64_t*, int64_t) {});
  const Tensor x = random_matrix(kN, kD, 2);
  RouterLosses lp, lr;
  const RoutingDecision rp = plain.forward(x, true, &lp);
  const RoutingDecision rr = reduced.forward(x, true, &lr);
  reduced.finish_forward(&lr);
  QCOMPARE(expert_ids(rr), expert_ids(rp));
  const RouterLosses::Values vp = lp.read(), vr = lr.read();
  QCOMPARE(vr.aux, vp.aux);
  QCOMPARE(vr.z, vp.z);
  QVERIFY(vp.aux > 0.0 && vp.z > 0.0);
  const Tensor dgate_column = random_matrix(kN * kK, 1, 3);
  const Tensor dgate = dgate_column.view(0, {kN * kK});
  QCOMPARE(values(reduced.backward(dgate, 1.0)), values(plain.backward(dgate, 1.0)));
}

void TestRouterCountReducer::doubledCountsKeepTheFractions() {
  TopKRouter plain = make_router(), reduced = make_router();
  reduced.set_count_reducer([](int64_t* c, int64_t n) {
    for (int64_t i = 0; i < n; ++i) c[i] *= 2;
  });
  const Tensor x = random_matrix(kN, kD, 4);
  RouterLosses lp, lr;
  plain.forward(x, false, &lp);
  reduced.forward(x, false, &lr);
  reduced.finish_forward(&lr);
  // f_e = 2·load_e / (2·n·k): doubling both is exact in floating point, so the same fractions
  // bit for bit and the same aux loss.
  QCOMPARE(lr.read().aux, lp.read().aux);
  QCOMPARE(lr.read().z, lp.read().z);
}

void TestRouterCountReducer::finishChecksItsLosses() {
  TopKRouter router = make_router();
  int calls = 0;
  router.set_count_reducer([&](int64_t*, int64_t) { ++calls; });
  const Tensor x = random_matrix(kN, kD, 5);
  RouterLosses mine, other;
  router.forward(x, true, &mine);
  QVERIFY_THROWS_EXCEPTION(std::logic_error, router.finish_forward(&other));
  QCOMPARE(calls, 0);
  // A forward that never finished leaves nothing behind for the next one.
  router.forward(x, true, &mine);
  router.forward(x, false, nullptr);
  router.finish_forward(nullptr);
  QCOMPARE(calls, 0);
}

QTEST_GUILESS_MAIN(TestRouterCountReducer)
#include "test_router_count_reducer.moc"
