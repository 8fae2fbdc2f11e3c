// A run's checkpoint folder is named after the run; whatever name a front end passes (the
// config check refuses names over kMaxRunNameBytes, but the Trainer takes any config), the
// folder name stays a valid file name, so a run never trains and then fails to save.
#include <QtTest>

#include <filesystem>
#include <string>

#include "core/config/config_check.h"
#include "core/train/run_folder.h"
#include "core/train/trainer.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;

class TestRunFolderName : public QObject {
  Q_OBJECT
 private slots:
  void longNamesGiveShortFolderNames() {
    const std::string name(300, 'n');
    QCOMPARE(mok::safe_run_name(name), std::string(mok::kMaxRunNameBytes, 'n'));
    QCOMPARE(mok::safe_run_name("a/b c"), std::string("a_b_c"));
    QTemporaryDir tmp;
    const fs::path dir = mok::new_run_folder(tmp.path().toStdString(), name, 123456789);
    QVERIFY(dir.filename().string().size() < 255);
    QVERIFY(fs::create_directories(dir));
  }

  // A 300-character name trained to the end and then failed at the final checkpoint ("File
  // name too long") with nothing saved.
  void runWithALongNameSavesItsFinalCheckpoint() {
    QTemporaryDir tmp;
    const std::string corpus = (tmp.path() + "/corpus").toStdString();
    const std::string missing = mok::test::copy_brown_sample(fs::path(corpus), {"ca01"});
    QVERIFY2(missing.empty(), missing.c_str());
    mok::ExperimentConfig c = mok::test::tiny_experiment(corpus, 4);
    c.name = std::string(300, 'n');
    c.train.steps = 2;
    c.train.batch = 2;
    c.train.eval_batches = 1;
    c.logging.checkpoint_dir = (tmp.path() + "/ckpt").toStdString();
    mok::TrainerOptions o;
    o.db_path = (tmp.path() + "/runs.db").toStdString();
    mok::Trainer trainer(c, o);
    const mok::TrainResult r = trainer.run({});
    QVERIFY2(r.status == mok::RunStatus::finished, r.message.c_str());
    QCOMPARE(r.steps, int64_t(2));
    QVERIFY(!r.checkpoint_dir.empty());
    QVERIFY(fs::exists(fs::path(r.checkpoint_dir) / "model.safetensors"));
  }
};

QTEST_GUILESS_MAIN(TestRunFolderName)
#include "test_run_folder_name.moc"
