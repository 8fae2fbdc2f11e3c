// ThreadPool / parallel_for: every chunk runs once, and sums are bitwise identical for any
// thread count (the chunking depends on n and grain only).
#include <QtTest>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

class TestThreadPool : public QObject {
  Q_OBJECT
 private slots:
  void everyIndexRunsOnce() {
    for (int threads : {1, 2, 3, 5}) {
      mok::ThreadPool pool(threads);
      mok::ScopedThreadPool scope(pool);
      std::vector<std::atomic<int>> hits(1003);
      mok::parallel_for(1003, 7, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (auto& h : hits) QCOMPARE(h.load(), 1);
    }
  }

  void sumIsThreadCountIndependent() {
    std::vector<double> x(100000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = mok::counter_normal(7, 1, i) * 1e3;
    auto sum_with = [&](int threads) {
      mok::ThreadPool pool(threads);
      mok::ScopedThreadPool scope(pool);
      return mok::parallel_sum(x.size(), 1000, [&](int64_t b, int64_t e) {
        double s = 0;
        for (int64_t i = b; i < e; ++i) s += x[i];
        return s;
      });
    };
    const double s1 = sum_with(1);
    for (int t : {2, 3, 4}) {
      const double st = sum_with(t);
      QCOMPARE(std::memcmp(&s1, &st, sizeof s1), 0);
    }
  }

  void normalsHaveUnitVariance() {
    double m = 0, v = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const double z = mok::counter_normal(42, 3, i);
      m += z;
      v += z * z;
    }
    m /= n;
    v = v / n - m * m;
    QVERIFY(std::abs(m) < 0.01);
    QVERIFY(std::abs(v - 1.0) < 0.02);
  }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
