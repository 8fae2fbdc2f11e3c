// InferenceSession: prefill + one-token decode steps through the KV cache give the same
// logits as the full-sequence forward (float tolerance), for dense and MoE layers.
#include <QtTest>

#include <cmath>

#include "core/model/inference_session.h"
#include "core/util/counter_rng.h"

using namespace mok;

class TestModelInference : public QObject {
  Q_OBJECT
 private slots:
  void incrementalMatchesFullForward_data() {
    QTest::addColumn<QString>("moe_layers");
    QTest::addColumn<bool>("tied");
    QTest::newRow("mixed, tied") << "1" << true;
    QTest::newRow("all moe, untied") << "all" << false;
  }
  void incrementalMatchesFullForward() {
    QFETCH(QString, moe_layers);
    QFETCH(bool, tied);
    ModelOptions o;
    o.model.layers = 3;
    o.model.d_model = 32;
    o.model.heads = 4;
    o.model.experts = 4;
    o.model.top_k = 2;
    o.model.expert_hidden = 32;
    o.model.dense_hidden = 48;
    o.model.moe_layers = moe_layers.toStdString();
    o.model.tie_embeddings = tied;
    o.model.init_std = 0.1;
    o.vocab_size = 50;
    o.max_seq_len = 32;
    o.seed = 3;
    LanguageModel model(o);
    const int seq = 21, prompt_len = 6;
    std::vector<int32_t> tokens(seq);
    for (int i = 0; i < seq; ++i) tokens[i] = static_cast<int32_t>(counter_bits(1, 1, i) % 50);
    Tensor full = model.logits(tokens.data(), 1, seq);  // (seq, vocab)

    InferenceSession session(model);
    std::vector<std::vector<real>> steps;
    steps.push_back(session.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + prompt_len)));
    for (int i = prompt_len; i < seq; ++i) steps.push_back(session.decode(tokens[i]));
    QCOMPARE(session.position(), seq);
    double worst = 0, scale = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      const int pos = prompt_len - 1 + static_cast<int>(s);
      QCOMPARE(static_cast<int>(steps[s].size()), 50);
      for (int v = 0; v < 50; ++v) {
        worst = std::max(worst, std::abs(double(steps[s][v]) - full[pos * 50 + v]));
        scale = std::max(scale, std::abs(double(full[pos * 50 + v])));
      }
    }
    qInfo("max |incremental − full| = %.3g (logit scale %.3g)", worst, scale);
    QVERIFY(scale > 1e-3);
    QVERIFY(worst <= 1e-4 * std::max(1.0, scale));
  }

  void fullCacheIsAClearError() {
    ModelOptions o;
    o.model.layers = 1;
    o.model.d_model = 16;
    o.model.heads = 2;
    o.model.experts = 0;
    o.vocab_size = 10;
    o.max_seq_len = 8;
    LanguageModel model(o);
    InferenceSession session(model, 4);
    session.prefill({1, 2, 3, 4});
    QVERIFY_THROWS_EXCEPTION(std::length_error, session.decode(5));
    session.reset();
    QCOMPARE(static_cast<int>(session.prefill({1, 2}).size()), 10);
  }
};

QTEST_GUILESS_MAIN(TestModelInference)
#include "test_model_inference.moc"
