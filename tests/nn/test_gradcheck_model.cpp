// Whole-model gradient check (double precision): every parameter of LanguageModel against
// central differences of (loss + aux_loss + z_loss)·scale, for dense, MoE and mixed models,
// tied and untied heads, capacity drops, a shared expert and the recompute option.
#include <QtTest>

#include "core/model/language_model.h"
#include "gradcheck.h"

using namespace mok;

class TestGradcheckModel : public QObject {
  Q_OBJECT
 private slots:
  void model_data() {
    QTest::addColumn<QString>("moe_layers");
    QTest::addColumn<bool>("tied");
    QTest::addColumn<bool>("shared");
    QTest::addColumn<double>("capacity");
    QTest::addColumn<bool>("recompute");
    QTest::newRow("dense") << "none" << true << false << 0.0 << false;
    QTest::newRow("moe all, untied") << "all" << false << false << 0.0 << false;
    QTest::newRow("mixed 1, shared expert") << "1" << true << true << 0.0 << false;
    QTest::newRow("moe every_2, capacity drops") << "every_2" << true << false << 0.6 << false;
    QTest::newRow("mixed 0, recompute") << "0" << false << false << 0.0 << true;
  }
  void model() {
    QFETCH(QString, moe_layers);
    QFETCH(bool, tied);
    QFETCH(bool, shared);
    QFETCH(double, capacity);
    QFETCH(bool, recompute);
    ModelOptions o;
    o.model.layers = 2;
    o.model.d_model = 8;
    o.model.heads = 2;
    o.model.experts = 4;
    o.model.top_k = 2;
    o.model.expert_hidden = 6;
    o.model.dense_hidden = 10;
    o.model.moe_layers = moe_layers.toStdString();
    o.model.shared_expert = shared;
    o.model.tie_embeddings = tied;
    o.model.init_std = 0.3;  // large enough that every path carries a visible gradient
    o.model.aux_loss_coef = 0.1;
    o.model.z_loss_coef = 0.01;
    o.routing.capacity_factor = capacity;
    o.vocab_size = 11;
    o.max_seq_len = 8;
    o.seed = 99;
    o.recompute = recompute;
    LanguageModel model(o);
    const int batch = 2, seq = 5;
    std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
    for (int i = 0; i < batch * seq; ++i) {
      tokens[i] = static_cast<int32_t>(counter_bits(3, 1, i) % 11);
      targets[i] = static_cast<int32_t>(counter_bits(3, 2, i) % 11);
    }
    const double scale = 0.8;
    auto objective = [&] {
      ForwardStats s = model.evaluate(tokens.data(), targets.data(), batch, seq);
      return scale * (s.loss + s.aux_loss + s.z_loss);
    };
    model.zero_grad();
    ForwardStats s = model.forward(tokens.data(), targets.data(), batch, seq);
    QCOMPARE(s.tokens, int64_t(batch * seq));
    if (moe_layers != "none") QVERIFY(s.aux_loss > 0);
    if (capacity > 0) QVERIFY(s.dropped_tokens > 0);
    model.backward(scale);
    int checked = 0;
    for (Parameter* p : model.parameters()) {
      double norm = 0;
      for (int64_t i = 0; i < p->grad.numel(); ++i) norm += std::abs(p->grad[i]);
      if (norm == 0) {
        // Only an expert that got no tokens may have no gradient; then neither may the
        // finite differences.
        QVERIFY2(p->expert, (p->name + ": zero gradient").c_str());
        Tensor zero(p->grad.shape());
        const double err = gradcheck::relative_error(objective, p->value.data(), zero.data(), p->value.numel());
        QVERIFY2(err == 0.0, (p->name + ": finite differences are not zero").c_str());
        continue;
      }
      GRADCHECK(p->name, objective, p->value.data(), p->grad.data(), p->value.numel());
      ++checked;
    }
    QVERIFY(checked >= 8);
  }

  void moeLayerMask() {
    ModelConfig c;
    c.layers = 4;
    c.moe_layers = "every_2";
    QCOMPARE(moe_layer_mask(c), (std::vector<bool>{false, true, false, true}));
    c.moe_layers = "0,3";
    QCOMPARE(moe_layer_mask(c), (std::vector<bool>{true, false, false, true}));
    c.moe_layers = "none";
    QCOMPARE(moe_layer_mask(c), (std::vector<bool>(4, false)));
    c.moe_layers = "all";
    c.experts = 0;
    QCOMPARE(moe_layer_mask(c), (std::vector<bool>(4, false)));
    c.experts = 8;
    c.moe_layers = "1,7";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, moe_layer_mask(c));
    c.moe_layers = "every_x";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, moe_layer_mask(c));
  }
};

QTEST_GUILESS_MAIN(TestGradcheckModel)
#include "test_gradcheck_model.moc"
