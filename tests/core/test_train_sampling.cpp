// Next-token sampling: greedy picks the argmax; top-k and top-p never pick outside their
// sets; the same seed gives the same draws; frequencies follow the softmax; filtered draws
// walk ids by decreasing logit as a plain sort would; rows sampled over a pool are the rows
// sampled one by one; logits that are not finite are refused.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "core/train/sampling.h"
#include "core/util/thread_pool.h"

namespace {

// The filtered draw written plainly: ids stably sorted by decreasing logit, the top-k and
// top-p prefix, weights summed in that order, one uniform walked down it.
int32_t reference_filtered_draw(const std::vector<float>& l, const mok::SamplingOptions& o, mok::CounterRng& rng) {
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  int keep = o.top_k > 0 ? std::min<int>(o.top_k, int(l.size())) : int(l.size());
  std::vector<double> p(keep);
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += p[i] = std::exp((double(l[ids[i]]) - l[ids[0]]) / o.temperature);
  if (o.top_p < 1.0) {
    // top-p alone (top-k keeps every id) weighs the nucleus against every id's weight summed
    // in id order.
    double total = sum;
    if (keep == int(l.size())) {
      total = 0;
      for (const float v : l) total += std::exp((double(v) - l[ids[0]]) / o.temperature);
    }
    double acc = 0;
    int k = 0;
    while (k < keep) {
      acc += p[k++] / total;
      if (acc >= o.top_p) break;
    }
    keep = k;
    sum = 0;
    for (int i = 0; i < keep; ++i) sum += p[i];
  }
  double u = rng.uniform() * sum;
  for (int i = 0; i < keep; ++i) {
    u -= p[i];
    if (u <= 0) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace

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

  void unfilteredFrequenciesFollowSoftmax() {
    const std::vector<float> l{0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.5f};
    const double t = 0.8;
    std::vector<double> p(l.size());
    double sum = 0;
    for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] / t);
    std::vector<int> count(l.size());
    mok::CounterRng rng(21);
    const int n = 60000;
    for (int i = 0; i < n; ++i) ++count[mok::sample_token(l, {t, 0, 1.0}, rng)];
    for (size_t i = 0; i < l.size(); ++i) {
      // 5 standard deviations of a binomial frequency at n = 60000: at most 0.010.
      const double want = p[i] / sum, sd = std::sqrt(want * (1 - want) / n);
      QVERIFY2(std::abs(count[i] / double(n) - want) < 5 * sd,
               qPrintable(QStringLiteral("id %1: %2 against %3").arg(i).arg(count[i] / double(n)).arg(want)));
    }
  }

  // Weights that underflow to 0 (logits thousands below the top) are never drawn, wherever
  // they sit in id order.
  void zeroWeightIdsAreNeverDrawn() {
    const std::vector<float> l{-5000.0f, 0.0f, -5000.0f, 0.5f, -5000.0f};
    mok::CounterRng rng(5);
    for (int i = 0; i < 5000; ++i) {
      const int x = mok::sample_token(l, {1.0, 0, 1.0}, rng);
      QVERIFY2(x == 1 || x == 3, qPrintable(QString::number(x)));
    }
  }

  // The integer-key sort orders ids as a stable sort by decreasing logit would, ties and
  // −0/+0 included: the same draws as the plain reference, filter by filter.
  void filteredDrawsAreTheReferences() {
    std::mt19937 gen(17);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (const mok::SamplingOptions o : {mok::SamplingOptions{1.0, 5, 1.0}, mok::SamplingOptions{0.7, 0, 0.9},
                                         mok::SamplingOptions{1.3, 40, 0.5}, mok::SamplingOptions{0.9, 300, 0.999},
                                         mok::SamplingOptions{2.0, 0, 0.99}, mok::SamplingOptions{0.5, 0, 0.3}}) {
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> l(300);
        for (float& v : l) v = normal(gen);
        // Ties: a third of the logits repeat another's value; a few zeros of both signs.
        for (int i = 0; i < 100; ++i) l[gen() % l.size()] = l[gen() % l.size()];
        l[3] = 0.0f, l[7] = -0.0f, l[11] = 0.0f;
        mok::CounterRng a(trial, 1), b(trial, 1);
        for (int draw = 0; draw < 20; ++draw) QCOMPARE(mok::sample_token(l, o, a), reference_filtered_draw(l, o, b));
      }
    }
    // Only zeros: −0 ties +0, so the top 3 are ids 0, 1, 2 and id 3 is never drawn.
    const std::vector<float> zeros{-0.0f, 0.0f, -0.0f, 0.0f};
    mok::CounterRng rng(8);
    std::set<int> seen;
    for (int i = 0; i < 600; ++i) seen.insert(mok::sample_token(zeros, {1.0, 3, 1.0}, rng));
    QCOMPARE(seen, (std::set<int>{0, 1, 2}));
  }

  void rowsOverAPoolAreTheRowsOneByOne() {
    const int rows = 70, vocab = 50;
    std::vector<float> l(rows * vocab);
    std::mt19937 gen(3);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    for (float& v : l) v = normal(gen);
    for (const mok::SamplingOptions o : {mok::SamplingOptions{0.8, 0, 1.0}, mok::SamplingOptions{1.0, 10, 0.9},
                                         mok::SamplingOptions{0.0, 0, 1.0}}) {
      std::vector<int32_t> one_by_one(rows);
      for (int b = 0; b < rows; ++b) {
        mok::CounterRng rng(11, b);
        one_by_one[b] = mok::sample_token(std::span<const float>(l).subspan(b * vocab, vocab), o, rng);
      }
      for (const int threads : {1, 3}) {
        mok::ThreadPool pool(threads);
        mok::ScopedThreadPool scope(pool);
        std::vector<mok::CounterRng> rngs;
        for (int b = 0; b < rows; ++b) rngs.emplace_back(11, b);
        QCOMPARE(mok::sample_tokens(l, vocab, o, rngs), one_by_one);
      }
    }
    // A bad row anywhere is reported, whichever thread met it.
    l[37 * vocab + 4] = std::nanf("");
    mok::ThreadPool pool(3);
    mok::ScopedThreadPool scope(pool);
    std::vector<mok::CounterRng> rngs(rows);
    QVERIFY_THROWS_EXCEPTION(mok::NonFiniteLogits, mok::sample_tokens(l, vocab, {0.8, 0, 1.0}, rngs));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::sample_tokens(l, vocab + 1, {0.8, 0, 1.0}, rngs));
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
