// The saved-activation plan (core/plan/saved_activation_plan.h) against the memory tracker,
// kind by kind: after one training forward the tracker's bytes per (layer, kind) are the
// planned ones, to the byte, for exact, low-bit and low-rank keepers, dense and MoE layers,
// a shared expert, the kitten defaults and their exact warm-up; and the tracker holds no kind
// the plan does not list.
#include <QtTest>

#include <QSet>

#include <map>
#include <string>
#include <vector>

#include "core/model/language_model.h"
#include "core/plan/saved_activation_plan.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {

// A small model with a dense layer (0) and an MoE layer with a shared expert (1).
ExperimentConfig small_config(const std::string& mode) {
  ExperimentConfig c;
  c.seed = 7;
  c.data.tokenizer = "byte";
  c.data.seq_len = 32;
  c.train.batch = 4;
  c.train.steps = 10;
  c.model.layers = 2;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.expert_hidden = 48;
  c.model.dense_hidden = 80;
  c.model.moe_layers = "1";
  c.model.shared_expert = true;
  c.model.tie_embeddings = false;
  c.routing.capacity_factor = 0.0;  // dropless: tokens · top_k routed rows
  c.parallel.device = "cpu";
  c.kittens.mode = mode;
  return c;
}

using ByKind = std::map<std::pair<int, std::string>, int64_t>;

// Saved bytes per (layer, kind) after one forward at `step`, as the tracker counts them (a
// subspace basis, "<kind>.basis", counted with its kind as the plan does).
ByKind measure(const ExperimentConfig& c, int64_t step) {
  ModelOptions o;
  o.model = c.model;
  o.kittens = c.kittens;
  o.routing = c.routing;
  o.vocab_size = 256;
  o.max_seq_len = c.data.seq_len;
  o.seed = c.seed;
  o.train_steps = c.train.steps;
  MemoryTracker tracker;
  ByKind bytes;
  {
    ScopedMemoryTracker scope(tracker);
    LanguageModel m(o);
    const int n = c.train.batch * c.data.seq_len;
    std::vector<int32_t> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = static_cast<int32_t>(counter_bits(3, 1, i) % 256);
      y[i] = static_cast<int32_t>(counter_bits(3, 2, i) % 256);
    }
    m.set_step(step);
    m.zero_grad();
    m.forward(x.data(), y.data(), c.train.batch, c.data.seq_len);
    for (const auto& [key, b] : tracker.saved_by_layer_kind()) {
      std::string kind = key.second;
      if (kind.size() > 6 && kind.substr(kind.size() - 6) == ".basis") kind.resize(kind.size() - 6);
      bytes[{key.first, kind}] += b.live;
    }
    m.backward();
  }
  return bytes;
}

void check(const ExperimentConfig& c, int64_t step, const char* what) {
  const ByKind measured = measure(c, step);
  const std::vector<PlannedSavedTensor> plan = plan_saved_activations(c, step);
  ByKind planned;
  for (const PlannedSavedTensor& t : plan) planned[{t.layer, t.kind}] += static_cast<int64_t>(t.bytes);
  for (const auto& [key, b] : measured)
    QVERIFY2(b == 0 || planned.count(key),
             qPrintable(QString("%1: layer %2 kind %3 (%4 bytes) is not in the plan")
                            .arg(what).arg(key.first).arg(QString::fromStdString(key.second)).arg(b)));
  for (const PlannedSavedTensor& t : plan) {
    const auto it = measured.find({t.layer, t.kind});
    const int64_t got = it == measured.end() ? 0 : it->second;
    QVERIFY2(got == static_cast<int64_t>(t.bytes),
             qPrintable(QString("%1: layer %2 kind %3 kept %4: planned %5 bytes, tracker %6")
                            .arg(what).arg(t.layer).arg(QString::fromStdString(t.kind))
                            .arg(QString::fromStdString(t.kept)).arg(t.bytes, 0, 'f', 0).arg(got)));
  }
}

}  // namespace

class TestSavedActivationPlan : public QObject {
  Q_OBJECT
 private slots:
  void exactMatchesTheTracker() { check(small_config("exact"), 0, "exact"); }

  void kittenDefaultsMatchTheTracker() {
    const ExperimentConfig c = small_config("kitten");
    check(c, 0, "kitten");
    const std::vector<PlannedSavedTensor> plan = plan_saved_activations(c, 0);
    const std::vector<PlannedSavedTensor> exact = plan_saved_activations(small_config("exact"), 0);
    QVERIFY(saved_activation_bytes(plan) < 0.3 * saved_activation_bytes(exact));
  }

  void kittenWarmupIsExactButRecomputes() {
    ExperimentConfig c = small_config("kitten");
    c.kittens.warmup_steps = 3;
    check(c, 0, "warm-up");
    check(c, 3, "after warm-up");
    const double warm = saved_activation_bytes(plan_saved_activations(c, 0));
    const double steady = saved_activation_bytes(plan_saved_activations(c, 3));
    const double exact = saved_activation_bytes(plan_saved_activations(small_config("exact"), 0));
    QVERIFY(steady < warm && warm < exact);
  }

  void customMethodsMatchTheTracker() {
    ExperimentConfig c = small_config("custom");
    c.kittens.method = "sketch";
    c.kittens.rank = 8;
    c.kittens.elementwise = "lowbit";
    c.kittens.bits = 4;
    c.kittens.kinds["moe.expert"] = {"rsvd", 6, -1};
    c.kittens.kinds["attn.qkv.input"] = {"subspace", 5, -1};
    c.kittens.kinds["head"] = {"lowbit", -1, 8};
    c.kittens.kinds["attn.qkv"] = {"exact", -1, -1};
    check(c, 0, "custom");
    // Every kind of keeper is in play.
    QSet<QString> kept;
    for (const PlannedSavedTensor& t : plan_saved_activations(c, 0)) kept.insert(QString::fromStdString(t.kept));
    for (const char* k : {"exact", "lowbit 4", "lowbit 8", "sketch r=8", "rsvd r=6", "subspace r=5"})
      QVERIFY2(kept.contains(k), k);
    // Compact keeping rebuilds full-size tensors in backward; exact keeping does not.
    QVERIFY(restore_workspace_bytes(plan_saved_activations(c, 0)) > 0.0);
    QCOMPARE(restore_workspace_bytes(plan_saved_activations(small_config("exact"), 0)), 0.0);
    c.kittens.factor_bits = 4;
    c.kittens.layers[0].mode = "exact";
    check(c, 1, "custom, factor bits, layer 0 exact");
  }

  // What the memory plan takes as released before the last layer's attention backward runs:
  // that layer's FFN tensors (its norm, router, experts, shared expert) and Wo's input, as the
  // tracker holds them after forward; with activation checkpointing, the same (the block's
  // forward keeps them again).
  void releasedBeforeAttentionIsTheLastLayersFfnAndWoInput() {
    auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
    for (const char* mode : {"exact", "kitten"}) {
      const ExperimentConfig c = small_config(mode);
      int64_t want = 0;
      for (const auto& [key, b] : measure(c, 0))
        if (key.first == 1 && (starts(key.second, "ffn_norm.") || starts(key.second, "moe.") ||
                               starts(key.second, "mlp.") || key.second == "attn.out.input"))
          want += b;
      QVERIFY2(want > 0, mode);
      QCOMPARE(static_cast<int64_t>(released_before_attention_bytes(c, 0)), want);
    }
    ExperimentConfig checkpointed = small_config("exact");
    checkpointed.train.activation_checkpointing = true;
    QCOMPARE(released_before_attention_bytes(checkpointed, 0),
             released_before_attention_bytes(small_config("exact"), 0));
  }
};

QTEST_GUILESS_MAIN(TestSavedActivationPlan)
#include "test_saved_activation_plan.moc"
