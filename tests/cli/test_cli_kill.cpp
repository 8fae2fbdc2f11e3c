// `mok train` killed with SIGKILL at several moments — while starting, between steps, in
// the middle of writing a checkpoint — and resumed each time from its run folder:
//   - after every kill, the run store is consistent with the newest checkpoint on disk: it
//     holds the metric row of every step up to that checkpoint and the checkpoint's row;
//   - the run stays one run in the store, and its temporary folders are cleaned up;
//   - once resumed to the end, every metric (wall-time figures aside) is bitwise the
//     uninterrupted run's.
// A checkpoint after every step makes most moments fall inside a checkpoint write. The
// kills take a few seconds in all; where they land depends on the machine's speed, and the
// facts above must hold wherever they land.
#include <QtTest>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <QProcess>
#include <QTemporaryDir>

#include "core/store/run_store.h"
#include "core/train/checkpoint.h"
#include "support/cli_process.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 40;

// The single run folder under `root` ("" while there is none).
std::string run_folder(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) return e.path().string();
  return {};
}

}  // namespace

class TestCliKill : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString corpus_;

  QString config(const QString& sub) {
    const QString path = tmp_.path() + "/" + sub + ".yaml";
    std::ofstream(path.toStdString())
        << "name: tiny\nseed: 11\n"
        << "data:     {corpus: " << corpus_.toStdString() << ", tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
        << "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
        << "train:    {steps: " << kSteps << ", batch: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 8, "
        << "eval_batches: 1, checkpoint_every: 1}\n"
        << "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
        << "logging:  {checkpoint_dir: " << tmp_.path().toStdString() << "/" << sub.toStdString() << "}\n";
    return path;
  }

  // What must hold after a kill: the newest checkpoint's step k has every metric row up to
  // k and its checkpoint row in the store. Returns "" when it holds.
  static QString consistent(const std::string& run_dir, const std::string& db) {
    const auto cps = mok::list_checkpoints(run_dir);
    if (cps.empty()) return "no checkpoint in " + QString::fromStdString(run_dir);
    const auto& [k, dir] = cps.back();
    mok::RunStore store = mok::RunStore::open_readonly(db);
    const auto runs = store.list_runs();
    if (runs.size() != 1) return QString("%1 runs in the store, expected one").arg(runs.size());
    const int64_t id = runs.front().id;
    std::vector<bool> seen(static_cast<size_t>(k) + 1, false);
    for (const auto& p : store.metric_series(id, "train/loss"))
      if (p.step <= k) seen[static_cast<size_t>(p.step)] = true;
    for (int64_t s = 1; s <= k; ++s)
      if (!seen[static_cast<size_t>(s)])
        return QString("newest checkpoint step %1, but no metrics of step %2").arg(k).arg(s);
    bool recorded = false;
    std::error_code ec;  // a row whose folder never appeared is not this one
    for (const auto& c : store.checkpoints(id)) recorded |= c.step == k && fs::equivalent(c.path, dir, ec);
    if (!recorded) return QString("newest checkpoint step %1 has no checkpoint row").arg(k);
    if (mok::read_trainer_state(dir).step != k) return "trainer state disagrees with the folder name";
    return {};
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    corpus_ = tmp_.path() + "/corpus";
    const std::string missing = mok::test::copy_brown_sample(corpus_.toStdString());
    QVERIFY2(missing.empty(), missing.c_str());
  }

  void killedAnywhereStaysConsistentAndResumesBitwise() {
    const QString ref_db = tmp_.path() + "/ref.db";
    const mok::test::CliResult ref =
        mok::test::run_command(MOK_CLI_PATH, {"train", config("ref"), "--db", ref_db, "--json", "--quiet"}, tmp_.path());
    QCOMPARE(ref.exit_code, 0);

    const QString cfg = config("killed");
    const QString db = tmp_.path() + "/killed.db";
    const fs::path root = tmp_.path().toStdString() + "/killed";
    // Milliseconds between the start of a session (the first: its first checkpoint) and
    // SIGKILL: inside start-up, between steps, inside checkpoint writes.
    const int delays_ms[] = {0, 35, 5, 80, 15, 160, 50, 260, 25, 120, 95, 140, 70, 190};
    int killed_mid_run = 0;
    for (int delay : delays_ms) {
      const std::string run_dir = run_folder(root);
      QStringList args{"train", cfg, "--db", db, "--quiet"};
      if (!run_dir.empty()) args << "--resume" << QString::fromStdString(run_dir);
      QProcess p;
      p.setWorkingDirectory(tmp_.path());
      p.start(MOK_CLI_PATH, args);
      QVERIFY(p.waitForStarted());
      if (run_dir.empty()) {
        // The first session: wait for its first checkpoint, so there is a run to resume.
        for (int i = 0; i < 6000 && mok::list_checkpoints(run_folder(root)).empty(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      p.kill();  // SIGKILL
      QVERIFY(p.waitForFinished(60000));
      if (p.exitStatus() == QProcess::CrashExit) ++killed_mid_run;
      const auto cps = mok::list_checkpoints(run_folder(root));
      qInfo("kill %d ms after start: %s, newest checkpoint step %lld", delay,
            p.exitStatus() == QProcess::CrashExit ? "killed" : "had ended", cps.empty() ? -1LL : (long long)cps.back().first);
      const QString problem = consistent(run_folder(root), db.toStdString());
      QVERIFY2(problem.isEmpty(), qPrintable(QString("after a kill at %1 ms: %2").arg(delay).arg(problem)));
    }
    QVERIFY2(killed_mid_run >= 3, "the kills did not land inside the run; the test proved nothing");

    const std::string run_dir = run_folder(root);
    const mok::test::CliResult last = mok::test::run_command(
        MOK_CLI_PATH, {"train", cfg, "--db", db, "--json", "--quiet", "--resume", QString::fromStdString(run_dir)},
        tmp_.path());
    QCOMPARE(last.exit_code, 0);
    QCOMPARE(last.json["steps"].toInt(), kSteps);
    QVERIFY(consistent(run_dir, db.toStdString()).isEmpty());
    for (const auto& e : fs::directory_iterator(run_dir))
      QVERIFY2(e.path().filename().string()[0] != '.', e.path().c_str());  // no temporary left

    // Every metric of every step, bitwise the uninterrupted run's.
    mok::RunStore a = mok::RunStore::open_readonly(ref_db.toStdString());
    mok::RunStore b = mok::RunStore::open_readonly(db.toStdString());
    const int64_t ia = ref.json["run_id"].toInteger(), ib = last.json["run_id"].toInteger();
    QCOMPARE(b.list_runs().size(), size_t(1));
    const auto names = a.metric_names(ia);
    QCOMPARE(b.metric_names(ib), names);
    for (const std::string& name : names) {
      if (name.rfind("perf/", 0) == 0) continue;  // wall time
      const auto x = a.metric_series(ia, name), y = b.metric_series(ib, name);
      QVERIFY2(x.size() == y.size(), name.c_str());
      for (size_t i = 0; i < x.size(); ++i) {
        QVERIFY2(x[i].step == y[i].step && x[i].tokens == y[i].tokens, name.c_str());
        QVERIFY2(std::memcmp(&x[i].value, &y[i].value, sizeof(double)) == 0,
                 qPrintable(QString("%1 at step %2: %3 vs %4").arg(name.c_str()).arg(x[i].step)
                                .arg(x[i].value, 0, 'g', 17).arg(y[i].value, 0, 'g', 17)));
      }
    }
    QCOMPARE(b.metric_series(ib, "train/loss").size(), size_t(kSteps));
  }
};

QTEST_GUILESS_MAIN(TestCliKill)
#include "test_cli_kill.moc"
