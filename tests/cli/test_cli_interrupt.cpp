// SIGINT in the middle of a long step: `mok train` abandons the step at its next check
// point instead of finishing it — the run stops with step 1 completed, not 2 — saves a
// checkpoint of step 1, records it in the store, and a resume from it reproduces the
// uninterrupted run bitwise (nothing of the abandoned step was kept). Each step here is 16
// micro-batches of one 512-token row, so a step takes seconds and a micro-batch a fraction
// of one; the time from the signal to the exit is printed, not asserted.
#include <QtTest>

#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include "core/store/run_store.h"
#include "core/train/checkpoint.h"
#include "support/cli_process.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;

class TestCliInterrupt : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString cfg_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path corpus = tmp_.path().toStdString() + "/corpus";
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    cfg_ = tmp_.path() + "/long-steps.yaml";
    std::ofstream(cfg_.toStdString())
        << "name: long-steps\nseed: 3\n"
        << "data:     {corpus: " << corpus.string() << ", tokenizer: byte, seq_len: 512, val_fraction: 0.25}\n"
        << "model:    {layers: 4, d_model: 128, heads: 4, experts: 8, top_k: 2, expert_hidden: 256}\n"
        << "train:    {steps: 2, batch: 16, grad_accum: 16, lr: 3.0e-3, warmup_steps: 1, eval_every: 100, "
           "eval_batches: 1}\n"
        << "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
        << "logging:  {checkpoint_dir: " << tmp_.path().toStdString() << "/ck}\n";
  }

  void sigintAbandonsTheStepInProgress() {
    const QString db = tmp_.path() + "/int.db";
    QProcess p;
    p.setWorkingDirectory(tmp_.path());
    p.start(MOK_CLI_PATH, {"train", cfg_, "--db", db, "--json"});
    QVERIFY(p.waitForStarted());
    QString err;
    for (int i = 0; i < 3000 && !err.contains("step 1/2"); ++i) {
      p.waitForReadyRead(100);
      err += QString::fromUtf8(p.readAllStandardError());
    }
    QVERIFY2(err.contains("step 1/2"), qPrintable(err));
    QTest::qWait(300);  // well inside step 2
    QElapsedTimer since_signal;
    since_signal.start();
    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(120000));
    qInfo("stopped %lld ms after SIGINT", static_cast<long long>(since_signal.elapsed()));
    err += QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 130);
    const QStringList lines = QString::fromUtf8(p.readAllStandardOutput()).trimmed().split('\n');
    const QJsonObject j = QJsonDocument::fromJson(lines.last().toUtf8()).object();
    QCOMPARE(j["status"].toString(), QString("stopped"));
    QCOMPARE(j["steps"].toInt(), 1);  // step 2 was abandoned, not finished
    QVERIFY2(err.contains("step 2 abandoned"), qPrintable(err));
    const std::string ckpt = j["checkpoint"].toString().toStdString();
    QCOMPARE(mok::read_trainer_state(ckpt).step, int64_t(1));
    {
      mok::RunStore store = mok::RunStore::open_readonly(db.toStdString());
      const int64_t id = j["run_id"].toInteger();
      QCOMPARE(store.metric_series(id, "train/loss").size(), size_t(1));
      QCOMPARE(store.checkpoints(id).size(), size_t(1));
    }

    // Resumed, step 2 comes out as in a run never interrupted.
    const mok::test::CliResult rest = mok::test::run_command(
        MOK_CLI_PATH, {"train", cfg_, "--db", db, "--json", "--quiet", "--resume", QString::fromStdString(ckpt)},
        tmp_.path(), 600000);
    QCOMPARE(rest.exit_code, 0);
    QCOMPARE(rest.json["run_id"].toInteger(), j["run_id"].toInteger());
    const QString ref_db = tmp_.path() + "/ref.db";
    const mok::test::CliResult ref = mok::test::run_command(
        MOK_CLI_PATH, {"train", cfg_, "--db", ref_db, "--json", "--quiet", "--set",
                       "logging.checkpoint_dir=" + tmp_.path() + "/ck-ref"},
        tmp_.path(), 600000);
    QCOMPARE(ref.exit_code, 0);
    mok::RunStore a = mok::RunStore::open_readonly(ref_db.toStdString());
    mok::RunStore b = mok::RunStore::open_readonly(db.toStdString());
    for (const char* name : {"train/loss", "train/grad_norm", "val/loss"}) {
      const auto x = a.metric_series(ref.json["run_id"].toInteger(), name);
      const auto y = b.metric_series(rest.json["run_id"].toInteger(), name);
      QVERIFY2(!x.empty() && x.size() == y.size(), name);
      for (size_t i = 0; i < x.size(); ++i)
        QVERIFY2(std::memcmp(&x[i].value, &y[i].value, sizeof(double)) == 0, name);
    }
  }
};

QTEST_GUILESS_MAIN(TestCliInterrupt)
#include "test_cli_interrupt.moc"
