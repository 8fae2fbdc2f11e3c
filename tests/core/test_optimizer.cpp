// AdamW, learning-rate schedules and gradient clipping: one step against a hand-computed
// update, schedule values at the steps that define them, and clipping by global norm.
#include <QtTest>

#include <cmath>
#include <cstring>

#include "core/config/experiment_config.h"
#include "core/train/adamw.h"
#include "core/train/grad_clip.h"
#include "core/train/lr_schedule.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

using mok::MemCategory;
using mok::MemTag;
using mok::Parameter;
using mok::Tensor;

namespace {

Parameter make_param(const char* name, std::vector<float> value, std::vector<float> grad,
                     bool decay) {
  Parameter p;
  p.name = name;
  p.value = Tensor({static_cast<int64_t>(value.size())}, MemTag{MemCategory::parameters, -1, ""});
  p.grad = Tensor({static_cast<int64_t>(value.size())}, MemTag{MemCategory::gradients, -1, ""});
  for (size_t i = 0; i < value.size(); ++i) {
    p.value[i] = value[i];
    p.grad[i] = grad[i];
  }
  p.weight_decay = decay;
  return p;
}

}  // namespace

class TestOptimizer : public QObject {
  Q_OBJECT
 private slots:
  void adamwFirstStepMatchesHandComputation() {
    Parameter w = make_param("w", {1.0f, -2.0f}, {0.5f, -0.25f}, true);
    Parameter b = make_param("b", {0.3f}, {2.0f}, false);
    mok::AdamWOptions opt{0.9, 0.95, 1e-8, 0.1};
    mok::AdamW adam({&w, &b}, opt);
    const double lr = 0.01;
    adam.step(lr);
    QCOMPARE(adam.step_count(), int64_t(1));
    // Step 1: m̂ = g, v̂ = g², so the Adam direction is g/(|g|+ε) ≈ sign(g).
    auto expect = [&](double p, double g, bool decay) {
      const double m = 0.1 * g, v = 0.05 * g * g;
      const double mh = m / (1 - 0.9), vh = v / (1 - 0.95);
      return (decay ? p * (1 - lr * 0.1) : p) - lr * mh / (std::sqrt(vh) + 1e-8);
    };
    QCOMPARE(w.value[0], static_cast<float>(expect(1.0, 0.5, true)));
    QCOMPARE(w.value[1], static_cast<float>(expect(-2.0, -0.25, true)));
    QCOMPARE(b.value[0], static_cast<float>(expect(0.3, 2.0, false)));
    // Moments after one step.
    QCOMPARE(adam.first_moments()[0][0], static_cast<float>(0.1 * 0.5));
    QCOMPARE(adam.second_moments()[1][0], static_cast<float>(0.05 * 4.0));
    // Decay is really skipped for b: its change is exactly the Adam step.
    QVERIFY(std::abs((0.3 - b.value[0]) - lr * 1.0) < 1e-6);
  }

  void adamwSecondStepUsesBiasCorrection() {
    Parameter w = make_param("w", {0.0f}, {1.0f}, false);
    mok::AdamW adam({&w}, {0.9, 0.999, 1e-8, 0.0});
    adam.step(0.1);
    w.grad[0] = -1.0f;
    adam.step(0.1);
    const double m = 0.9 * 0.1 + 0.1 * -1.0;  // -0.01
    const double v = 0.999 * 0.001 + 0.001 * 1.0;
    const double upd = (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.999 * 0.999)) + 1e-8);
    const double expected = static_cast<float>(-0.1 * 1.0 / (1.0 + 1e-8)) - 0.1 * upd;
    QVERIFY(std::abs(w.value[0] - expected) < 1e-6);
  }

  void adamwStateIsCountedAsOptimizerState() {
    mok::MemoryTracker tracker;
    mok::ScopedMemoryTracker scope(tracker);
    Parameter w = make_param("w", std::vector<float>(100, 1.0f), std::vector<float>(100, 0.f), true);
    const int64_t before = tracker.live_bytes(MemCategory::optimizer_state);
    mok::AdamW adam({&w}, {});
    QCOMPARE(tracker.live_bytes(MemCategory::optimizer_state) - before,
             int64_t(2 * 100 * sizeof(float)));
  }

  void adamwIsThreadCountIndependent() {
    auto run = [](int threads) {
      mok::ThreadPool pool(threads);
      mok::ScopedThreadPool scope(pool);
      const int n = 50000;
      std::vector<float> v(n), g(n);
      for (int i = 0; i < n; ++i) {
        v[i] = static_cast<float>(mok::counter_normal(1, 0, i));
        g[i] = static_cast<float>(mok::counter_normal(1, 1, i));
      }
      Parameter p = make_param("p", v, g, true);
      mok::AdamW adam({&p}, {});
      for (int s = 0; s < 3; ++s) adam.step(1e-3);
      return std::vector<float>(p.value.data(), p.value.data() + n);
    };
    const auto a = run(1), b = run(3);
    QVERIFY(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }

  void warmupThenCosine() {
    mok::LrSchedule s(1.0, 110, 10, mok::LrSchedule::Kind::cosine, 0.1);
    QCOMPARE(s.lr_at(0), 0.1);
    QCOMPARE(s.lr_at(4), 0.5);
    QCOMPARE(s.lr_at(9), 1.0);
    QCOMPARE(s.lr_at(10), 1.0);  // first decay step: still the peak
    QVERIFY(std::abs(s.lr_at(59) - (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 49.0 / 99.0)))) < 1e-12);
    QVERIFY(std::abs(s.lr_at(109) - 0.1) < 1e-12);  // last step: lr · min_lr_ratio
    QVERIFY(std::abs(s.lr_at(500) - 0.1) < 1e-12);  // past the end: stays at the floor
    for (int i = 10; i < 109; ++i) QVERIFY(s.lr_at(i + 1) <= s.lr_at(i));
  }

  void linearAndConstant() {
    mok::LrSchedule lin(2.0, 21, 0, mok::LrSchedule::Kind::linear, 0.5);
    QCOMPARE(lin.lr_at(0), 2.0);
    QCOMPARE(lin.lr_at(10), 1.5);
    QCOMPARE(lin.lr_at(20), 1.0);
    mok::LrSchedule con(2.0, 100, 4, mok::LrSchedule::Kind::constant, 0.1);
    QCOMPARE(con.lr_at(1), 1.0);
    QCOMPARE(con.lr_at(4), 2.0);
    QCOMPARE(con.lr_at(99), 2.0);
  }

  void scheduleFromConfigRejectsUnknownName() {
    mok::TrainConfig t;
    t.schedule = "exponential";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::LrSchedule::from_config(t));
    t.schedule = "linear";
    t.lr = 0.5;
    t.warmup_steps = 0;
    QCOMPARE(mok::LrSchedule::from_config(t).lr_at(0), 0.5);
  }

  void clipScalesAboveTheLimit() {
    Parameter a = make_param("a", {0, 0}, {3.0f, 0.0f}, true);
    Parameter b = make_param("b", {0}, {4.0f}, true);
    std::vector<Parameter*> ps{&a, &b};
    QCOMPARE(mok::global_grad_norm(ps), 5.0);
    QCOMPARE(mok::clip_grad_norm(ps, 10.0), 5.0);  // below: untouched
    QCOMPARE(a.grad[0], 3.0f);
    QCOMPARE(mok::clip_grad_norm(ps, 1.0), 5.0);   // returns the norm before clipping
    QCOMPARE(a.grad[0], 0.6f);
    QCOMPARE(b.grad[0], 0.8f);
    QVERIFY(std::abs(mok::global_grad_norm(ps) - 1.0) < 1e-6);
    QCOMPARE(mok::clip_grad_norm(ps, 0.0), mok::global_grad_norm(ps));  // 0 disables
    QCOMPARE(b.grad[0], 0.8f);
  }

  void normIsThreadCountIndependent() {
    std::vector<float> g(100003);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(mok::counter_normal(3, 0, i));
    Parameter p = make_param("p", std::vector<float>(g.size(), 0.f), g, true);
    double n1, n2;
    {
      mok::ThreadPool pool(1);
      mok::ScopedThreadPool s(pool);
      n1 = mok::global_grad_norm({&p});
    }
    {
      mok::ThreadPool pool(2);
      mok::ScopedThreadPool s(pool);
      n2 = mok::global_grad_norm({&p});
    }
    QVERIFY(std::memcmp(&n1, &n2, sizeof(double)) == 0);
  }
};

QTEST_GUILESS_MAIN(TestOptimizer)
#include "test_optimizer.moc"
