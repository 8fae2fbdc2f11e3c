// The trainer drives the kitten policy: a tiny run (2 layers, d_model 32, seq 32, 12 steps)
// with a linear rank schedule whose horizon is the run's length (schedule_steps 0) reports
// kittens/rank/layer<L> and kittens/error/layer<L> in every metric row, and the ranks follow
// scheduled_rank(config, step, train.steps) — which only holds when the trainer passes
// train.steps to the model and calls set_step every step. The all-low-bit defaults report
// rank 0 and their quantization error; exact runs report no kitten metrics.
#include <QtTest>

#include <cmath>
#include <filesystem>

#include "core/kittens/rank_schedule.h"
#include "core/train/trainer.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::MetricRow;
using mok::RunStatus;

namespace {

class Rows : public mok::MetricSink {
 public:
  std::vector<MetricRow> rows;
  void on_metrics(const MetricRow& r) override { rows.push_back(r); }

  double value(int64_t step, const std::string& name) const {
    for (const auto& r : rows)
      if (r.step == step)
        for (const auto& v : r.values)
          if (v.name == name) return v.value;
    return NAN;
  }
  int count_prefix(int64_t step, const std::string& prefix) const {
    int n = 0;
    for (const auto& r : rows)
      if (r.step == step)
        for (const auto& v : r.values) n += v.name.rfind(prefix, 0) == 0;
    return n;
  }
};

}  // namespace

class TestKittenTrain : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string corpus_;

  mok::ExperimentConfig tiny() {
    mok::ExperimentConfig c = mok::test::tiny_experiment(corpus_, 4);
    c.name = "kitten-tiny";
    c.train.steps = 12;
    c.train.batch = 4;
    c.train.warmup_steps = 2;
    c.train.eval_every = 6;
    c.train.eval_batches = 1;
    c.logging.checkpoint_dir = (tmp_.path() + "/ckpt").toStdString();
    return c;
  }

  Rows run(const mok::ExperimentConfig& c) {
    Rows rows;
    mok::TrainerOptions o;
    o.write_checkpoints = false;
    mok::Trainer t(c, o);
    const mok::TrainResult r = t.run({&rows});
    if (r.status != RunStatus::finished) qWarning("run ended: %s", r.message.c_str());
    return rows;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    corpus_ = (tmp_.path() + "/corpus").toStdString();
    fs::create_directories(corpus_);
    const std::string missing = mok::test::copy_brown_sample(fs::path(corpus_), {"ca01", "cb02", "cf03"});
    QVERIFY2(missing.empty(), missing.c_str());
  }

  void scheduleFollowsTheRunLength() {
    mok::ExperimentConfig c = tiny();
    c.kittens.mode = "custom";
    c.kittens.method = "rsvd";
    c.kittens.schedule = "linear";
    c.kittens.rank = 24;
    c.kittens.final_rank = 4;
    c.kittens.min_rank = 4;
    c.kittens.max_rank = 64;
    c.kittens.schedule_steps = 0;  // horizon = train.steps, known only through the trainer
    c.kittens.elementwise = "exact";
    const Rows rows = run(c);
    QCOMPARE(rows.rows.size(), size_t(12));
    for (int64_t row_step = 1; row_step <= 12; ++row_step) {
      const int expected = mok::scheduled_rank(c.kittens, row_step - 1, c.train.steps);
      for (int l = 0; l < 2; ++l) {
        const std::string rank = "kittens/rank/layer" + std::to_string(l);
        QCOMPARE(rows.value(row_step, rank), double(expected));
        const double err = rows.value(row_step, "kittens/error/layer" + std::to_string(l));
        QVERIFY2(std::isfinite(err) && err >= 0.0 && err < 1.0,
                 qPrintable(QString("step %1 layer %2 error %3").arg(row_step).arg(l).arg(err)));
      }
    }
    // The schedule really moved: start and end ranks differ (so the test can fail).
    QVERIFY(rows.value(1, "kittens/rank/layer0") > rows.value(12, "kittens/rank/layer0"));
    QCOMPARE(rows.value(12, "kittens/rank/layer0"),
             double(mok::scheduled_rank(c.kittens, 11, 12)));
  }

  void defaultsReportErrorsExactReportsNothing() {
    mok::ExperimentConfig c = tiny();
    c.kittens.mode = "kitten";
    const Rows k = run(c);
    QCOMPARE(k.rows.size(), size_t(12));
    QCOMPARE(k.count_prefix(3, "kittens/rank/layer"), 2);
    QCOMPARE(k.count_prefix(3, "kittens/error/layer"), 2);
    // The preset keeps every linear input low-bit: no low-rank input, so rank 0.
    QCOMPARE(k.value(3, "kittens/rank/layer0"), 0.0);
    // 4-bit linear inputs: a small but non-zero reconstruction error.
    const double e = k.value(3, "kittens/error/layer1");
    QVERIFY2(e > 0.0 && e < 0.5, qPrintable(QString::number(e)));
    QVERIFY(std::isfinite(k.value(12, "val/bpb")));

    c.kittens.mode = "exact";
    const Rows x = run(c);
    QCOMPARE(x.rows.size(), size_t(12));
    QCOMPARE(x.count_prefix(3, "kittens/"), 0);
  }
};

QTEST_GUILESS_MAIN(TestKittenTrain)
#include "test_kitten_train.moc"
