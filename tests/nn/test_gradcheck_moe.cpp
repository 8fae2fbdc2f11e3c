// Gradient checks for routing and the mixture-of-experts layer (double precision), plus the
// routing rules: tie-break by lower expert index, capacity drops counted in token order.
// Top-k is piecewise constant: random inputs keep every choice away from a tie, so the
// finite differences never cross a routing boundary.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/model/moe_layer.h"
#include "core/routing/topk_router.h"
#include "gradcheck.h"

using namespace mok;
using gradcheck::fill_normal;

namespace {
// Routing decisions keep expert ids as an i32 tensor.
int32_t expert_at(const RoutingDecision& r, int64_t p) { return r.expert.data_as<int32_t>()[p]; }
std::vector<int32_t> experts_of(const RoutingDecision& r) {
  const int32_t* e = r.expert.data_as<int32_t>();
  return {e, e + r.expert.numel()};
}
Tensor host_tensor(const std::vector<real>& v) {
  Tensor t({static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data());
  return t;
}
}  // namespace
using gradcheck::weighted_sum;

class TestGradcheckMoe : public QObject {
  Q_OBJECT
 private slots:
  void router_data() {
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("k");
    QTest::addColumn<double>("capacity");
    QTest::newRow("E4 k2") << 4 << 2 << 0.0;
    QTest::newRow("E5 k1") << 5 << 1 << 0.0;
    QTest::newRow("E6 k3 capacity 0.6") << 6 << 3 << 0.6;
  }
  void router() {
    QFETCH(int, experts);
    QFETCH(int, k);
    QFETCH(double, capacity);
    const int d = 7, n = 13;
    TopKRouter router("moe", d, experts, k, 0.8, 4, 0, 0.3, 0.05, capacity);
    Tensor x({n, d}), w({n * k});
    fill_normal(x, 12, 1);
    fill_normal(w, 12, 2);
    auto objective = [&] {
      RouterLosses losses;
      RoutingDecision r = router.forward(x, false, &losses);
      const RouterLosses::Values v = losses.read();
      double s = v.aux + v.z;
      for (int64_t p = 0; p < n * k; ++p) s += (expert_at(r, p) >= 0 ? w[p] : 0.0) * r.gate[p];
      return s;
    };
    RouterLosses losses;
    RoutingDecision r = router.forward(x, true, &losses);
    QVERIFY(losses.read().aux > 0);
    QVERIFY(losses.read().z > 0);
    std::vector<real> dgate(n * k);
    for (int64_t p = 0; p < n * k; ++p) dgate[p] = expert_at(r, p) >= 0 ? w[p] : 0.0;
    Tensor dx = router.backward(host_tensor(dgate), 1.0);
    GRADCHECK("router.input", objective, x.data(), dx.data(), x.numel());
    GRADCHECK("router.weight", objective, router.proj().weight().value.data(),
              router.proj().weight().grad.data(), router.proj().weight().value.numel());
  }

  void auxAndZLossGradientsAlone() {
    // No gate gradient at all: only the load-balancing and z losses drive the router.
    const int d = 5, n = 11, E = 4, k = 2;
    TopKRouter router("moe", d, E, k, 0.8, 6, 0, 0.5, 0.2, 0.0);
    Tensor x({n, d});
    fill_normal(x, 13, 1);
    auto objective = [&] {
      RouterLosses l;
      router.forward(x, false, &l);
      const RouterLosses::Values v = l.read();
      return 2.0 * (v.aux + v.z);
    };
    router.forward(x, true, nullptr);
    Tensor dx = router.backward(Tensor({n * k}), 2.0);  // zero gate gradients
    GRADCHECK("router.aux+z.input", objective, x.data(), dx.data(), x.numel());
  }

  void localityLoss_data() {
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("gates");
    QTest::newRow("alone, E4 k2") << 4 << 2 << false;
    QTest::newRow("with gates, aux and z, E6 k3") << 6 << 3 << true;
  }
  void localityLoss() {
    // loc = coef · mean_t Σ_{e not local} p_te: its value from the logits computed here, and
    // its gradient (alone, or beside the gates, aux and z) against central differences.
    QFETCH(int, experts);
    QFETCH(int, k);
    QFETCH(bool, gates);
    const int d = 5, n = 9;
    const double coef = 0.7;
    TopKRouter router("moe", d, experts, k, 0.8, 9, 0, gates ? 0.3 : 0.0, gates ? 0.05 : 0.0, 0.0);
    std::vector<uint8_t> local(experts, 0);
    local[1] = local[2] = 1;  // this rank holds experts 1 and 2
    router.set_locality_loss(local, coef);
    QVERIFY(router.locality_loss_active());
    Tensor x({n, d}), w({n * k});
    fill_normal(x, 15, 1);
    fill_normal(w, 15, 2);
    auto objective = [&] {
      RouterLosses l;
      RoutingDecision r = router.forward(x, false, &l);
      const RouterLosses::Values v = l.read();
      double s = 1.5 * (v.aux + v.z + v.locality);
      if (gates)
        for (int64_t p = 0; p < n * k; ++p) s += w[p] * r.gate[p];
      return s;
    };
    // Expected value: softmax of x·Wr, mass outside experts 1 and 2.
    const real* W = router.proj().weight().value.data();  // (d, E)
    double expected = 0.0;
    for (int t = 0; t < n; ++t) {
      std::vector<double> l(experts, 0.0);
      for (int e = 0; e < experts; ++e)
        for (int i = 0; i < d; ++i) l[e] += x[t * d + i] * W[i * experts + e];
      double m = *std::max_element(l.begin(), l.end()), s = 0.0;
      for (double& v : l) s += (v = std::exp(v - m));
      for (int e = 0; e < experts; ++e)
        if (!local[e]) expected += l[e] / s;
    }
    expected *= coef / n;
    RouterLosses losses;
    RoutingDecision r = router.forward(x, true, &losses);
    const double locality = losses.read().locality;
    QVERIFY(locality > 0);
    QVERIFY2(std::abs(locality - expected) <= 1e-12 * expected,
             qPrintable(QString("locality %1 vs %2").arg(locality, 0, 'g', 17).arg(expected, 0, 'g', 17)));
    std::vector<real> dgate(n * k, 0.0);
    if (gates)
      for (int64_t p = 0; p < n * k; ++p) dgate[p] = w[p];
    router.proj().weight().grad.zero();
    Tensor dx = router.backward(host_tensor(dgate), 1.5);
    GRADCHECK("router.locality.input", objective, x.data(), dx.data(), x.numel());
    GRADCHECK("router.locality.weight", objective, router.proj().weight().value.data(),
              router.proj().weight().grad.data(), router.proj().weight().value.numel());
  }

  void localityLossOffLeavesRouterBitwisePlain() {
    // coef 0 with a mask, or a coef with no mask (one rank): the same bits as a plain router.
    const int d = 6, n = 21, E = 4, k = 2;
    Tensor x({n, d});
    fill_normal(x, 16, 1);
    std::vector<real> dgate(n * k);
    for (int64_t p = 0; p < n * k; ++p) dgate[p] = real(0.1) * static_cast<real>(p % 7) - real(0.3);
    struct Out {
      RoutingDecision r;
      RouterLosses::Values l;
      Tensor dx, dw;
    };
    auto run = [&](const std::vector<uint8_t>& mask, double coef) {
      TopKRouter router("moe", d, E, k, 0.8, 10, 0, 0.2, 0.01, 0.0);
      router.set_locality_loss(mask, coef);
      Out o;
      RouterLosses losses;
      o.r = router.forward(x, true, &losses);
      o.l = losses.read();
      o.dx = router.backward(host_tensor(dgate), 0.5);
      o.dw = router.proj().weight().grad.clone();
      return o;
    };
    auto same = [](const Tensor& a, const Tensor& b) {
      return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(real)) == 0;
    };
    const Out plain = run({}, 0.0);
    const Out masked = run({0, 1, 1, 0}, 0.0);
    const Out no_mask = run({}, 0.5);
    const Out on = run({0, 1, 1, 0}, 0.5);
    for (const Out* o : {&masked, &no_mask}) {
      QCOMPARE(experts_of(o->r), experts_of(plain.r));
      QVERIFY(std::memcmp(o->r.gate.data(), plain.r.gate.data(), n * k * sizeof(real)) == 0);
      QVERIFY(std::memcmp(&o->l.aux, &plain.l.aux, sizeof(double)) == 0);
      QVERIFY(std::memcmp(&o->l.z, &plain.l.z, sizeof(double)) == 0);
      QCOMPARE(o->l.locality, 0.0);
      QVERIFY(same(o->dx, plain.dx));
      QVERIFY(same(o->dw, plain.dw));
    }
    // The check can fail: with the loss on, the gradients move (the routing does not).
    QCOMPARE(experts_of(on.r), experts_of(plain.r));
    QVERIFY(on.l.locality > 0);
    QVERIFY(!same(on.dx, plain.dx));
    QVERIFY(!same(on.dw, plain.dw));
  }

  void tiesGoToLowerExpertIndex() {
    TopKRouter router("moe", 4, 6, 3, 0.5, 1, 0, 0.0, 0.0, 0.0);
    router.proj().weight().value.zero();  // every probability equal
    Tensor x({3, 4});
    fill_normal(x, 1, 1);
    RoutingDecision r = router.forward(x, false, nullptr);
    for (int t = 0; t < 3; ++t)
      for (int s = 0; s < 3; ++s) {
        QCOMPARE(expert_at(r, t * 3 + s), s);
        QCOMPARE(r.gate[t * 3 + s], real(1) / 3);
      }
  }

  void capacityDropsAreCountedInTokenOrder() {
    const int n = 40, E = 4, k = 2;
    TopKRouter router("moe", 6, E, k, 1.0, 2, 0, 0.0, 0.0, 0.5);
    Tensor x({n, 6});
    fill_normal(x, 2, 1);
    RoutingDecision r = router.forward(x, false, nullptr);
    QCOMPARE(r.capacity, int64_t(10));  // ceil(0.5·40·2/4)
    int64_t expected = 0;
    for (int e = 0; e < E; ++e) expected += std::max<int64_t>(0, r.pairs.host_load()[e] - r.capacity);
    QVERIFY(expected > 0);
    QCOMPARE(r.dropped, expected);
    // Kept pairs of an expert are its first `capacity` pairs in (token, slot) order.
    TopKRouter dropless("moe", 6, E, k, 1.0, 2, 0, 0.0, 0.0, 0.0);
    RoutingDecision all = dropless.forward(x, false, nullptr);
    std::vector<int64_t> seen(E, 0);
    for (int64_t p = 0; p < n * k; ++p) {
      const int e = expert_at(all, p);
      QCOMPARE(expert_at(r, p), seen[e] < r.capacity ? e : -1);
      seen[e]++;
    }
  }

  void moeLayer_data() {
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("k");
    QTest::addColumn<double>("capacity");
    QTest::addColumn<bool>("shared");
    QTest::newRow("dropless") << 4 << 2 << 0.0 << false;
    QTest::newRow("capacity drops") << 4 << 2 << 0.5 << false;
    QTest::newRow("shared expert") << 3 << 1 << 0.0 << true;
    QTest::newRow("capacity + shared, k3") << 5 << 3 << 0.7 << true;
  }
  void moeLayer() {
    QFETCH(int, experts);
    QFETCH(int, k);
    QFETCH(double, capacity);
    QFETCH(bool, shared);
    MoeConfig c;
    c.d = 6;
    c.experts = experts;
    c.top_k = k;
    c.hidden = 5;
    c.shared_expert = shared;
    c.aux_loss_coef = 0.1;
    c.z_loss_coef = 0.01;
    c.capacity_factor = capacity;
    MoeLayer moe("layers.0.moe", c, 0.6, 0.6, 8, 0);
    const int n = 17;
    Tensor x({n, c.d}), w({n, c.d});
    fill_normal(x, 14, 1);
    fill_normal(w, 14, 2);
    const real scale = 0.5;
    auto objective = [&] {
      MoeStats st;
      Tensor y = moe.forward(x, false, &st);
      const RouterLosses::Values v = st.losses.read();
      return scale * (weighted_sum(y, w) + v.aux + v.z);
    };
    MoeStats stats;
    moe.forward(x, true, &stats);
    if (capacity > 0) QVERIFY(stats.dropped > 0);
    else QCOMPARE(stats.dropped, int64_t(0));
    int64_t routed = 0;
    for (int64_t l : stats.load->values<int64_t>()) routed += l;
    QCOMPARE(routed, int64_t(n) * k);
    Tensor ws = w.clone();
    for (int64_t i = 0; i < ws.numel(); ++i) ws[i] *= scale;
    Tensor dx = moe.backward(ws, scale);
    GRADCHECK("moe.input", objective, x.data(), dx.data(), x.numel());
    GRADCHECK("moe.router", objective, moe.router().proj().weight().value.data(),
              moe.router().proj().weight().grad.data(), moe.router().proj().weight().value.numel());
    for (int e = 0; e < experts; ++e) {
      Parameter& up = moe.experts().experts[e]->up().weight();
      Parameter& down = moe.experts().experts[e]->down().weight();
      bool used = false;
      for (int64_t i = 0; i < up.grad.numel(); ++i) used |= up.grad[i] != 0;
      if (!used) continue;  // an expert that got no tokens has no gradient
      GRADCHECK("moe.expert" + std::to_string(e) + ".w_up", objective, up.value.data(), up.grad.data(), up.value.numel());
      GRADCHECK("moe.expert" + std::to_string(e) + ".w_down", objective, down.value.data(), down.grad.data(), down.value.numel());
    }
    if (shared) {
      Parameter& up = moe.shared_expert()->up().weight();
      GRADCHECK("moe.shared.w_up", objective, up.value.data(), up.grad.data(), up.value.numel());
    }
  }
};

QTEST_GUILESS_MAIN(TestGradcheckMoe)
#include "test_gradcheck_moe.moc"
