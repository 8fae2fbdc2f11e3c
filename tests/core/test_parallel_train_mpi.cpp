// `mok train` as an MPI job: `mpirun -np 2 --oversubscribe mok train tiny.yaml
// --set parallel.comm=mpi --set parallel.ranks=2 --json` (plus --allow-run-as-root as root)
// gives, over 50 steps, bit for bit the metrics of the same config on two local ranks in one
// process (which test_parallel_train.cpp checks against one rank); rank 0 alone writes the
// store (one run in it) and prints the JSON line; comm/* metrics are recorded. Without a
// launcher, parallel.comm: mpi is refused with a message that says how to launch. With MoK
// dispatch, transfers on a helper thread in chunks, the MPI job equals two local ranks bit
// for bit too.
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/parallel/mpi_communicator.h"
#include "core/store/run_store.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;

namespace {

QJsonObject last_json_line(const QByteArray& out) {
  const QList<QByteArray> lines = out.trimmed().split('\n');
  if (lines.isEmpty()) return {};
  return QJsonDocument::fromJson(lines.last()).object();
}

}  // namespace

class TestParallelTrainMpi : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString yaml_;

  QProcessEnvironment env() const {
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    return e;
  }

  // Runs a command; returns (exit code, stdout); fails the test on a crash or a hang.
  int run(const QString& program, const QStringList& args, QByteArray* out, QByteArray* err,
          const QProcessEnvironment& e) {
    QProcess p;
    p.setProcessEnvironment(e);
    p.start(program, args);
    if (!p.waitForStarted(30000)) return -1000;
    if (!p.waitForFinished(180000)) {
      p.kill();
      p.waitForFinished();
      return -1001;
    }
    *out = p.readAllStandardOutput();
    *err = p.readAllStandardError();
    return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1002;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path corpus = fs::path(tmp_.path().toStdString()) / "corpus";
    fs::create_directories(corpus);
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    yaml_ = tmp_.path() + "/tiny.yaml";
    std::ofstream y(yaml_.toStdString());
    y << "name: tiny-mpi\n"
         "seed: 7\n"
         "data:     {corpus: " << corpus.string() << ", tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
         "model:    {layers: 2, d_model: 32, heads: 2, experts: 8, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
         "train:    {steps: 50, batch: 8, lr: 3.0e-3, warmup_steps: 5, eval_every: 25, eval_batches: 2}\n"
         "routing:  {dispatcher: classic, capacity_factor: 0}\n"
         "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
         "logging:  {progress: false, checkpoint_dir: " << (tmp_.path() + "/ckpt").toStdString() << "}\n";
  }

  // Same R, same math: the transport changes no sum, so the comparison is bitwise (whereas
  // against one rank the curves may part after many steps; see test_parallel_train.cpp).
  void mpiJobEqualsLocalRanksBitwise() {
    QVERIFY2(mok::mpi_available(), "this build has no MPI support: install libopenmpi-dev and reconfigure");
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    QVERIFY2(!mpirun.isEmpty(), "mpirun not found on PATH: install openmpi-bin");
    QByteArray out, err;
    const QString db1 = tmp_.path() + "/local.db", db2 = tmp_.path() + "/mpi.db";

    int rc = run(MOK_CLI_PATH, {"train", yaml_, "--db", db1, "--set", "parallel.ranks=2", "--json", "--quiet"}, &out,
                 &err, env());
    QVERIFY2(rc == 0, qPrintable("two local ranks: exit " + QString::number(rc) + "\n" + err));
    const QJsonObject local = last_json_line(out);

    QStringList args = {"-np", "2", "--oversubscribe"};
    if (geteuid() == 0) args << "--allow-run-as-root";
    args << MOK_CLI_PATH << "train" << yaml_ << "--set" << "parallel.comm=mpi" << "--set" << "parallel.ranks=2"
         << "--db" << db2 << "--json" << "--quiet";
    rc = run(mpirun, args, &out, &err, env());
    QVERIFY2(rc == 0, qPrintable("mpirun: exit " + QString::number(rc) + "\n" + out + "\n" + err));
    // One JSON line: rank 0's.
    QCOMPARE(out.count("\"run_id\""), 1);
    const QJsonObject two = last_json_line(out);
    QCOMPARE(two.value("status").toString(), QString("finished"));
    QCOMPARE(two.value("ranks").toInt(), 2);
    QCOMPARE(two.value("steps").toInt(), 50);
    QCOMPARE(two.value("parameters").toDouble(), local.value("parameters").toDouble());
    QVERIFY(two.value("comm_bytes_remote").toDouble() > 0);

    mok::RunStore s1 = mok::RunStore::open_readonly(db1.toStdString());
    mok::RunStore s2 = mok::RunStore::open_readonly(db2.toStdString());
    const int64_t id1 = local.value("run_id").toInteger(), id2 = two.value("run_id").toInteger();
    for (const char* metric : {"train/loss", "train/aux_loss", "train/grad_norm", "val/loss", "comm/dispatch_bytes"}) {
      const auto a = s1.metric_series(id1, metric);
      const auto b = s2.metric_series(id2, metric);
      QVERIFY2(!a.empty(), metric);
      QCOMPARE(b.size(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(b[i].step, a[i].step);
        QVERIFY2(a[i].value == b[i].value,
                 qPrintable(QString("%1 at step %2: %3 vs %4").arg(metric).arg(a[i].step).arg(a[i].value, 0, 'g', 17)
                                .arg(b[i].value, 0, 'g', 17)));
      }
    }
    QCOMPARE(s1.metric_series(id1, "train/loss").size(), size_t(50));
    QCOMPARE(two.value("val_loss").toDouble(), local.value("val_loss").toDouble());
    const auto dispatch = s2.metric_series(id2, "comm/dispatch_bytes");
    QCOMPARE(dispatch.size(), size_t(50));
    QVERIFY(dispatch.front().value > 0);
    QCOMPARE(s2.metric_series(id2, "comm/grad_bytes").front().value,
             s2.metric_series(id2, "comm/grad_bytes").back().value);
  }

  // MoK dispatch under MPI, with its transfers on a helper thread in 4 chunks, gives the bits
  // of the same run on two local ranks with the overlap off: the transport, the thread and the
  // chunking change no sum.
  void mpiMokJobEqualsLocalRanksBitwise() {
    QVERIFY2(mok::mpi_available(), "this build has no MPI support: install libopenmpi-dev and reconfigure");
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    QVERIFY2(!mpirun.isEmpty(), "mpirun not found on PATH: install openmpi-bin");
    QByteArray out, err;
    const QString db1 = tmp_.path() + "/mok-local.db", db2 = tmp_.path() + "/mok-mpi.db";
    const QStringList common = {"--set", "routing.dispatcher=mok", "--set", "train.steps=20",
                                "--set", "parallel.ranks=2", "--json", "--quiet"};
    int rc = run(MOK_CLI_PATH, QStringList{"train", yaml_, "--db", db1, "--set", "routing.overlap_chunks=0"} + common,
                 &out, &err, env());
    QVERIFY2(rc == 0, qPrintable("local ranks: exit " + QString::number(rc) + "\n" + err));
    const QJsonObject local = last_json_line(out);
    QStringList args = {"-np", "2", "--oversubscribe"};
    if (geteuid() == 0) args << "--allow-run-as-root";
    args << MOK_CLI_PATH << "train" << yaml_ << "--db" << db2 << "--set" << "parallel.comm=mpi"
         << "--set" << "routing.overlap_chunks=4" << common;
    rc = run(mpirun, args, &out, &err, env());
    QVERIFY2(rc == 0, qPrintable("mpirun: exit " + QString::number(rc) + "\n" + out + "\n" + err));
    const QJsonObject mpi = last_json_line(out);
    QCOMPARE(mpi.value("status").toString(), QString("finished"));

    mok::RunStore s1 = mok::RunStore::open_readonly(db1.toStdString());
    mok::RunStore s2 = mok::RunStore::open_readonly(db2.toStdString());
    const int64_t id1 = local.value("run_id").toInteger(), id2 = mpi.value("run_id").toInteger();
    for (const char* metric : {"train/loss", "train/grad_norm", "comm/dispatch_bytes", "comm/combine_bytes"}) {
      const auto a = s1.metric_series(id1, metric);
      const auto b = s2.metric_series(id2, metric);
      QCOMPARE(a.size(), size_t(20));
      QCOMPARE(b.size(), a.size());
      for (size_t i = 0; i < a.size(); ++i)
        QVERIFY2(a[i].value == b[i].value,
                 qPrintable(QString("%1 at step %2: %3 vs %4").arg(metric).arg(a[i].step).arg(a[i].value, 0, 'g', 17)
                                .arg(b[i].value, 0, 'g', 17)));
    }
    QCOMPARE(mpi.value("val_loss").toDouble(), local.value("val_loss").toDouble());
  }

  void mpiWithoutLauncherIsRefused() {
    QProcessEnvironment e = env();
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) e.remove(v);
    QByteArray out, err;
    const QString db = tmp_.path() + "/refused.db";
    const int rc = run(MOK_CLI_PATH, {"train", yaml_, "--set", "parallel.comm=mpi", "--db", db}, &out, &err, e);
    QCOMPARE(rc, 2);
    QVERIFY2(err.contains("mpirun"), err.constData());
    QVERIFY(!QFileInfo::exists(db));  // nothing written
  }
};

QTEST_GUILESS_MAIN(TestParallelTrainMpi)
#include "test_parallel_train_mpi.moc"
