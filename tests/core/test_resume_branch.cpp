// Resume semantics (docs/training.md, "Resume"), through the Trainer with a run store:
//   - a plain resume from a checkpoint with later ones after it is refused, and writes
//     nothing (the run's files keep their checksums, the store gets no run);
//   - a resume that changes a setting the results depend on (train.lr) is a branch: a new
//     run in the store, its own folder beside the original (or under a changed
//     logging.checkpoint_dir), metrics from the next step on, events on both runs, and the
//     branch origin in its checkpoints; the original's files keep their checksums;
//   - a resume into another store is a new run too (the original folder untouched);
//   - --overwrite-later continues the same run and rewrites the later checkpoints, whose
//     weights and optimizer state come out bitwise the same (training is deterministic);
//   - a longer train.steps continues the same run from its newest checkpoint;
//   - damaged checkpoints (negative or impossible step, missing tokenizer, flipped weight
//     bytes) are refused before anything is recorded or written.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/store/run_store.h"
#include "core/train/checkpoint.h"
#include "core/train/file_checksum.h"
#include "core/train/trainer.h"
#include "support/file_contents.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::test::read_all;
using mok::test::digests;
using mok::RunStatus;

namespace {

void replace_in_file(const fs::path& p, const std::string& from, const std::string& to) {
  std::string t = read_all(p);
  const size_t at = t.find(from);
  if (at == std::string::npos) qFatal("'%s' not in %s", from.c_str(), p.c_str());
  t.replace(at, from.size(), to);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << t;
}

bool has_event(mok::RunStore& store, int64_t run, const std::string& part) {
  for (const auto& e : store.events(run))
    if (e.text.find(part) != std::string::npos) return true;
  return false;
}

// Any folder named like a checkpoint of a negative step, anywhere below `root`.
bool negative_step_folder(const fs::path& root) {
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.path().filename().string().rfind("step_-", 0) == 0) return true;
  return false;
}

}  // namespace

class TestResumeBranch : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string corpus_, db_;
  int64_t original_id_ = 0;
  fs::path original_dir_;  // run A: checkpoints 5, 10, 15, 20

  mok::ExperimentConfig tiny(const std::string& sub) {
    mok::ExperimentConfig c = mok::test::tiny_experiment(corpus_, 4);
    c.train.steps = 20;
    c.train.batch = 4;
    c.train.warmup_steps = 2;
    c.train.eval_every = 10;
    c.train.eval_batches = 1;
    c.train.checkpoint_every = 5;
    c.logging.checkpoint_dir = (tmp_.path() + "/" + QString::fromStdString(sub)).toStdString();
    return c;
  }

  mok::TrainResult train(const mok::ExperimentConfig& c, mok::TrainerOptions o) {
    mok::Trainer t(c, o);
    return t.run({});
  }

  mok::TrainerOptions resume(const fs::path& from, std::string db = {}) {
    mok::TrainerOptions o;
    o.db_path = db.empty() ? db_ : db;
    o.resume_path = from.string();
    return o;
  }

  int64_t run_count(const std::string& db) {
    mok::RunFilter all;
    all.include_archived = true;
    return static_cast<int64_t>(mok::RunStore::open_readonly(db).list_runs(all).size());
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    corpus_ = (tmp_.path() + "/corpus").toStdString();
    const std::string missing = mok::test::copy_brown_sample(fs::path(corpus_));
    QVERIFY2(missing.empty(), missing.c_str());
    db_ = (tmp_.path() + "/runs.db").toStdString();
    mok::TrainerOptions o;
    o.db_path = db_;
    const mok::TrainResult r = train(tiny("ck"), o);
    QCOMPARE(r.status, RunStatus::finished);
    original_id_ = r.run_id;
    original_dir_ = fs::path(r.checkpoint_dir).parent_path();
    QCOMPARE(mok::list_checkpoints(original_dir_.string()).size(), size_t(4));
  }

  void plainResumeOverLaterCheckpointsIsRefused() {
    const auto before = digests(original_dir_);
    const int64_t runs = run_count(db_);
    const mok::TrainResult r = train(tiny("ck"), resume(original_dir_ / "step_000010"));
    QCOMPARE(r.status, RunStatus::failed);
    QVERIFY2(r.message.find("after step 10") != std::string::npos, r.message.c_str());
    QVERIFY2(r.message.find("--branch") != std::string::npos, r.message.c_str());
    QVERIFY2(r.message.find("--overwrite-later") != std::string::npos, r.message.c_str());
    QVERIFY(digests(original_dir_) == before);
    QCOMPARE(run_count(db_), runs);
  }

  void changedLearningRateBranches() {
    const auto before = digests(original_dir_);
    auto c = tiny("ck");
    c.train.lr = 1e-3;
    const mok::TrainResult r = train(c, resume(original_dir_ / "step_000010"));
    QCOMPARE(r.status, RunStatus::finished);
    QVERIFY(r.run_id != original_id_);
    QVERIFY(digests(original_dir_) == before);  // the original is untouched
    const fs::path branch_dir = fs::path(r.checkpoint_dir).parent_path();
    QVERIFY(branch_dir != original_dir_);
    QCOMPARE(branch_dir.parent_path(), original_dir_.parent_path());  // beside the original
    QCOMPARE(mok::list_checkpoints(branch_dir.string()).size(), size_t(2));  // 15 and 20
    const mok::TrainerState st = mok::read_trainer_state(r.checkpoint_dir);
    QCOMPARE(st.run_id, r.run_id);
    QCOMPARE(st.branched_from.run_id, original_id_);
    QCOMPARE(st.branched_from.step, int64_t(10));
    QCOMPARE(fs::path(st.branched_from.checkpoint), fs::canonical(original_dir_ / "step_000010"));
    mok::RunStore store = mok::RunStore::open_readonly(db_);
    const auto loss = store.metric_series(r.run_id, "train/loss");
    QCOMPARE(loss.size(), size_t(10));
    QCOMPARE(loss.front().step, int64_t(11));
    // The change took effect: step 11's learning rate is not the original's.
    QVERIFY(store.metric_series(r.run_id, "train/lr").front().value !=
            store.metric_series(original_id_, "train/lr")[10].value);
    QVERIFY(has_event(store, r.run_id, "branch: a new run from step 10 of run " + std::to_string(original_id_)));
    QVERIFY(has_event(store, r.run_id, "train.lr"));
    QVERIFY(has_event(store, original_id_, "branch: run " + std::to_string(r.run_id) + " starts from step 10"));
  }

  void changedCheckpointDirIsHonoured() {
    const auto before = digests(original_dir_);
    auto c = tiny("ck");
    c.train.lr = 2e-3;
    c.logging.checkpoint_dir = (tmp_.path() + "/newdir").toStdString();
    const mok::TrainResult r = train(c, resume(original_dir_ / "step_000015"));
    QCOMPARE(r.status, RunStatus::finished);
    QCOMPARE(fs::path(r.checkpoint_dir).parent_path().parent_path(), fs::path(c.logging.checkpoint_dir));
    QVERIFY(fs::exists(r.checkpoint_dir + "/model.safetensors"));
    QVERIFY(digests(original_dir_) == before);
  }

  void anotherStoreStartsANewRun() {
    const auto before = digests(original_dir_);
    const std::string other = (tmp_.path() + "/other.db").toStdString();
    const mok::TrainResult r = train(tiny("ck"), resume(original_dir_ / "step_000015", other));
    QCOMPARE(r.status, RunStatus::finished);
    QVERIFY(fs::path(r.checkpoint_dir).parent_path() != original_dir_);
    QVERIFY(digests(original_dir_) == before);
    mok::RunStore store = mok::RunStore::open_readonly(other);
    QVERIFY(has_event(store, r.run_id, "does not hold run " + std::to_string(original_id_)));
    QCOMPARE(store.metric_series(r.run_id, "train/loss").front().step, int64_t(16));
  }

  void overwriteLaterRewritesTheSameRunBitwise() {
    mok::TrainerOptions o;
    o.db_path = db_;
    const mok::TrainResult a = train(tiny("ow"), o);
    QCOMPARE(a.status, RunStatus::finished);
    const fs::path dir = fs::path(a.checkpoint_dir).parent_path();
    const auto before = digests(dir);
    std::vector<double> losses;
    {
      mok::RunStore store = mok::RunStore::open_readonly(db_);
      for (const auto& p : store.metric_series(a.run_id, "val/loss")) losses.push_back(p.value);
    }
    mok::TrainerOptions ow = resume(dir / "step_000010");
    ow.overwrite_later = true;
    const mok::TrainResult r = train(tiny("ow"), ow);
    QCOMPARE(r.status, RunStatus::finished);
    QCOMPARE(r.run_id, a.run_id);  // the same run continues
    const auto after = digests(dir);
    // Steps 15 and 20 were written again: the same weights and moments, bit for bit; the
    // trainer state differs (wall time).
    for (const char* step : {"step_000015", "step_000020"}) {
      for (const char* f : {"model.safetensors", "optimizer.safetensors", "tokenizer.txt", "config.yaml"}) {
        const std::string key = std::string(step) + "/" + f;
        QVERIFY2(after.count(key) && after.at(key) == before.at(key), key.c_str());
      }
    }
    QCOMPARE(after.at("step_000010/trainer_state.json"), before.at("step_000010/trainer_state.json"));
    mok::RunStore store = mok::RunStore::open_readonly(db_);
    QCOMPARE(store.checkpoints(a.run_id).size(), size_t(4));  // no duplicates
    std::vector<double> again;
    for (const auto& p : store.metric_series(a.run_id, "val/loss")) again.push_back(p.value);
    QCOMPARE(again, losses);
    QVERIFY(has_event(store, a.run_id, "--overwrite-later"));
  }

  void longerPlanContinuesTheSameRun() {
    mok::TrainerOptions o;
    o.db_path = db_;
    const mok::TrainResult a = train(tiny("longer"), o);
    const fs::path dir = fs::path(a.checkpoint_dir).parent_path();
    auto c = tiny("longer");
    c.train.steps = 25;
    const mok::TrainResult r = train(c, resume(dir));  // the run folder: its newest checkpoint
    QCOMPARE(r.status, RunStatus::finished);
    QCOMPARE(r.run_id, a.run_id);
    QCOMPARE(r.steps, int64_t(25));
    QCOMPARE(fs::path(r.checkpoint_dir).parent_path(), dir);
    mok::RunStore store = mok::RunStore::open_readonly(db_);
    QVERIFY(has_event(store, a.run_id, "plan changed: train.steps 20 → 25"));
    QCOMPARE(store.metric_series(a.run_id, "train/loss").size(), size_t(25));
  }

  void damagedCheckpointsAreRefused() {
    const fs::path damaged = fs::path(tmp_.path().toStdString()) / "damaged";
    struct Case {
      const char* name;
      std::function<void(const fs::path&)> damage;
      const char* message;
    };
    const Case cases[] = {
        {"negative", [](const fs::path& d) {
           replace_in_file(d / "trainer_state.json", "\"step\":10", "\"step\":-5");
           replace_in_file(d / "trainer_state.json", "\"data.next_step\":10", "\"data.next_step\":-5");
         }, "negative"},
        {"beyond", [](const fs::path& d) {
           replace_in_file(d / "trainer_state.json", "\"step\":10", "\"step\":999999");
           replace_in_file(d / "trainer_state.json", "\"data.next_step\":10", "\"data.next_step\":999999");
         }, "beyond the run's planned 20 steps"},
        {"edited-plan", [](const fs::path& d) {
           replace_in_file(d / "trainer_state.json", "\"step\":10", "\"step\":999999");
           replace_in_file(d / "trainer_state.json", "\"data.next_step\":10", "\"data.next_step\":999999");
           replace_in_file(d / "trainer_state.json", "\"total_steps\":20", "\"total_steps\":9999999");
         }, "saved at step 10"},
        {"no-tokenizer", [](const fs::path& d) { fs::remove(d / "tokenizer.txt"); }, "tokenizer"},
        {"flipped", [](const fs::path& d) {
           std::string bytes = read_all(d / "model.safetensors");
           bytes[bytes.size() - 7] ^= 0x01;
           std::ofstream(d / "model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
         }, "damaged"},
    };
    const int64_t runs = run_count(db_);
    for (const Case& k : cases) {
      const fs::path run = damaged / k.name;
      fs::create_directories(run);
      fs::copy(original_dir_ / "step_000010", run / "step_000010", fs::copy_options::recursive);
      k.damage(run / "step_000010");
      const auto before = digests(run);
      auto c = tiny("ck");
      c.logging.checkpoint_dir = damaged.string();
      const mok::TrainResult r = train(c, resume(run));
      QVERIFY2(r.status == RunStatus::failed, k.name);
      QVERIFY2(r.message.find(k.message) != std::string::npos, qPrintable(QString("%1: %2").arg(k.name, r.message.c_str())));
      QVERIFY2(digests(run) == before, k.name);
      QCOMPARE(run_count(db_), runs);  // nothing recorded
    }
    QVERIFY(!negative_step_folder(tmp_.path().toStdString()));
    // The same checkpoint undamaged resumes (the cases above fail for their damage only).
    auto c = tiny("ck");
    c.train.lr = 1e-3;
    QCOMPARE(train(c, resume(original_dir_ / "step_000010")).status, RunStatus::finished);
  }

  void branchOnRequest() {
    const auto before = digests(original_dir_);
    mok::TrainerOptions o = resume(original_dir_ / "step_000005");
    o.branch = true;
    const mok::TrainResult r = train(tiny("ck"), o);
    QCOMPARE(r.status, RunStatus::finished);
    QVERIFY(r.run_id != original_id_);
    QVERIFY(digests(original_dir_) == before);
    // Unchanged settings: the branch retraces the original bitwise (wall time aside).
    mok::RunStore store = mok::RunStore::open_readonly(db_);
    const auto a = store.metric_series(original_id_, "train/loss");
    const auto b = store.metric_series(r.run_id, "train/loss");
    QCOMPARE(b.size(), size_t(15));
    for (size_t i = 0; i < b.size(); ++i) QVERIFY(std::memcmp(&a[i + 5].value, &b[i].value, sizeof(double)) == 0);
  }
};

QTEST_GUILESS_MAIN(TestResumeBranch)
#include "test_resume_branch.moc"
