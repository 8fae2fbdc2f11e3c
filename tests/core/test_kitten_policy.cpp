// KittenPolicy: which keeper each (layer, kind) gets by mode, warm-up, kinds prefixes and
// per-layer overrides; the rank/error metrics; the adaptive schedule reacting to measured
// error through the saved inputs it hands out.
#include <QtTest>

#include "core/kittens/kitten_policy.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {
KittensConfig custom(const char* method, int rank) {
  KittensConfig c;
  c.mode = "custom";
  c.method = method;
  c.rank = rank;
  return c;
}

Tensor matrix_of_rank(int64_t n, int64_t d, int k, uint64_t stream) {
  Tensor x({n, d});
  for (int j = 0; j < k; ++j)
    for (int64_t i = 0; i < n; ++i) {
      const double u = counter_normal(5, stream + j, i);
      for (int64_t c = 0; c < d; ++c) x[i * d + c] += static_cast<real>(u * counter_normal(6, stream + j, c));
    }
  return x;
}
}  // namespace

class TestKittenPolicy : public QObject {
  Q_OBJECT
 private slots:
  void exactModeKeepsEverything() {
    KittensConfig c;  // mode exact
    KittenPolicy p(c, 4, 1, 100);
    QVERIFY(p.all_exact());
    QCOMPARE(p.choose_linear(0, "attn.qkv.input").method, SavedTensorMethod::exact);
    QCOMPARE(p.choose_elementwise(0, "norm1.output").method, SavedTensorMethod::exact);
    QVERIFY(!p.make_linear_input(0, "attn.qkv.input"));
    QCOMPARE(p.rank_in_force(2), 0);
  }

  void customModeKindsAndLayers() {
    KittensConfig c = custom("rsvd", 12);
    c.kinds["moe.expert"] = {"lowbit", -1, 4};
    c.kinds["moe.expert.down"] = {"sketch", 6, -1};  // longer prefix wins
    c.kinds["swiglu"] = {"recompute", -1, -1};
    c.layers[3] = {"exact", "", -1, -1};
    c.layers[1] = {"", "subspace", 20, -1};
    KittenPolicy p(c, 4, 1, 100);
    QVERIFY(!p.all_exact());
    auto a = p.choose_linear(0, "attn.qkv.input");
    QCOMPARE(a.method, SavedTensorMethod::rsvd);
    QCOMPARE(a.rank, 12);
    auto up = p.choose_linear(0, "moe.expert.up.input");
    QCOMPARE(up.method, SavedTensorMethod::lowbit);
    QCOMPARE(up.bits, 4);
    auto down = p.choose_linear(0, "moe.expert.down.input");
    QCOMPARE(down.method, SavedTensorMethod::sketch);
    QCOMPARE(down.rank, 6);
    QCOMPARE(p.choose_elementwise(0, "swiglu.gate").method, SavedTensorMethod::recompute);
    QCOMPARE(p.choose_elementwise(0, "norm1.output").method, SavedTensorMethod::exact);  // elementwise: auto → exact
    QCOMPARE(p.choose_linear(3, "attn.qkv.input").method, SavedTensorMethod::exact);
    QCOMPARE(p.rank_in_force(3), 0);
    auto l1 = p.choose_linear(1, "attn.qkv.input");
    QCOMPARE(l1.method, SavedTensorMethod::subspace);
    QCOMPARE(l1.rank, 20);
    QCOMPARE(p.rank_in_force(1), 20);
    QCOMPARE(p.rank_in_force(0), 12);
  }

  void kittenModeUsesThePreset() {
    KittensConfig c;
    c.mode = "kitten";
    KittenPolicy p(c, 2, 1, 100);
    QCOMPARE(p.choose_elementwise(0, "attn_norm.input").method, SavedTensorMethod::lowbit);
    QCOMPARE(p.choose_linear(0, "moe.expert.up.input").method, SavedTensorMethod::lowbit);
    QCOMPARE(p.choose_linear(0, "moe.expert.up.input").bits, 4);
    QVERIFY(is_elementwise_kind("attn_norm.input"));
    QVERIFY(is_elementwise_kind("moe.expert.act.input"));
    QVERIFY(is_elementwise_kind("attn.qkv"));
    QVERIFY(!is_elementwise_kind("attn.qkv.input"));
    QVERIFY(!is_elementwise_kind("head.input"));
    QVERIFY(p.choose_linear(0, "attn.qkv.input").method != SavedTensorMethod::exact);
    c.elementwise = "exact";
    KittenPolicy q(c, 2, 1, 100);
    QCOMPARE(q.choose_elementwise(0, "attn_norm.input").method, SavedTensorMethod::exact);
    QVERIFY(!q.make_elementwise_copy(0, "attn_norm.input"));
    QVERIFY(p.make_elementwise_copy(0, "attn_norm.input"));
  }

  void warmupIsExact() {
    KittensConfig c = custom("sketch", 8);
    c.warmup_steps = 10;
    KittenPolicy p(c, 2, 1, 100);
    QCOMPARE(p.choose_linear(0, "attn.qkv.input").method, SavedTensorMethod::exact);
    QCOMPARE(p.rank_in_force(0), 0);
    p.set_step(10);
    QCOMPARE(p.choose_linear(0, "attn.qkv.input").method, SavedTensorMethod::sketch);
    QCOMPARE(p.rank_in_force(0), 8);
  }

  void metricsAndAdaptiveRank() {
    KittensConfig c = custom("rsvd", 8);
    c.schedule = "adaptive";
    c.min_rank = 2;
    c.max_rank = 16;
    c.target_error = 0.05;
    KittenPolicy p(c, 2, 1, 100);
    // Layer 0 sees rank-3 data (rank 8 reconstructs it: error ≈ 0 → rank falls);
    // layer 1 sees full-rank noise (error ≫ 0.05 → rank rises).
    const Tensor low = matrix_of_rank(64, 32, 3, 10), full = matrix_of_rank(64, 32, 32, 100);
    const MemTag t0{MemCategory::saved_activations, 0, "attn.qkv.input"};
    const MemTag t1{MemCategory::saved_activations, 1, "attn.qkv.input"};
    int r0 = p.rank_in_force(0), r1 = p.rank_in_force(1);
    QCOMPARE(r0, 8);
    for (int step = 1; step <= 4; ++step) {
      auto s0 = p.make_linear_input(0, "attn.qkv.input");
      auto s1 = p.make_linear_input(1, "attn.qkv.input");
      s0->save(low, t0);
      s1->save(full, t1);
      QVERIFY(p.current_error(0) < 1e-3);
      QVERIFY(p.current_error(1) > 0.2);
      p.set_step(step);
      QVERIFY(p.rank_in_force(0) < r0);
      QVERIFY(p.rank_in_force(1) > r1);
      r0 = p.rank_in_force(0);
      r1 = p.rank_in_force(1);
    }
    const auto m = p.metrics();
    QCOMPARE(m.size(), size_t(4));
    QCOMPARE(QString::fromStdString(m[0].first), QString("kittens/rank/layer0"));
    QCOMPARE(m[0].second, double(r0));
    QCOMPARE(QString::fromStdString(m[1].first), QString("kittens/error/layer0"));
    QVERIFY(m[3].second > 0.2);
  }

  // A step may be recorded and replayed (CUDA graphs) only where nothing is chosen per save.
  void replayableOnlyWhereNothingIsChosenPerStep() {
    KittensConfig k;
    k.mode = "kitten";  // the preset: every linear input 4-bit, whatever `method` says
    QVERIFY(KittenPolicy(k, 2, 1, 100).replayable_from(0));
    KittensConfig warm = k;
    warm.warmup_steps = 10;  // exact until step 10, then low-bit copies
    QVERIFY(!KittenPolicy(warm, 2, 1, 100).replayable_from(9));
    QVERIFY(KittenPolicy(warm, 2, 1, 100).replayable_from(10));
    KittensConfig stochastic = k;
    stochastic.rounding = "stochastic";  // a draw per step
    QVERIFY(!KittenPolicy(stochastic, 2, 1, 100).replayable_from(0));
    KittensConfig sketched = k;
    sketched.kinds["attn.qkv.input"] = {"sketch", 8, -1};  // fitted anew each step
    QVERIFY(!KittenPolicy(sketched, 2, 1, 100).replayable_from(0));
    QVERIFY(!KittenPolicy(custom("sketch", 8), 2, 1, 100).replayable_from(0));
    KittensConfig lowbit = custom("lowbit", 0);
    QVERIFY(KittenPolicy(lowbit, 2, 1, 100).replayable_from(0));
    lowbit.layers[1] = {"", "rsvd", 8, -1};  // one layer low-rank
    QVERIFY(!KittenPolicy(lowbit, 2, 1, 100).replayable_from(0));
    KittensConfig unlisted = k;
    unlisted.kinds[""] = {"lowrank", -1, -1};  // back to `method` (sketch)
    QVERIFY(!KittenPolicy(unlisted, 2, 1, 100).replayable_from(0));
  }

  // A replayed step's error metrics: the recorded step's sums, put back after each replay.
  void replayedStepStatsComeBack() {
    KittensConfig c = custom("rsvd", 4);
    KittenPolicy p(c, 1, 1, 100);
    const MemTag t0{MemCategory::saved_activations, 0, "attn.qkv.input"};
    auto s = p.make_linear_input(0, "attn.qkv.input");
    s->save(matrix_of_rank(64, 32, 32, 7), t0);
    const double recorded = p.current_error(0);
    QVERIFY(recorded > 0.0);
    p.remember_step_stats();
    p.set_step(1);  // the next step starts: its sums are empty until it saves
    QCOMPARE(p.current_error(0), -1.0);
    p.restore_step_stats();  // a replay of the recorded step
    QCOMPARE(p.current_error(0), recorded);
    p.set_step(2);
    QCOMPARE(p.measured_error(0), recorded);
  }

  void badConfigsAreNamed() {
    KittensConfig c = custom("svd", 8);
    QVERIFY(kitten_config_problem(c).find("kittens.method") != std::string::npos);
    c = custom("sketch", 8);
    c.kinds["attn"] = {"zip", -1, -1};
    QVERIFY(kitten_config_problem(c).find("kittens.kinds.attn.method") != std::string::npos);
    c = custom("sketch", 8);
    c.bits = 3;
    QVERIFY(kitten_config_problem(c).find("kittens.bits") != std::string::npos);
    c = custom("sketch", 8);
    QVERIFY(kitten_config_problem(c).empty());
  }
};

QTEST_GUILESS_MAIN(TestKittenPolicy)
#include "test_kitten_policy.moc"
