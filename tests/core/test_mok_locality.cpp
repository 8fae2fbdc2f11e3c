// Locality-aware routing (core/routing/locality_policy.h) and the dispatcher setup from a
// config (core/parallel/mok_dispatch_setup.h):
//  - without a policy, or with margin 0 and no ties, the choice is plain top-k;
//  - a local expert takes a slot exactly when it is within the margin of the best remote one;
//  - on a router over random tokens, the fraction of pairs routed to local experts grows with
//    the margin and reaches 1 when every slot can be filled locally;
//  - the config builds the dispatcher and cost parameters it names, and the locality loss
//    (routing.locality_aux_coef) with this rank's mask only when R > 1 and the coef is > 0;
//  - trained on ranks whose tokens differ, the locality loss moves routing toward each
//    rank's own experts; without it the same training leaves the local fraction lower.
#include <QtTest>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatch_setup.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/util/counter_rng.h"

using namespace mok;

class TestMokLocality : public QObject {
  Q_OBJECT
 private slots:
  void plainTopKWithoutPolicy();
  void localExpertWinsOnlyWithinMargin();
  void routerLocalFractionGrowsWithMargin();
  void configBuildsDispatcherAndCostParams();
  void configSetsLocalityLossOnlyWithRanksAndCoef();
  void localityLossPullsRankCorrelatedTokensHome();
};

namespace {

std::vector<int32_t> sorted_top_k(const std::vector<real>& p, int k) {
  std::vector<int32_t> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

}  // namespace

void TestMokLocality::plainTopKWithoutPolicy() {
  const int E = 8, k = 3;
  LocalityPolicy zero{{1, 1, 0, 0, 0, 0, 0, 0}, 0.0};
  for (uint64_t t = 0; t < 200; ++t) {
    std::vector<real> p(E);
    for (int e = 0; e < E; ++e) p[e] = static_cast<real>(counter_uniform(3, t, e));
    std::vector<int32_t> a(k), b(k);
    select_top_k(p.data(), E, k, nullptr, a.data());
    select_top_k(p.data(), E, k, &zero, b.data());  // random values: no exact ties
    QCOMPARE(a, sorted_top_k(p, k));
    QCOMPARE(b, a);
  }
}

void TestMokLocality::localExpertWinsOnlyWithinMargin() {
  // Experts 0..3; 2 and 3 are local. Best remote 0.40, best local 0.30.
  const std::vector<real> p = {real(0.40), real(0.25), real(0.30), real(0.05)};
  std::vector<int32_t> ch(2);
  LocalityPolicy narrow{{0, 0, 1, 1}, 0.05};
  select_top_k(p.data(), 4, 2, &narrow, ch.data());
  QCOMPARE(ch, (std::vector<int32_t>{0, 2}));  // 0.30 < 0.40 − 0.05: remote 0 first
  LocalityPolicy wide{{0, 0, 1, 1}, 0.11};
  select_top_k(p.data(), 4, 2, &wide, ch.data());
  QCOMPARE(ch, (std::vector<int32_t>{2, 0}));  // 0.30 ≥ 0.29: local first; then 0 (0.05 < 0.40 − 0.11)
  LocalityPolicy all{{0, 0, 1, 1}, 1.0};
  select_top_k(p.data(), 4, 2, &all, ch.data());
  QCOMPARE(ch, (std::vector<int32_t>{2, 3}));
  std::vector<int32_t> three(3);  // more slots than local experts: the rest by score
  select_top_k(p.data(), 4, 3, &all, three.data());
  QCOMPARE(three, (std::vector<int32_t>{2, 3, 0}));
}

void TestMokLocality::routerLocalFractionGrowsWithMargin() {
  const int E = 8, k = 2, R = 4;
  const int64_t d = 16, n = 256;
  const ExpertPlacement place = ExpertPlacement::contiguous(E, R);
  Tensor x({n, d});
  for (int64_t i = 0; i < n * d; ++i) x[i] = static_cast<real>(counter_normal(9, 1, i));
  double last = -1.0;
  for (double margin : {0.0, 0.02, 0.1, 1.0}) {
    TopKRouter router("r", d, E, k, 0.5, 77, 0, 0.01, 0.001, 0.0);
    const int rank = 1;
    router.set_locality(locality_policy_for(place, rank, margin));
    RoutingDecision r = router.forward(x, false, nullptr);
    int64_t local = 0;
    for (int e : expert_ids(r)) local += place.owner(e) == rank;
    const double frac = static_cast<double>(local) / static_cast<double>(n * k);
    QVERIFY2(frac >= last, qPrintable(QString("margin %1: %2 < %3").arg(margin).arg(frac).arg(last)));
    if (margin == 1.0) QCOMPARE(frac, 1.0);  // two local experts, top-2
    if (margin == 0.0) QVERIFY(frac < 0.5);  // a quarter of the experts are local
    last = frac;
    // gates still sum to 1 per token
    for (int64_t t = 0; t < n; ++t) QVERIFY(std::fabs(r.gate[t * k] + r.gate[t * k + 1] - 1.0) < 1e-5);
  }
}

void TestMokLocality::configBuildsDispatcherAndCostParams() {
  ExperimentConfig c;
  c.model.experts = 4;
  c.routing.dispatcher = "mok";
  c.routing.shadow = "never";
  c.parallel.link_gbps = 250;
  c.parallel.link_latency_us = 3;
  MokCostParams p = mok_cost_params(c);
  QCOMPARE(p.link_gbps, 250.0);
  QCOMPARE(p.latency_us, 3.0);
  QCOMPARE(p.mode, ShadowMode::never);
  c.routing.cost_link_gbps = 12.5;
  QCOMPARE(mok_cost_params(c).link_gbps, 12.5);
  c.parallel.link_gbps = 0;
  c.routing.cost_link_gbps = 0;
  QCOMPARE(mok_cost_params(c).link_gbps, 25.0);
  run_local_ranks(2, [&](Communicator& comm) {
    const ExpertPlacement place = ExpertPlacement::contiguous(4, 2);
    QCOMPARE(make_expert_dispatcher(c, comm, place, 0)->name(), std::string("mok"));
    ExperimentConfig classic = c;
    classic.routing.dispatcher = "classic";
    QCOMPARE(make_expert_dispatcher(classic, comm, place, 0)->name(), std::string("classic"));
    TopKRouter router("r", 8, 4, 2, 0.1, 1, 0, 0.0, 0.0, 0.0);
    ExperimentConfig loc = c;
    loc.routing.policy = "locality";
    loc.routing.locality_margin = 0.25;
    apply_routing_policy(loc, place, comm.rank(), router);
    QVERIFY(router.locality().enabled());
    QCOMPARE(router.locality().margin, 0.25);
    QCOMPARE(static_cast<int>(router.locality().local[2 * comm.rank()]), 1);
    QCOMPARE(static_cast<int>(router.locality().local[2 * (1 - comm.rank())]), 0);
    apply_routing_policy(c, place, comm.rank(), router);
    QVERIFY(!router.locality().enabled());
  });
}

void TestMokLocality::configSetsLocalityLossOnlyWithRanksAndCoef() {
  ExperimentConfig c;
  c.model.experts = 4;
  c.routing.locality_aux_coef = 0.05;
  for (const char* policy : {"topk", "locality"}) {
    c.routing.policy = policy;
    const ExpertPlacement two = ExpertPlacement::contiguous(4, 2);
    for (int rank : {0, 1}) {
      TopKRouter router("r", 8, 4, 2, 0.1, 1, 0, 0.0, 0.0, 0.0);
      apply_routing_policy(c, two, rank, router);
      QVERIFY(router.locality_loss_active());
      QCOMPARE(router.locality_coef(), 0.05);
      QCOMPARE(router.locality().enabled(), std::string(policy) == "locality");
      ExperimentConfig off = c;
      off.routing.locality_aux_coef = 0.0;
      apply_routing_policy(off, two, rank, router);
      QVERIFY(!router.locality_loss_active());
    }
    TopKRouter single("r", 8, 4, 2, 0.1, 1, 0, 0.0, 0.0, 0.0);
    apply_routing_policy(c, ExpertPlacement::contiguous(4, 1), 0, single);
    QVERIFY(!single.locality_loss_active());  // one rank: every expert is local
  }
  TopKRouter router("r", 8, 4, 2, 0.1, 1, 0, 0.0, 0.0, 0.0);
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router.set_locality_loss({1, 0}, 0.1));     // wrong size
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router.set_locality_loss({1, 0, 0, 1}, -1.0));
}

void TestMokLocality::localityLossPullsRankCorrelatedTokensHome() {
  // Two ranks share one router (data parallel: gradients summed, one SGD step on both
  // copies). Rank r's tokens are drawn around its own mean, so the router can tell them
  // apart; with the locality loss alone as objective the share of pairs routed to the
  // token's own rank rises from about a half, without it nothing moves.
  const int E = 4, k = 1, R = 2;
  const int64_t d = 8, n = 64;
  const ExpertPlacement place = ExpertPlacement::contiguous(E, R);
  auto tokens = [&](int rank, int step) {
    Tensor x({n, d});
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i)
        x[t * d + i] = static_cast<real>(counter_normal(21, static_cast<uint64_t>(step * R + rank), t * d + i) +
                                         (i < 2 ? (rank ? -1.0 : 1.0) : 0.0));
    return x;
  };
  auto local_fraction_after = [&](double coef, int steps) {
    std::vector<std::unique_ptr<TopKRouter>> routers;
    for (int r = 0; r < R; ++r) {
      routers.push_back(std::make_unique<TopKRouter>("r", d, E, k, 0.2, 5, 0, 0.0, 0.0, 0.0));
      apply_routing_policy([&] {
        ExperimentConfig c;
        c.routing.locality_aux_coef = coef;
        return c;
      }(), place, r, *routers.back());
    }
    const int64_t W = d * E;
    for (int step = 0; step < steps; ++step) {
      std::vector<double> g(W, 0.0);
      for (int r = 0; r < R; ++r) {
        Tensor x = tokens(r, step);
        routers[r]->proj().weight().grad.zero();
        RoutingDecision dec = routers[r]->forward(x, true, nullptr);
        routers[r]->backward(Tensor({n * k}), real(1) / R);  // zero gate gradients
        for (int64_t i = 0; i < W; ++i) g[i] += routers[r]->proj().weight().grad[i];
      }
      for (int r = 0; r < R; ++r)
        for (int64_t i = 0; i < W; ++i) routers[r]->proj().weight().value[i] -= static_cast<real>(2.0 * g[i]);
    }
    int64_t local = 0;
    for (int r = 0; r < R; ++r) {
      RoutingDecision dec = routers[r]->forward(tokens(r, 1000), false, nullptr);
      for (int e : expert_ids(dec)) local += place.owner(e) == r;
    }
    return static_cast<double>(local) / static_cast<double>(R * n * k);
  };
  const double before = local_fraction_after(1.0, 0), plain = local_fraction_after(0.0, 30),
               trained = local_fraction_after(1.0, 30);
  qInfo("local fraction: untrained %.3f, 30 steps coef 0: %.3f, coef 1: %.3f", before, plain, trained);
  QCOMPARE(plain, before);  // no objective, no gradient: the router does not move
  // Direction, with room: more than half of the pairs that went remote come home.
  QVERIFY2(trained - before > 0.5 * (1.0 - before), qPrintable(QString("%1 vs %2").arg(trained).arg(before)));
}

QTEST_GUILESS_MAIN(TestMokLocality)
#include "test_mok_locality.moc"
