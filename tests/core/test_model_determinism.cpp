// LanguageModel (float build): bitwise-identical loss and gradients for any thread count and
// across runs; the memory tracker sees every parameter, frees every saved activation after
// backward, and attention keeps O(seq) bytes per head (no (seq × seq) tensor).
#include <QtTest>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/model/language_model.h"
#include "core/model/moe_layer.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

using namespace mok;

namespace {

// The local dispatcher as the MoE layer sees a multi-rank one: it cannot gather its experts'
// rows again in backward, so they keep them.
class KeepingDispatcher final : public ExpertDispatcher {
 public:
  Tensor forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep) override {
    return inner_.forward(x, r, bank, keep);
  }
  Tensor backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) override {
    return inner_.backward(dy, bank, dgate);
  }
  std::string name() const override { return "keeping"; }

 private:
  LocalDispatcher inner_;
};

ModelOptions small_options() {
  ModelOptions o;
  o.model.layers = 2;
  o.model.d_model = 32;
  o.model.heads = 4;
  o.model.experts = 4;
  o.model.top_k = 2;
  o.model.expert_hidden = 48;
  o.model.dense_hidden = 64;
  o.model.moe_layers = "1";
  o.model.shared_expert = true;
  o.vocab_size = 64;
  o.max_seq_len = 80;
  o.seed = 7;
  return o;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
  int batch, seq;
};

Batch make_batch(int batch, int seq, uint64_t seed) {
  Batch b{{}, {}, batch, seq};
  for (int i = 0; i < batch * seq; ++i) {
    b.tokens.push_back(static_cast<int32_t>(counter_bits(seed, 1, i) % 64));
    b.targets.push_back(static_cast<int32_t>(counter_bits(seed, 2, i) % 64));
  }
  return b;
}

struct StepResult {
  double loss, aux, z;
  std::vector<std::vector<real>> grads;
};

StepResult train_step(int threads, const ModelOptions& o, const Batch& b) {
  ThreadPool pool(threads);
  ScopedThreadPool scope(pool);
  LanguageModel model(o);
  model.zero_grad();
  ForwardStats s = model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
  model.backward(1.0);
  StepResult r{s.loss, s.aux_loss, s.z_loss, {}};
  for (Parameter* p : model.parameters()) r.grads.emplace_back(p->grad.span().begin(), p->grad.span().end());
  return r;
}

bool bitwise_equal(const StepResult& a, const StepResult& b) {
  if (std::memcmp(&a.loss, &b.loss, sizeof a.loss) || std::memcmp(&a.aux, &b.aux, sizeof a.aux) ||
      std::memcmp(&a.z, &b.z, sizeof a.z) || a.grads.size() != b.grads.size())
    return false;
  for (size_t i = 0; i < a.grads.size(); ++i)
    if (a.grads[i].size() != b.grads[i].size() ||
        std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(real)))
      return false;
  return true;
}

}  // namespace

class TestModelDeterminism : public QObject {
  Q_OBJECT
 private slots:
  void threadCountDoesNotChangeResults() {
    const ModelOptions o = small_options();
    const Batch b = make_batch(3, 70, 11);  // 210 rows: several GEMM row blocks and reduce chunks
    const StepResult one = train_step(1, o, b);
    QVERIFY(std::isfinite(one.loss));
    for (int threads : {2, 3}) QVERIFY2(bitwise_equal(one, train_step(threads, o, b)),
                                        qPrintable(QString("threads=%1 differs").arg(threads)));
    QVERIFY(bitwise_equal(one, train_step(2, o, b)));  // and a second run is the same
  }

  // The statistics read after backward (how a training step reads them: a GPU then never
  // waits for them mid-step) are the ones forward returns, and the gradients do not change.
  void pendingStatisticsResolvedAfterBackwardEqualForwards() {
    const ModelOptions o = small_options();
    const Batch b = make_batch(3, 40, 5);
    LanguageModel at_once(o), later(o);
    at_once.zero_grad();
    later.zero_grad();
    const ForwardStats s = at_once.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    at_once.backward(1.0);
    const PendingForwardStats pending = later.forward_pending(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    later.backward(1.0);
    const ForwardStats r = pending.resolve();
    QVERIFY(s.aux_loss > 0.0 && s.z_loss > 0.0);
    QCOMPARE(std::memcmp(&r.loss, &s.loss, sizeof s.loss), 0);
    QCOMPARE(std::memcmp(&r.aux_loss, &s.aux_loss, sizeof s.aux_loss), 0);
    QCOMPARE(std::memcmp(&r.z_loss, &s.z_loss, sizeof s.z_loss), 0);
    QCOMPARE(r.expert_load, s.expert_load);
    QCOMPARE(r.moe_layer_ids, s.moe_layer_ids);
    QCOMPARE(r.tokens, s.tokens);
    int64_t routed = 0;
    for (int64_t l : r.expert_load.at(0)) routed += l;
    QCOMPARE(routed, int64_t(3 * 40 * 2));
    // resolving again reads the same values (a replayed step's figures are read this way)
    const ForwardStats again = pending.resolve();
    QCOMPARE(again.expert_load, r.expert_load);
    QCOMPARE(std::memcmp(&again.aux_loss, &r.aux_loss, sizeof r.aux_loss), 0);
    const auto pa = at_once.parameters(), pl = later.parameters();
    QCOMPARE(pa.size(), pl.size());
    for (size_t i = 0; i < pa.size(); ++i)
      QCOMPARE(std::memcmp(pa[i]->grad.span().data(), pl[i]->grad.span().data(), pa[i]->grad.bytes()), 0);
  }

  void initialLossIsNearUniform() {
    ModelOptions o = small_options();
    LanguageModel model(o);
    const Batch b = make_batch(2, 16, 3);
    ForwardStats s = model.evaluate(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    QVERIFY(std::abs(s.loss - std::log(64.0)) < 0.1);
    QCOMPARE(s.tokens, int64_t(32));
    QCOMPARE(static_cast<int>(s.expert_load.size()), 1);  // one MoE layer: block 1
    QCOMPARE(s.moe_layer_ids, std::vector<int>{1});
    int64_t routed = 0;
    for (int64_t l : s.expert_load[0]) routed += l;
    QCOMPARE(routed, int64_t(32 * 2));
  }

  void memoryTracker() {
    MemoryTracker tracker;
    ScopedMemoryTracker scope(tracker);
    ModelOptions o = small_options();
    LanguageModel model(o);
    QCOMPARE(tracker.live_bytes(MemCategory::parameters), model.parameter_count() * int64_t(sizeof(real)));
    QCOMPARE(tracker.live_bytes(MemCategory::gradients), model.parameter_count() * int64_t(sizeof(real)));

    // evaluate keeps nothing
    const Batch b = make_batch(2, 40, 5);
    tracker.reset_peaks();
    model.evaluate(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    QCOMPARE(tracker.peak_bytes(MemCategory::saved_activations), int64_t(0));

    auto saved_after_forward = [&](int seq) {
      const Batch bb = make_batch(2, seq, 5);
      model.forward(bb.tokens.data(), bb.targets.data(), bb.batch, bb.seq);
      std::map<std::pair<int, std::string>, int64_t> live;
      for (const auto& [key, k] : tracker.saved_by_layer_kind()) live[key] = k.live;
      const int64_t total = tracker.live_bytes(MemCategory::saved_activations);
      model.backward(1.0);
      // every saved activation is freed by backward
      [&] {
        QCOMPARE(tracker.live_bytes(MemCategory::saved_activations), int64_t(0));
        for (const auto& [key, k] : tracker.saved_by_layer_kind())
          QVERIFY2(k.live == 0, qPrintable(QString::fromStdString(key.second)));
      }();
      int64_t sum = 0;
      for (const auto& [key, bytes] : live) sum += bytes;
      [&] { QCOMPARE(sum, total); }();
      return live;
    };
    const auto s20 = saved_after_forward(20);
    const auto s40 = saved_after_forward(40);
    QVERIFY(!QTest::currentTestFailed());
    // Attention's log-sum-exp: one value per (batch, head, position).
    QCOMPARE(s20.at({0, "attn.lse"}), int64_t(2 * 4 * 20 * sizeof(real)));
    QCOMPARE(s20.at({0, "attn.qkv"}), int64_t(2 * 20 * 3 * 32 * sizeof(real)));
    // Every attention kind grows linearly with seq (doubling seq doubles it): no s×s tensor.
    int attn_kinds = 0;
    for (const auto& [key, bytes] : s20) {
      if (key.second.rfind("attn", 0) != 0) continue;
      ++attn_kinds;
      QCOMPARE(s40.at(key), 2 * bytes);
    }
    QVERIFY(attn_kinds >= 4);  // attn.qkv.input, attn.qkv, attn.lse, attn.out.input (+ norm)
    // MoE kinds are there for layer 1 only
    QVERIFY(s20.count({1, "moe.router.probs"}));
    QVERIFY(s20.count({1, "moe.expert.up.input"}));
    QVERIFY(!s20.count({0, "moe.router.probs"}));
    QVERIFY(s20.count({0, "mlp.act.input"}));
  }

  // Recompute against keeping, with the local dispatcher (which gathers the experts' rows
  // again from the recomputed norm output) and with one that cannot (as a multi-rank one:
  // its experts keep their rows). Either way the router and the shared expert keep no copy
  // of the MoE layer's input, and the gradients are those of keeping everything.
  void recomputeKeepsLessAndGivesTheSameGradients_data() {
    QTest::addColumn<bool>("local");
    QTest::newRow("local dispatcher") << true;
    QTest::newRow("a dispatcher that keeps its experts' rows") << false;
  }

  void recomputeKeepsLessAndGivesTheSameGradients() {
    QFETCH(bool, local);
    const ModelOptions o = small_options();  // a dense layer and an MoE layer with a shared expert
    const Batch b = make_batch(2, 24, 9);
    auto run = [&](bool recompute, int64_t* saved, std::map<std::string, int64_t>* moe_kinds) {
      ModelOptions oo = o;
      oo.recompute = recompute;
      MemoryTracker tracker;
      ScopedMemoryTracker scope(tracker);
      LanguageModel model(oo);
      if (!local)
        for (MoeLayer* m : model.moe_layers())  // null for the dense layer
          if (m) m->set_dispatcher(std::make_unique<KeepingDispatcher>());
      model.zero_grad();
      tracker.reset_peaks();
      model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
      *saved = tracker.live_bytes(MemCategory::saved_activations);
      for (const auto& [key, k] : tracker.saved_by_layer_kind())
        if (key.first == 1 && k.live > 0) (*moe_kinds)[key.second] = k.live;
      model.backward(1.0);
      std::vector<real> g;
      for (Parameter* p : model.parameters()) g.insert(g.end(), p->grad.span().begin(), p->grad.span().end());
      return g;
    };
    int64_t saved_full = 0, saved_rc = 0;
    std::map<std::string, int64_t> kinds_full, kinds_rc;
    const auto g_full = run(false, &saved_full, &kinds_full);
    const auto g_rc = run(true, &saved_rc, &kinds_rc);
    QVERIFY(saved_rc < saved_full);
    for (const char* kind : {"moe.router.input", "moe.shared.up.input", "moe.expert.up.input", "moe.expert.down.input"})
      QVERIFY2(kinds_full.count(kind), kind);
    for (const char* kind : {"moe.router.input", "moe.shared.up.input", "moe.shared.down.input",
                             "moe.expert.down.input"})
      QVERIFY2(!kinds_rc.count(kind), kind);
    QCOMPARE(kinds_rc.count("moe.expert.up.input"), size_t(local ? 0 : 1));
    QVERIFY(kinds_rc.count("moe.expert.act.input"));
    QCOMPARE(g_rc.size(), g_full.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g_full.size(); ++i) {
      diff += (g_rc[i] - g_full[i]) * double(g_rc[i] - g_full[i]);
      norm += g_full[i] * double(g_full[i]);
    }
    QVERIFY(std::sqrt(diff) <= 1e-6 * std::sqrt(norm));
  }
};

QTEST_GUILESS_MAIN(TestModelDeterminism)
#include "test_model_determinism.moc"
