// Gradient checks, double precision, central differences: every dense layer's analytic
// backward against finite differences on random shapes and inputs.
#include <QtTest>

#include "core/backend/rope.h"
#include "core/model/attention.h"
#include "core/model/cross_entropy.h"
#include "core/model/embedding.h"
#include "core/model/lm_head.h"
#include "core/model/linear.h"
#include "core/model/rms_norm.h"
#include "core/model/swiglu_mlp.h"
#include "gradcheck.h"

using namespace mok;
using gradcheck::fill_normal;
using gradcheck::weighted_sum;

namespace {
// Shape in [lo, hi] from the counter RNG.
int pick(uint64_t stream, int lo, int hi) {
  return lo + static_cast<int>(counter_bits(77, stream, 0) % static_cast<uint64_t>(hi - lo + 1));
}
}  // namespace

class TestGradcheckLayers : public QObject {
  Q_OBJECT
 private slots:
  void embedding() {
    const int vocab = pick(1, 5, 12), d = pick(2, 3, 9), n = pick(3, 4, 20);
    Embedding emb("embed", vocab, d, 0.5, 3);
    std::vector<int32_t> tokens(n);
    for (int i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(counter_bits(5, 1, i) % vocab);
    tokens[1] = tokens[0];  // a repeated token sums two rows
    Tensor w({n, d});
    fill_normal(w, 11, 1);
    emb.forward(tokens.data(), n, true);
    emb.backward(w);
    auto f = [&] { return weighted_sum(emb.forward(tokens.data(), n, false), w); };
    GRADCHECK("embedding.weight", f, emb.weight().value.data(), emb.weight().grad.data(), emb.weight().value.numel());
  }

  void rmsNorm() {
    const int d = pick(4, 3, 17), n = pick(5, 2, 12);
    RmsNorm norm("norm", d, 1e-5, 0, "attn_norm");
    fill_normal(norm.weight().value, 3, 2);
    Tensor x({n, d}), w({n, d});
    fill_normal(x, 3, 3);
    fill_normal(w, 3, 4);
    norm.forward(x, true);
    Tensor dx = norm.backward(w);
    auto f = [&] { return weighted_sum(norm.forward(x, false), w); };
    GRADCHECK("rmsnorm.input", f, x.data(), dx.data(), x.numel());
    GRADCHECK("rmsnorm.weight", f, norm.weight().value.data(), norm.weight().grad.data(), d);
  }

  void rmsNormRecomputeMatchesForward() {
    RmsNorm norm("norm", 6, 1e-5, 0, "n");
    fill_normal(norm.weight().value, 1, 1);
    Tensor x({5, 6});
    fill_normal(x, 1, 2);
    Tensor y = norm.forward(x, true);
    Tensor y2 = norm.recompute_output();
    for (int64_t i = 0; i < y.numel(); ++i) QCOMPARE(y2[i], y[i]);
    norm.backward(y);
  }

  void linear() {
    const int din = pick(6, 2, 20), dout = pick(7, 2, 20), n = pick(8, 1, 70);
    Linear lin("lin", din, dout, 0.3, 9, 0, "mlp.up.input");
    Tensor x({n, din}), w({n, dout});
    fill_normal(x, 4, 1);
    fill_normal(w, 4, 2);
    lin.forward(x, true);
    Tensor dx = lin.backward(w);
    QCOMPARE(lin.saved_input()->held_bytes(), int64_t(0));
    auto f = [&] { return weighted_sum(lin.forward(x, false), w); };
    GRADCHECK("linear.input", f, x.data(), dx.data(), x.numel());
    GRADCHECK("linear.weight", f, lin.weight().value.data(), lin.weight().grad.data(), lin.weight().value.numel());
  }

  void attention_data() {
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("seq");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("hd");
    QTest::newRow("one position") << 2 << 1 << 2 << 4;
    QTest::newRow("odd seq 7") << 2 << 7 << 2 << 4;
    QTest::newRow("odd seq 13, 3 heads") << 1 << 13 << 3 << 6;
    QTest::newRow("random") << pick(9, 1, 3) << 2 * pick(10, 2, 9) + 1 << pick(11, 1, 3) << 2 * pick(12, 1, 4);
    QTest::newRow("beyond one key block") << 1 << 70 << 1 << 4;
  }
  void attention() {
    QFETCH(int, batch);
    QFETCH(int, seq);
    QFETCH(int, heads);
    QFETCH(int, hd);
    const int d = heads * hd, n = batch * seq;
    RopeTable rope(seq + 3, hd, 10000.0);
    Attention attn("attn", d, heads, 0.4, 0.4, 21, 0, &rope);
    Tensor x({n, d}), w({n, d});
    fill_normal(x, 6, 1);
    fill_normal(w, 6, 2);
    attn.forward(x, batch, seq, true);
    Tensor dx = attn.backward(w);
    auto f = [&] { return weighted_sum(attn.forward(x, batch, seq, false), w); };
    GRADCHECK("attention.input", f, x.data(), dx.data(), x.numel());
    GRADCHECK("attention.wqkv", f, attn.qkv().weight().value.data(), attn.qkv().weight().grad.data(),
              attn.qkv().weight().value.numel());
    GRADCHECK("attention.wo", f, attn.out().weight().value.data(), attn.out().weight().grad.data(),
              attn.out().weight().value.numel());
  }

  void attentionIsCausal() {
    // Changing the last position must not change any earlier output.
    RopeTable rope(8, 4, 10000.0);
    Attention attn("attn", 8, 2, 0.4, 0.4, 5, 0, &rope);
    Tensor x({6, 8});
    fill_normal(x, 2, 2);
    Tensor y1 = attn.forward(x, 1, 6, false);
    for (int j = 0; j < 8; ++j) x[5 * 8 + j] += 1.0;
    Tensor y2 = attn.forward(x, 1, 6, false);
    for (int i = 0; i < 5 * 8; ++i) QCOMPARE(y2[i], y1[i]);
    double moved = 0;
    for (int i = 5 * 8; i < 6 * 8; ++i) moved += std::abs(y2[i] - y1[i]);
    QVERIFY(moved > 1e-6);
  }

  void swiglu() {
    const int d = pick(13, 2, 12), f = pick(14, 2, 16), n = pick(15, 1, 30);
    SwiGluMlp mlp("mlp", d, f, 0.5, 0.5, 17, 0, "mlp");
    Tensor x({n, d}), w({n, d});
    fill_normal(x, 7, 1);
    fill_normal(w, 7, 2);
    mlp.forward(x, true);
    Tensor dx = mlp.backward(w);
    auto fn = [&] { return weighted_sum(mlp.forward(x, false), w); };
    GRADCHECK("swiglu.input", fn, x.data(), dx.data(), x.numel());
    GRADCHECK("swiglu.w_up", fn, mlp.up().weight().value.data(), mlp.up().weight().grad.data(), mlp.up().weight().value.numel());
    GRADCHECK("swiglu.w_down", fn, mlp.down().weight().value.data(), mlp.down().weight().grad.data(), mlp.down().weight().value.numel());
  }

  void swigluGatedAndRecomputed() {
    // Output rows scaled by gates; hidden not kept (recomputed from the pre-activation).
    const int d = 5, f = 7, n = 9;
    SwiGluMlp mlp("expert", d, f, 0.5, 0.5, 19, 0, "moe.expert", true);
    Tensor x({n, d}), w({n, d}), gate({n});
    fill_normal(x, 8, 1);
    fill_normal(w, 8, 2);
    fill_normal(gate, 8, 3);
    auto objective = [&] {
      Tensor y = mlp.forward(x, false);
      double s = 0;
      for (int t = 0; t < n; ++t)
        for (int j = 0; j < d; ++j) s += gate[t] * y[t * d + j] * w[t * d + j];
      return s;
    };
    mlp.forward(x, true, true, false);
    Tensor dgate({n});
    Tensor dx = mlp.backward_gated(w, &gate, &dgate);
    GRADCHECK("expert.input", objective, x.data(), dx.data(), x.numel());
    GRADCHECK("expert.gate", objective, gate.data(), dgate.data(), n);
    GRADCHECK("expert.w_up", objective, mlp.up().weight().value.data(), mlp.up().weight().grad.data(), mlp.up().weight().value.numel());
    GRADCHECK("expert.w_down", objective, mlp.down().weight().value.data(), mlp.down().weight().grad.data(), mlp.down().weight().value.numel());
  }

  void crossEntropy() {
    const int vocab = pick(16, 3, 20), n = pick(17, 2, 15);
    Tensor logits({n, vocab});
    fill_normal(logits, 9, 1, 2.0);
    std::vector<int32_t> targets(n);
    for (int i = 0; i < n; ++i) targets[i] = static_cast<int32_t>(counter_bits(9, 2, i) % vocab);
    targets[0] = -1;  // not scored
    CrossEntropy ce;
    const real scale = 0.7;
    ce.forward(logits.clone(), targets.data(), true);
    Tensor dlogits = ce.backward(scale);
    auto f = [&] {
      CrossEntropy c;
      auto s = c.forward(logits.clone(), targets.data(), false);
      return scale * s.loss_sum / s.count;
    };
    GRADCHECK("cross_entropy.logits", f, logits.data(), dlogits.data(), logits.numel());
    for (int j = 0; j < vocab; ++j) QCOMPARE(dlogits[j], real(0));
  }

  void lmHead_data() {
    QTest::addColumn<bool>("tied");
    QTest::newRow("tied") << true;
    QTest::newRow("untied") << false;
  }
  void lmHead() {
    QFETCH(bool, tied);
    const int d = 6, vocab = 11, n = 8;
    Embedding emb("embed", vocab, d, 0.5, 1);
    LmHead head("head", d, vocab, tied ? &emb.weight() : nullptr, 0.5, 2);
    Parameter& wp = tied ? emb.weight() : *head.own_weight();
    Tensor x({n, d});
    fill_normal(x, 10, 1);
    std::vector<int32_t> targets(n);
    for (int i = 0; i < n; ++i) targets[i] = static_cast<int32_t>(counter_bits(10, 2, i) % vocab);
    auto f = [&] {
      CrossEntropy c;
      auto s = c.forward(head.forward(x, false), targets.data(), false);
      return s.loss_sum / s.count;
    };
    CrossEntropy ce;
    ce.forward(head.forward(x, true, CrossEntropy::saved_tag()), targets.data(), true);
    Tensor dx = head.backward(ce.backward(1.0));
    GRADCHECK("lm_head.input", f, x.data(), dx.data(), x.numel());
    GRADCHECK("lm_head.weight", f, wp.value.data(), wp.grad.data(), wp.value.numel());
  }
};

QTEST_GUILESS_MAIN(TestGradcheckLayers)
#include "test_gradcheck_layers.moc"
