// The run store under faults, through `mok` as a user runs it:
//   - a damaged store (a page of the metrics overwritten) is refused before training and
//     left byte for byte as it was;
//   - a store the user may not write is refused before training (SQLite would quietly open
//     it read-only and the run would be recorded nowhere);
//   - a store that fills up mid-run (RLIMIT_FSIZE stands in for a full disk: a write past
//     it fails as one there does) stops the run with a non-zero exit, keeping what the
//     store holds;
//   - the reading commands leave no -wal or -shm files beside a store, and read one on a
//     medium they cannot write (an unwritable folder).
// File modes do not bind root, so the permission cases run the child as nobody when the
// suite runs as root (tests/support/child_limits.h).
#include <QtTest>

#include <QJsonArray>
#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "core/store/run_store.h"
#include "support/child_limits.h"
#include "support/file_contents.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::test::ChildLimits;
using mok::test::read_all;

namespace {

struct Outcome {
  int exit_code = -1;
  QString out, err;
  QJsonObject json;
};

Outcome run(const QString& program, const QStringList& args, ChildLimits limits = {}) {
  QProcess p;
  mok::test::apply_child_limits(p, limits);
  p.start(program, args);
  Outcome o;
  if (!p.waitForFinished(60000)) {
    p.kill();
    p.waitForFinished();
    o.err = "timed out";
    return o;
  }
  o.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err = QString::fromUtf8(p.readAllStandardError());
  o.json = QJsonDocument::fromJson(o.out.trimmed().split('\n').last().toUtf8()).object();
  return o;
}

bool has_sqlite_side_files(const QString& db) {
  return fs::exists((db + "-wal").toStdString()) || fs::exists((db + "-shm").toStdString());
}

const QFile::Permissions kAllRead = QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther;
const QFile::Permissions kAllReadExec =
    kAllRead | QFile::ExeOwner | QFile::ExeGroup | QFile::ExeOther;
const QFile::Permissions kAll = kAllReadExec | QFile::WriteOwner | QFile::WriteGroup | QFile::WriteOther;

}  // namespace

class TestCliStoreFaults : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString mok_, config_, healthy_;

  // A fresh folder under the temporary one that every user may write.
  QString folder(const QString& name) {
    const QString dir = tmp_.path() + "/" + name;
    fs::create_directories(dir.toStdString());
    QFile::setPermissions(dir, kAll);
    return dir;
  }

  QString copy_of_healthy(const QString& dir, const QString& name) {
    const QString db = dir + "/" + name;
    fs::copy_file(healthy_.toStdString(), db.toStdString());
    return db;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    QVERIFY(QFile::setPermissions(tmp_.path(), kAll));
    const QString corpus = tmp_.path() + "/corpus";
    const std::string missing = mok::test::copy_brown_sample(fs::path(corpus.toStdString()), {"ca01"});
    QVERIFY2(missing.empty(), missing.c_str());
    mok_ = tmp_.path() + "/mok";
    QVERIFY(mok::test::reachable_copy(MOK_CLI_PATH, mok_));
    config_ = tmp_.path() + "/tiny.yaml";
    std::ofstream(config_.toStdString())
        << "name: tiny\nseed: 7\n"
        << "data:  {corpus: " << corpus.toStdString() << ", tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
        << "model: {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
        << "train: {steps: 40, batch: 4, eval_every: 20, eval_batches: 1}\n"
        << "parallel: {threads: 1}\nlogging: {progress: false}\n";
    healthy_ = folder("healthy") + "/runs.db";
    const Outcome o = run(mok_, {"train", config_, "--db", healthy_, "--set",
                                 "logging.checkpoint_dir=" + folder("healthy_ckpt"), "--quiet", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
  }

  // Training warned "(training continues)", exited 0 and wrote into the damaged file.
  void damagedStoreIsRefusedAndLeftUnchanged() {
    const QString dir = folder("damaged");
    const QString db = copy_of_healthy(dir, "runs.db");
    std::string bytes = read_all(db.toStdString());
    const size_t pages = bytes.size() / 4096;
    QVERIFY(pages > 8);
    // A page three quarters in holds metric rows: the header, the schema and the marker the
    // store checks first stay intact.
    const size_t page = pages * 3 / 4;
    std::fill(bytes.begin() + static_cast<long>(page * 4096), bytes.begin() + static_cast<long>((page + 1) * 4096),
              '\xff');
    std::ofstream(db.toStdString(), std::ios::binary | std::ios::trunc) << bytes;
    const QString ckpt = dir + "/ckpt";
    const Outcome o =
        run(mok_, {"train", config_, "--db", db, "--set", "logging.checkpoint_dir=" + ckpt, "--quiet", "--json"});
    QVERIFY(o.exit_code != 0);
    QVERIFY2(o.err.contains("is damaged") && o.err.contains("left unchanged"), qPrintable(o.err));
    QCOMPARE(o.json["steps"].toInt(-1), 0);
    QVERIFY(read_all(db.toStdString()) == bytes);
    QVERIFY(!has_sqlite_side_files(db));
    QVERIFY(!fs::exists(ckpt.toStdString()));
  }

  // SQLite opened the file read-only without a word: the run trained, exit 0, run_id 0.
  void unwritableStoreIsRefusedBeforeTraining() {
    const QString dir = folder("readonly");
    const QString db = copy_of_healthy(dir, "runs.db");
    QVERIFY(QFile::setPermissions(db, kAllRead));
    const std::string before = read_all(db.toStdString());
    const QString ckpt = dir + "/ckpt";
    const Outcome o = run(mok_, {"train", config_, "--db", db, "--set", "logging.checkpoint_dir=" + ckpt, "--json"},
                          {.unprivileged = true});
    QVERIFY2(o.exit_code != 0, qPrintable(o.out));
    QVERIFY2(o.err.contains("cannot be written") && o.err.contains("permission"), qPrintable(o.err));
    QCOMPARE(o.json["steps"].toInt(-1), 0);
    QVERIFY(read_all(db.toStdString()) == before);
    QVERIFY(!fs::exists(ckpt.toStdString()));
  }

  // The run finished with exit 0 and status finished while its metrics stopped at the
  // moment the disk filled.
  void storeFillingUpStopsTheRunWithAnError() {
    const QString dir = folder("full");
    const QString db = copy_of_healthy(dir, "runs.db");
    const int64_t healthy_rows = mok::RunStore::open_readonly(healthy_.toStdString()).metric_row_count(1);
    // 2000 steps write several MB of metric rows into the write-ahead log; it may not grow
    // past 1 MiB (the checkpoint files of this model are far smaller).
    const Outcome o = run(mok_,
                          {"train", config_, "--db", db, "--set", "train.steps=2000", "--set", "train.eval_every=1000",
                           "--set", "logging.checkpoint_dir=" + dir + "/ckpt", "--quiet", "--json"},
                          {.max_file_bytes = 1 << 20});
    QCOMPARE(o.exit_code, 1);
    QCOMPARE(o.json["status"].toString(), QString("failed"));
    const int steps = o.json["steps"].toInt(-1);
    QVERIFY2(steps >= 0 && steps < 2000, qPrintable(o.out));
    QVERIFY2(o.err.contains("run store cannot record"), qPrintable(o.err));
    // What the store held stays readable and whole; the new run holds no step it did not train.
    mok::RunStore store = mok::RunStore::open_readonly(db.toStdString());
    QCOMPARE(store.metric_row_count(1), healthy_rows);
    if (const auto run2 = store.find_run(2)) QVERIFY(run2->summary.last_step <= steps);
  }

  // `runs list` left -wal and -shm files beside a healthy store.
  void readingCommandsLeaveNothingBeside() {
    const QString db = copy_of_healthy(folder("browse"), "runs.db");
    const std::string before = read_all(db.toStdString());
    const QList<QStringList> commands = {{"runs", "list", "--db", db},
                                         {"runs", "show", "1", "--db", db},
                                         {"runs", "export-csv", "1", "--db", db},
                                         {"runs", "compare", "1", "1", "--db", db}};
    for (const QStringList& args : commands) {
      const Outcome o = run(mok_, args);
      QVERIFY2(o.exit_code == 0, qPrintable(args.join(' ') + ": " + o.err));
      QVERIFY2(!has_sqlite_side_files(db), qPrintable(args.join(' ')));
    }
    QVERIFY(read_all(db.toStdString()) == before);
  }

  // On a medium nobody may write, `runs list` failed at PRAGMA user_version (SQLite could
  // not create its -shm file).
  void storeInAnUnwritableFolderCanBeBrowsed() {
    const QString dir = folder("media");
    const QString db = copy_of_healthy(dir, "runs.db");
    QVERIFY(QFile::setPermissions(db, kAllRead));
    QVERIFY(QFile::setPermissions(dir, kAllReadExec));
    const Outcome o = run(mok_, {"runs", "list", "--db", db, "--json"}, {.unprivileged = true});
    QFile::setPermissions(dir, kAll);
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QCOMPARE(o.json["runs"].toArray().size(), 1);
    QVERIFY(!has_sqlite_side_files(db));
  }
};

QTEST_GUILESS_MAIN(TestCliStoreFaults)
#include "test_cli_store_faults.moc"
