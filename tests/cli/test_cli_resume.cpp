// `mok train --resume` as a user runs it (docs/training.md, "Resume"):
//   - the command of the data-loss report — resume step 15 of a 30-step run into another
//     store with a new checkpoint_dir and train.lr — leaves every file of the original run
//     as it was (checksums) and starts a branch in the new checkpoint_dir; so does a plain
//     resume into a store that does not exist yet;
//   - a plain resume of step 15 (later checkpoints exist) exits 2 naming --branch and
//     --overwrite-later, writing nothing; --branch/--overwrite-later need --resume;
//   - a checkpoint with an edited step exits 2 and creates no folder;
//   - `mok generate` refuses weights with a flipped byte.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <QDir>
#include <QTemporaryDir>

#include "core/store/run_store.h"
#include "core/train/file_checksum.h"
#include "support/cli_process.h"
#include "support/file_contents.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::test::read_all;
using mok::test::digests;

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) { return mok::test::run_command(MOK_CLI_PATH, args, cwd); }

}  // namespace

class TestCliResume : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString cfg_, db_;
  fs::path run_dir_;  // 30 steps, a checkpoint every 3

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path corpus = tmp_.path().toStdString() + "/corpus";
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    cfg_ = tmp_.path() + "/tiny.yaml";
    std::ofstream(cfg_.toStdString())
        << "name: tiny\nseed: 7\n"
        << "data:     {corpus: " << corpus.string() << ", tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
        << "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
        << "train:    {steps: 30, batch: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 10, eval_batches: 1, "
           "checkpoint_every: 3}\n"
        << "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
        << "logging:  {checkpoint_dir: " << tmp_.path().toStdString() << "/ck}\n";
    db_ = tmp_.path() + "/a.db";
    const Result r = run_mok({"train", cfg_, "--db", db_, "--json", "--quiet"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    run_dir_ = fs::path(r.json["checkpoint"].toString().toStdString()).parent_path();
    QVERIFY(fs::exists(run_dir_ / "step_000030" / "model.safetensors"));
  }

  void plainResumeOverLaterCheckpointsWritesNothing() {
    const auto before = digests(run_dir_);
    const auto db_before = mok::file_digest(db_.toStdString());
    const QString from = QString::fromStdString((run_dir_ / "step_000015").string());
    const Result r = run_mok({"train", "--resume", from, "--db", db_, "--json"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("--branch") && r.err.contains("--overwrite-later"), qPrintable(r.err));
    QVERIFY2(r.err.contains("step_000018"), qPrintable(r.err));
    QVERIFY(digests(run_dir_) == before);
    QVERIFY(mok::file_digest(db_.toStdString()) == db_before);
    QCOMPARE(run_mok({"train", cfg_, "--branch"}, tmp_.path()).exit_code, 2);
    QCOMPARE(run_mok({"train", cfg_, "--overwrite-later"}, tmp_.path()).exit_code, 2);
  }

  void branchingResumeLeavesTheOriginalAlone() {
    const auto before = digests(run_dir_);
    const QString newdir = tmp_.path() + "/newdir";
    const QString from = QString::fromStdString((run_dir_ / "step_000015").string());
    const Result r = run_mok({"train", "--resume", from, "--db", tmp_.path() + "/other.db", "--set",
                              "logging.checkpoint_dir=" + newdir, "--set", "train.lr=1e-3", "--json"},
                             tmp_.path());
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.err.contains("branch"), qPrintable(r.err));
    QVERIFY2(r.err.contains("train.lr"), qPrintable(r.err));
    QVERIFY(digests(run_dir_) == before);  // step_000018 … 030 and all else: the same bytes
    QVERIFY(QDir(newdir).exists());
    const fs::path ckpt = r.json["checkpoint"].toString().toStdString();
    QCOMPARE(ckpt.parent_path().parent_path(), fs::path(newdir.toStdString()));
    QCOMPARE(r.json["steps"].toInt(), 30);
    mok::RunStore other = mok::RunStore::open_readonly((tmp_.path() + "/other.db").toStdString());
    QCOMPARE(other.metric_series(r.json["run_id"].toInteger(), "train/loss").front().step, int64_t(16));

    // Unchanged settings into a store that does not exist yet: a new run there, not a
    // refusal (that store holds no later checkpoints of it), and the original untouched.
    const Result fresh = run_mok({"train", "--resume", from, "--db", tmp_.path() + "/fresh.db", "--json", "--quiet"},
                                 tmp_.path());
    QCOMPARE(fresh.exit_code, 0);
    QVERIFY(digests(run_dir_) == before);
    QVERIFY(fs::path(fresh.json["checkpoint"].toString().toStdString()).parent_path() != run_dir_);
  }

  void editedStepIsRefusedWithoutAFolder() {
    const fs::path bad = fs::path(tmp_.path().toStdString()) / "bad-run";
    fs::create_directories(bad);
    fs::copy(run_dir_ / "step_000012", bad / "step_000012", fs::copy_options::recursive);
    const fs::path state = bad / "step_000012" / "trainer_state.json";
    std::string text = read_all(state);
    text.replace(text.find("\"step\":12"), 9, "\"step\":-5");
    std::ofstream(state, std::ios::trunc) << text;
    const Result r = run_mok({"train", "--resume", QString::fromStdString(bad.string()), "--db", db_}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("trainer_state.json"), qPrintable(r.err));
    for (const auto& e : fs::recursive_directory_iterator(tmp_.path().toStdString()))
      QVERIFY2(e.path().filename().string().rfind("step_-", 0) != 0, e.path().c_str());
  }

  void generateRefusesFlippedWeights() {
    const fs::path copy = fs::path(tmp_.path().toStdString()) / "flipped" / "step_000030";
    fs::create_directories(copy.parent_path());
    fs::copy(run_dir_ / "step_000030", copy, fs::copy_options::recursive);
    const QString dir = QString::fromStdString(copy.string());
    QCOMPARE(run_mok({"generate", dir, "--tokens", "4"}, tmp_.path()).exit_code, 0);
    std::string bytes = read_all(copy / "model.safetensors");
    bytes[bytes.size() - 11] ^= 0x04;
    std::ofstream(copy / "model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
    const Result r = run_mok({"generate", dir, "--tokens", "4"}, tmp_.path());
    QVERIFY(r.exit_code != 0);
    QVERIFY2(r.err.contains("model.safetensors") && r.err.contains("damaged"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliResume)
#include "test_cli_resume.moc"
