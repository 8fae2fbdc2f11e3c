// A model far beyond any machine (valid by every config rule) failed with only
// "std::bad_alloc", after the run was recorded. It is refused before anything is written,
// with the sizes that make it large and the bytes it would need; so is a run whose memory
// plan is far beyond the machine.
#include <QtTest>

#include <QTemporaryDir>

#include <filesystem>

#include "support/cli_process.h"

class TestCliModelTooLarge : public QObject {
  Q_OBJECT
 private slots:
  void absurdModelIsRefusedWithItsSizes() {
    QTemporaryDir tmp;
    const QString db = tmp.path() + "/runs.db";
    // 1024 layers × 65536 experts of 3 × 65536 × 1048576 weights: ~1.4e19 parameters.
    const auto r = mok::test::run_command(
        MOK_CLI_PATH,
        {"train", "experiments/quickstart.yaml", "--db", db, "--set", "model.layers=1024", "--set",
         "model.d_model=65536", "--set", "model.heads=1024", "--set", "model.experts=65536", "--set",
         "model.expert_hidden=1048576", "--set", "logging.checkpoint_dir=" + tmp.path() + "/ckpt", "--quiet"},
        MOK_SOURCE_DIR);
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("too large for this machine"), qPrintable(r.err));
    QVERIFY2(r.err.contains("model.d_model 65536") && r.err.contains("model.expert_hidden 1048576"), qPrintable(r.err));
    QVERIFY2(r.err.contains("EiB"), qPrintable(r.err));
    QVERIFY(!r.err.contains("bad_alloc"));
    QVERIFY(!std::filesystem::exists(db.toStdString()));
  }

  // A small model whose batch needs ~10^15 bytes of saved activations (beyond twice any
  // machine's memory): refused before anything is written, with the part of the memory plan
  // that is too large and what shrinks it (core/plan/memory_fit.h).
  void activationsBeyondTheMachineAreRefusedWithWhatToChange() {
    QTemporaryDir tmp;
    const QString db = tmp.path() + "/runs.db";
    const auto r = mok::test::run_command(
        MOK_CLI_PATH,
        {"train", "experiments/quickstart.yaml", "--db", db, "--set", "train.batch=1048576", "--set",
         "data.seq_len=65536", "--set", "logging.checkpoint_dir=" + tmp.path() + "/ckpt", "--quiet"},
        MOK_SOURCE_DIR);
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("the memory plan of this run needs"), qPrintable(r.err));
    QVERIFY2(r.err.contains("the largest part is saved_activations"), qPrintable(r.err));
    QVERIFY2(r.err.contains("lower train.batch"), qPrintable(r.err));
    QVERIFY(!std::filesystem::exists(db.toStdString()));
    QVERIFY(!std::filesystem::exists((tmp.path() + "/ckpt").toStdString()));
  }
};

QTEST_GUILESS_MAIN(TestCliModelTooLarge)
#include "test_cli_model_too_large.moc"
