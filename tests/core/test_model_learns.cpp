// LanguageModel learns: plain gradient descent on a fixed batch of a repeating pattern
// (7 symbols, each followed by one fixed next symbol) drives the loss from ln 16 to well
// below ln 7, the best a model blind to the context can do (float build, dense and MoE
// layers).
//
// The rate is small enough for the descent to be stable: at 0.05 the loss falls at every
// step (this seed), and the rounding differences between OpenBLAS kernel families do not
// grow. Measured over 16 seeds and the kernel families Prescott, Nehalem, Sandybridge,
// Haswell, Zen, SkylakeX and Cooperlake: after 100 steps the loss is 0.23–0.28, and the
// families agree to 1e-6 relative for most seeds, 1.4e-4 at worst. A rate of 0.5 is past
// that edge: the path turns chaotic and ends anywhere from 0.2 to 1.9 depending on the
// kernel, so it cannot make a test.
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
    constexpr int kSteps = 100;
    constexpr real kRate = real(0.05);
    double first = 0, last = 0, aux = 0;
    for (int step = 0; step < kSteps; ++step) {
      model.zero_grad();
      ForwardStats st = model.forward(tokens.data(), targets.data(), batch, seq);
      model.backward(1.0);
      if (step == 0) first = st.loss;
      last = st.loss;
      aux = st.aux_loss;
      for (Parameter* p : model.parameters())
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value[i] -= kRate * p->grad[i];
    }
    qInfo("loss %.4f → %.4f (aux %.4f)", first, last, aux);
    QVERIFY(std::abs(first - std::log(16.0)) < 0.1);
    QVERIFY(std::isfinite(last));
    // A quarter of ln 7 (0.49): the model uses the context, not only the symbol frequencies.
    // Measured 0.28 at most, a margin far beyond the kernels' spread (1e-4 at most).
    QVERIFY2(last < 0.25 * std::log(7.0), qPrintable(QString("final loss %1").arg(last)));
  }
};

QTEST_GUILESS_MAIN(TestModelLearns)
#include "test_model_learns.moc"
