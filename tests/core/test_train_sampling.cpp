// Next-token sampling: greedy picks the argmax; top-k and top-p never pick outside their
// sets; the same seed gives the same draws; frequencies follow the softmax; logits that are
// not finite are refused.
#include <QtTest>

#include <cmath>
#include <set>

#include "core/train/sampling.h"

class TestTrainSampling : public QObject {
  Q_OBJECT
 private slots:
  void greedyIsArgmax() {
    const std::vector<float> l{0.1f, 3.0f, -1.0f, 3.0f};
    mok::CounterRng rng(1);
    QCOMPARE(mok::sample_token(l, {0.0, 0, 1.0}, rng), 1);  // tie → lower id
  }

  void topKAndTopPRestrictTheSet() {
    const std::vector<float> l{2.0f, 1.0f, 0.5f, 0.0f, -1.0f};
    mok::CounterRng rng(2);
    std::set<int> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(mok::sample_token(l, {1.0, 2, 1.0}, rng));
    QCOMPARE(seen, (std::set<int>{0, 1}));
    // p(0) = e²/Σ ≈ 0.54, p(0)+p(1) ≈ 0.74: top_p 0.6 keeps ids 0 and 1.
    seen.clear();
    for (int i = 0; i < 2000; ++i) seen.insert(mok::sample_token(l, {1.0, 0, 0.6}, rng));
    QCOMPARE(seen, (std::set<int>{0, 1}));
    seen.clear();
    for (int i = 0; i < 200; ++i) seen.insert(mok::sample_token(l, {1.0, 0, 0.5}, rng));
    QCOMPARE(seen, (std::set<int>{0}));
  }

  void frequenciesFollowSoftmaxAndSeedRepeats() {
    const std::vector<float> l{1.0f, 0.0f};
    mok::CounterRng a(9), b(9);
    int ones = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const int x = mok::sample_token(l, {1.0, 0, 1.0}, a);
      QCOMPARE(mok::sample_token(l, {1.0, 0, 1.0}, b), x);
      ones += x == 1;
    }
    const double p1 = 1.0 / (1.0 + std::exp(1.0));  // ≈ 0.269
    QVERIFY2(std::abs(ones / double(n) - p1) < 0.02, qPrintable(QString::number(ones / double(n))));
  }

  void badOptionsThrow() {
    mok::CounterRng rng;
    const std::vector<float> l{1.0f};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::sample_token(l, {-1.0, 0, 1.0}, rng));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::sample_token(l, {1.0, 0, 0.0}, rng));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::sample_token({}, {1.0, 0, 1.0}, rng));
  }

  // Logits of NaN weights were sampled into arbitrary ids (NUL bytes printed, exit 0).
  void nonFiniteLogitsThrow() {
    mok::CounterRng rng(4);
    for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      const std::vector<float> l{0.5f, bad, 1.0f};
      QVERIFY_THROWS_EXCEPTION(mok::NonFiniteLogits, mok::sample_token(l, {1.0, 0, 1.0}, rng));
      QVERIFY_THROWS_EXCEPTION(mok::NonFiniteLogits, mok::sample_token(l, {0.0, 0, 1.0}, rng));
    }
  }
};

QTEST_GUILESS_MAIN(TestTrainSampling)
#include "test_train_sampling.moc"
