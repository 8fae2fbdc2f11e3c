// A few SGD steps of one MoE layer (router + experts) over R local ranks, fitting one fixed
// targets: the loss curve with MoK (no shadows, cost-model shadows, all shadows) equals the
// classic dispatcher's within float reduction noise, and repeated MoK runs give the same
// losses and weights bit for bit.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/data_parallel.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/model/moe_layer.h"
#include "core/util/counter_rng.h"

using namespace mok;

class TestMokTraining : public QObject {
  Q_OBJECT
 private slots:
  void lossCurveMatchesClassic();
  void repeatedRunsAreBitwiseIdentical();
};

namespace {

constexpr int kE = 8, kK = 2, kSteps = 6;
constexpr int64_t kD = 16, kF = 4, kN = 256;  // tokens per global batch
constexpr double kLr = 0.2;

struct Curve {
  std::vector<double> loss;        // per step, global mean
  std::vector<real> router_w;      // final router weights (rank 0)
  int64_t shadowed_pairs = 0;      // over all steps and ranks
};

// dispatcher: "classic" or "mok"; mode for mok.
Curve train(int R, const std::string& dispatcher, ShadowMode mode) {
  Curve curve;
  curve.loss.assign(kSteps, 0.0);
  std::mutex m;
  run_local_ranks(R, [&](Communicator& comm) {
    const int me = comm.rank();
    const int64_t t0 = kN * me / R, t1 = kN * (me + 1) / R, n = t1 - t0;
    MoeConfig mc;
    mc.d = kD;
    mc.experts = kE;
    mc.top_k = kK;
    mc.hidden = kF;
    MoeLayer layer("moe", mc, 0.25, 0.25, 7, 0);
    const ExpertPlacement place = ExpertPlacement::contiguous(kE, R);
    MokDispatcher* mok = nullptr;
    if (dispatcher == "classic") {
      layer.set_dispatcher(std::make_unique<ClassicDispatcher>(comm, place));
    } else {
      MokOptions opt;
      opt.cost = MokCostParams{25.0, 0.0, 1e6, mode};
      auto d = std::make_unique<MokDispatcher>(comm, place, opt);
      mok = d.get();
      layer.set_dispatcher(std::move(d));
    }
    std::vector<Parameter*> mine;
    for (int e : place.experts_on(me)) {
      mine.push_back(&layer.experts().experts[e]->up().weight());
      mine.push_back(&layer.experts().experts[e]->down().weight());
    }
    Parameter& wr = layer.router().proj().weight();
    for (int step = 0; step < kSteps; ++step) {
      Tensor x({n, kD}), target({n, kD});
      for (int64_t i = 0; i < n * kD; ++i) {
        x[i] = static_cast<real>(counter_normal(3, 1, t0 * kD + i));
        target[i] = static_cast<real>(0.3 * counter_normal(4, 1, t0 * kD + i));
      }
      Tensor y = layer.forward(x, true, nullptr);
      Tensor dy({n, kD});
      double loss = 0.0;
      for (int64_t i = 0; i < n * kD; ++i) {
        const double r = static_cast<double>(y[i]) - target[i];
        loss += 0.5 * r * r / kN;
        dy[i] = static_cast<real>(r / kN);
      }
      layer.backward(dy, real(1) / R);
      if (mok) {
        std::lock_guard<std::mutex> lock(m);
        curve.shadowed_pairs += mok->last_log().shadow_pairs;
      }
      comm.all_reduce_sum(&loss, 1, CommPurpose::control);
      all_reduce_dense_gradients(comm, {&wr});
      for (Parameter* p : mine) {
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value[i] -= static_cast<real>(kLr) * p->grad[i];
        p->grad.zero();
      }
      for (int64_t i = 0; i < wr.value.numel(); ++i) wr.value[i] -= static_cast<real>(kLr) * wr.grad[i];
      wr.grad.zero();
      if (me == 0) curve.loss[step] = loss;
    }
    if (me == 0) curve.router_w.assign(wr.value.span().begin(), wr.value.span().end());
  });
  return curve;
}

}  // namespace

void TestMokTraining::lossCurveMatchesClassic() {
  for (int R : {2, 4}) {
    const Curve classic = train(R, "classic", ShadowMode::never);
    QVERIFY(classic.loss.back() < classic.loss.front());  // it does learn
    for (ShadowMode mode : {ShadowMode::never, ShadowMode::automatic, ShadowMode::always}) {
      const Curve mok = train(R, "mok", mode);
      if (mode != ShadowMode::never) QVERIFY(mok.shadowed_pairs > 0);
      double worst = 0.0;
      for (int s = 0; s < kSteps; ++s) worst = std::max(worst, std::fabs(mok.loss[s] - classic.loss[s]) / classic.loss[s]);
      qInfo("R = %d, %s: largest relative loss difference to classic over %d steps: %.3g", R, shadow_mode_name(mode),
            kSteps, worst);
      // Float reduction noise only: measured 1e-8 at most on the seven OpenBLAS kernel
      // families (Prescott … Cooperlake). Six steps are too few for it to grow, and a token
      // routed differently would move the loss by ~1e-3.
      for (int s = 0; s < kSteps; ++s) {
        const double rel = std::fabs(mok.loss[s] - classic.loss[s]) / classic.loss[s];
        QVERIFY2(rel <= (sizeof(real) == 4 ? 1e-5 : 1e-12),
                 qPrintable(QString("R=%1 mode=%2 step %3: %4 vs %5")
                                .arg(R).arg(shadow_mode_name(mode)).arg(s)
                                .arg(mok.loss[s], 0, 'g', 10).arg(classic.loss[s], 0, 'g', 10)));
      }
    }
  }
}

void TestMokTraining::repeatedRunsAreBitwiseIdentical() {
  for (ShadowMode mode : {ShadowMode::automatic, ShadowMode::always}) {
    const Curve a = train(4, "mok", mode), b = train(4, "mok", mode);
    QCOMPARE(std::memcmp(a.loss.data(), b.loss.data(), a.loss.size() * sizeof(double)), 0);
    QCOMPARE(std::memcmp(a.router_w.data(), b.router_w.data(), a.router_w.size() * sizeof(real)), 0);
  }
}

QTEST_GUILESS_MAIN(TestMokTraining)
#include "test_mok_training.moc"
