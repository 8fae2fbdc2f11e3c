// LanguageModel learns: plain gradient descent on a fixed batch of a repeating pattern
// drives the loss well below its starting value (float build, dense and MoE layers).
#include <QtTest>

#include <cmath>

#include "core/model/language_model.h"

using namespace mok;

class TestModelLearns : public QObject {
  Q_OBJECT
 private slots:
  void lossFallsOnARepeatingPattern() {
    ModelOptions o;
    o.model.layers = 2;
    o.model.d_model = 32;
    o.model.heads = 4;
    o.model.experts = 4;
    o.model.top_k = 2;
    o.model.expert_hidden = 32;
    o.model.moe_layers = "1";
    o.vocab_size = 16;
    o.max_seq_len = 32;
    o.seed = 5;
    LanguageModel model(o);
    const int batch = 4, seq = 24;
    std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
    for (int b = 0; b < batch; ++b)
      for (int s = 0; s < seq; ++s) {
        tokens[b * seq + s] = (3 * (s + b)) % 7;
        targets[b * seq + s] = (3 * (s + b + 1)) % 7;
      }
    double first = 0, last = 0, aux = 0;
    for (int step = 0; step < 60; ++step) {
      model.zero_grad();
      ForwardStats st = model.forward(tokens.data(), targets.data(), batch, seq);
      model.backward(1.0);
      if (step == 0) first = st.loss;
      last = st.loss;
      aux = st.aux_loss;
      for (Parameter* p : model.parameters())
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value[i] -= real(0.5) * p->grad[i];
    }
    qInfo("loss %.4f → %.4f (aux %.4f)", first, last, aux);
    QVERIFY(std::abs(first - std::log(16.0)) < 0.1);
    QVERIFY(std::isfinite(last));
    QVERIFY(last < 0.5 * first);
  }
};

QTEST_GUILESS_MAIN(TestModelLearns)
#include "test_model_learns.moc"
