// The locality loss (routing.locality_aux_coef) in the trainer, over R = 2 local ranks on a
// tiny MoE model (2 MoE layers, 8 experts, seq 32, batch 8):
//   - train/locality_loss is in every metric row: 0 with coef 0, and with coef c it is the
//     mean router mass on other ranks' experts summed over the MoE layers, so in (0, 2c);
//   - with one rank the coef changes nothing: metrics bitwise those of coef 0;
//   - with two ranks its gradient reaches the model: the loss curve differs from coef 0;
//   - the local fraction (comm/local_tokens over the routed pairs) is printed for both, not
//     asserted: the trainer's rank shards are rows of one random batch, so the ranks' pushes
//     toward their own experts cancel in expectation and the fraction stays near ½ (see
//     docs/mok_dispatch.md, "Locality loss"; test_mok_locality shows the loss raising it
//     when a rank's tokens differ from the others'). For the same reason the reported loss
//     (mean over ranks) stays near c·(R − 1)/R per layer at every step, whatever the router.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/train/trainer.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::MetricRow;
using mok::RunStatus;

namespace {

class Recorder : public mok::MetricSink {
 public:
  std::vector<MetricRow> rows;
  void on_metrics(const MetricRow& r) override { rows.push_back(r); }
  double value(const MetricRow& r, const std::string& name) const {
    for (const auto& v : r.values)
      if (v.name == name) return v.value;
    return NAN;
  }
  double sum(const MetricRow& r, const std::string& prefix) const {
    double s = 0.0;
    for (const auto& v : r.values)
      if (v.name.rfind(prefix, 0) == 0) s += v.value;
    return s;
  }
  // Σ comm/local_tokens / Σ routed pairs over every row.
  double local_fraction() const {
    double local = 0.0, pairs = 0.0;
    for (const auto& r : rows) {
      local += value(r, "comm/local_tokens");
      pairs += sum(r, "moe/load/");
    }
    return pairs > 0 ? local / pairs : NAN;
  }
};

}  // namespace

class TestLocalityLossTrain : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string corpus_;

  mok::ExperimentConfig tiny(int ranks, double coef) {
    mok::ExperimentConfig c = mok::test::tiny_experiment(corpus_, 8);
    c.name = "tiny-locality";
    c.seed = 11;
    c.train.steps = 30;
    c.train.warmup_steps = 5;
    c.train.eval_every = 30;
    c.train.eval_batches = 1;
    c.routing.dispatcher = "classic";  // comm/local_tokens = pairs whose expert is on the token's rank
    c.routing.locality_aux_coef = coef;
    c.parallel.ranks = ranks;
    c.parallel.comm = "local";
    return c;
  }

  void run(const mok::ExperimentConfig& c, Recorder& rec) {
    mok::TrainerOptions o;
    o.write_checkpoints = false;
    mok::Trainer t(c, o);
    const mok::TrainResult r = t.run({&rec});
    QVERIFY2(r.status == RunStatus::finished, r.message.c_str());
    QCOMPARE(rec.rows.size(), size_t(30));
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    corpus_ = (tmp_.path() + "/corpus").toStdString();
    fs::create_directories(corpus_);
    const std::string missing = mok::test::copy_brown_sample(fs::path(corpus_), {"ca02", "cd05", "cg07"});
    QVERIFY2(missing.empty(), missing.c_str());
  }

  void oneRankIsUnchanged() {
    Recorder off, on;
    run(tiny(1, 0.0), off);
    run(tiny(1, 0.5), on);
    QCOMPARE(on.rows.size(), off.rows.size());
    for (size_t i = 0; i < off.rows.size(); ++i) {
      QCOMPARE(on.value(on.rows[i], "train/locality_loss"), 0.0);
      for (const char* name : {"train/loss", "train/aux_loss", "train/z_loss", "train/grad_norm"}) {
        const double a = off.value(off.rows[i], name), b = on.value(on.rows[i], name);
        QVERIFY2(std::memcmp(&a, &b, sizeof a) == 0, qPrintable(QString("step %1 %2: %3 vs %4")
                                                                     .arg(i + 1).arg(name).arg(a, 0, 'g', 17).arg(b, 0, 'g', 17)));
      }
    }
  }

  void twoRanksReportAndTrainTheLoss() {
    const double coef = 0.5;
    Recorder off, on;
    run(tiny(2, 0.0), off);
    run(tiny(2, coef), on);
    bool curve_differs = false;
    for (size_t i = 0; i < on.rows.size(); ++i) {
      QCOMPARE(off.value(off.rows[i], "train/locality_loss"), 0.0);
      const double loc = on.value(on.rows[i], "train/locality_loss");
      QVERIFY2(loc > 0.0 && loc < 2 * coef, qPrintable(QString("step %1: locality loss %2").arg(i + 1).arg(loc)));
      // Two MoE layers, each c · ½ up to how the two shards' tokens differ.
      QVERIFY2(std::abs(loc - 2 * coef * 0.5) < 0.1 * coef, qPrintable(QString("step %1: %2").arg(i + 1).arg(loc)));
      if (i == 0) {
        // Step 1 runs on identical weights: the same forward.
        QCOMPARE(on.value(on.rows[i], "train/loss"), off.value(off.rows[i], "train/loss"));
      } else if (on.value(on.rows[i], "train/loss") != off.value(off.rows[i], "train/loss")) {
        curve_differs = true;
      }
    }
    QVERIFY(curve_differs);
    qInfo("R = 2, 30 steps: local fraction %.4f with coef 0, %.4f with coef %.2f; locality loss %.4f → %.4f",
          off.local_fraction(), on.local_fraction(), coef, on.value(on.rows.front(), "train/locality_loss"),
          on.value(on.rows.back(), "train/locality_loss"));
  }
};

QTEST_GUILESS_MAIN(TestLocalityLossTrain)
#include "test_locality_loss_train.moc"
