// `mok export CHECKPOINT --hf DIR` and `mok import-hf DIR` as a user runs them: a trained
// tiny BPE model exports with --json (files, architecture, the reference with mok's logits
// and greedy tokens); the import samples the same greedy text as the original and
// fine-tunes with `mok train --resume`; a model Mixtral cannot hold, an existing folder and
// mixed targets exit 2 and write nothing; a forced export that cannot write (a full disk)
// exits 1 and leaves the earlier export whole.
#include <QtTest>

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "support/child_limits.h"
#include "support/cli_process.h"
#include "support/tiny_experiment.h"

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) { return mok::test::run_command(MOK_CLI_PATH, args, cwd); }

}  // namespace

class TestCliHf : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString cfg_, ckpt_;

  Result train(const QString& name, const QStringList& extra) {
    QStringList args = {"train", cfg_, "--db", tmp_.path() + "/runs.db", "--json", "--quiet", "--set", "name=" + name};
    for (const QString& s : extra) args << "--set" << s;
    return run_mok(args, tmp_.path());
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const QString corpus = tmp_.path() + "/corpus";
    const std::string problem = mok::test::copy_brown_sample(corpus.toStdString());
    QVERIFY2(problem.empty(), problem.c_str());
    cfg_ = tmp_.path() + "/tiny.yaml";
    QFile f(cfg_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QString("name: tiny-hf\n"
                    "seed: 7\n"
                    "data:     {corpus: %1, tokenizer: bpe, vocab_size: 300, seq_len: 32, val_fraction: 0.25}\n"
                    "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32}\n"
                    "train:    {steps: 4, batch: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 4, eval_batches: 1}\n"
                    "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
                    "logging:  {checkpoint_dir: %2/ckpt}\n")
                .arg(corpus, tmp_.path())
                .toUtf8());
    f.close();
    const Result t = train("tiny-hf", {});
    QVERIFY2(t.exit_code == 0, qPrintable(t.err));
    ckpt_ = tmp_.path() + "/ckpt/" + QDir(tmp_.path() + "/ckpt").entryList(QDir::Dirs | QDir::NoDotAndDotDot).first();
  }

  void exportWritesAFolderAndAReference() {
    const QString out = tmp_.path() + "/hf";
    const Result r = run_mok({"export", ckpt_, "--hf", out, "--greedy-tokens", "6", "--json"}, tmp_.path());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
    QCOMPARE(r.json.value("architecture").toString(), QString("MixtralForCausalLM"));
    QVERIFY(r.json.value("tokenizer_json").toBool());
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "README.md", "mok_reference.json"}) {
      QVERIFY2(QFile::exists(out + "/" + f), f);
      QVERIFY(r.json.value("files").toArray().contains(QString(f)));
    }
    QFile ref(out + "/mok_reference.json");
    QVERIFY(ref.open(QIODevice::ReadOnly));
    const QJsonObject j = QJsonDocument::fromJson(ref.readAll()).object();
    const QJsonArray seqs = j.value("sequences").toArray();
    QCOMPARE(seqs.size(), 2);
    for (const auto& s : seqs) {
      const QJsonArray tokens = s.toObject().value("tokens").toArray(), logits = s.toObject().value("logits").toArray();
      QVERIFY(tokens.size() > 4 && tokens.size() <= 32);
      QCOMPARE(logits.size(), tokens.size());
      QCOMPARE(logits.first().toArray().size(), 300);  // the BPE vocabulary
    }
    QCOMPARE(j.value("greedy").toObject().value("new_tokens").toArray().size(), 6);
    QFile config(out + "/config.json");
    QVERIFY(config.open(QIODevice::ReadOnly));
    const QJsonObject c = QJsonDocument::fromJson(config.readAll()).object();
    QCOMPARE(c.value("model_type").toString(), QString("mixtral"));
    QCOMPARE(c.value("num_local_experts").toInt(), 4);
    QCOMPARE(c.value("vocab_size").toInt(), 300);
    QCOMPARE(c.value("max_position_embeddings").toInt(), 32);

    // Again into the same folder: refused without --force.
    const Result again = run_mok({"export", ckpt_, "--hf", out}, tmp_.path());
    QCOMPARE(again.exit_code, 2);
    QVERIFY(again.err.contains("--force"));
  }

  // --force into a folder an export already holds, the disk full while the new weights are
  // written (RLIMIT_FSIZE below their size): exit 1, and every file of the earlier export is
  // as it was, no temporary left beside it. Then a forced export that can write replaces them.
  void forcedExportThatCannotWriteKeepsTheEarlierOne() {
    const QString out = tmp_.path() + "/hf-full-disk";
    QCOMPARE(run_mok({"export", ckpt_, "--hf", out, "--dtype", "bfloat16"}, tmp_.path()).exit_code, 0);
    const QStringList files = QDir(out).entryList(QDir::Files | QDir::Hidden, QDir::Name);
    QVERIFY(files.contains("model.safetensors") && files.contains("config.json"));
    auto contents = [&] {
      QMap<QString, QByteArray> all;
      for (const QString& f : QDir(out).entryList(QDir::Files | QDir::Hidden, QDir::Name)) {
        QFile file(out + "/" + f);
        if (file.open(QIODevice::ReadOnly)) all[f] = file.readAll();
      }
      return all;
    };
    const QMap<QString, QByteArray> before = contents();
    const qint64 bf16_bytes = before["model.safetensors"].size();

    QProcess p;
    mok::test::ChildLimits limits;
    limits.max_file_bytes = static_cast<rlim_t>(bf16_bytes);  // the float32 weights are about twice as large
    mok::test::apply_child_limits(p, limits);
    p.start(MOK_CLI_PATH, {"export", ckpt_, "--hf", out, "--force"});
    QVERIFY(p.waitForFinished(120000));
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 1, qPrintable(err));
    QVERIFY2(err.contains("left as they were"), qPrintable(err));
    QCOMPARE(contents(), before);  // the same files, byte for byte: no temporary left either

    const Result replaced = run_mok({"export", ckpt_, "--hf", out, "--force"}, tmp_.path());
    QVERIFY2(replaced.exit_code == 0, qPrintable(replaced.err));
    const QMap<QString, QByteArray> after = contents();
    QCOMPARE(after.keys(), before.keys());
    QVERIFY(after["model.safetensors"].size() > bf16_bytes);
  }

  void importSamplesTheSameAndFineTunes() {
    const QString out = tmp_.path() + "/hf-import-src", run = tmp_.path() + "/imported";
    QCOMPARE(run_mok({"export", ckpt_, "--hf", out}, tmp_.path()).exit_code, 0);
    const Result imp = run_mok({"import-hf", out, "--out", run, "--json"}, tmp_.path());
    QVERIFY2(imp.exit_code == 0, qPrintable(imp.err + imp.out));
    QCOMPARE(imp.json.value("checkpoint").toString(), run + "/step_000000");
    QCOMPARE(imp.json.value("tokenizer").toString(), QString("bpe"));
    const QStringList greedy = {"--prompt", "The jury", "--tokens", "12", "--temperature", "0", "--json"};
    const Result a = run_mok(QStringList{"generate", ckpt_} + greedy, tmp_.path());
    const Result b = run_mok(QStringList{"generate", run} + greedy, tmp_.path());
    QVERIFY2(a.exit_code == 0 && b.exit_code == 0, qPrintable(a.err + b.err));
    QCOMPARE(b.json.value("text").toString(), a.json.value("text").toString());
    // Fine-tuning: resume the imported checkpoint for two steps.
    const Result ft = run_mok({"train", "--resume", run, "--set", "train.steps=2", "--db", tmp_.path() + "/ft.db",
                               "--json", "--quiet"},
                              tmp_.path());
    QVERIFY2(ft.exit_code == 0, qPrintable(ft.err + ft.out));
    QCOMPARE(ft.json.value("steps").toInt(), 2);
    // An existing checkpoint is not replaced without --force.
    QCOMPARE(run_mok({"import-hf", out, "--out", run}, tmp_.path()).exit_code, 2);
  }

  void unrepresentableModelIsRefused() {
    const Result t = train("tiny-shared", {"model.shared_expert=true", "train.steps=1"});
    QVERIFY2(t.exit_code == 0, qPrintable(t.err));
    const QString ckpt = tmp_.path() + "/ckpt/" +
                         QDir(tmp_.path() + "/ckpt").entryList({"tiny-shared*"}, QDir::Dirs).first();
    const QString out = tmp_.path() + "/hf-shared";
    const Result r = run_mok({"export", ckpt, "--hf", out, "--json"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("shared expert"), qPrintable(r.err));
    QVERIFY(!QFile::exists(out));
  }

  void usageErrors() {
    QCOMPARE(run_mok({"export", ckpt_, "--hf", tmp_.path() + "/x", "--slurm"}, tmp_.path()).exit_code, 2);
    QCOMPARE(run_mok({"export", ckpt_, "--hf", tmp_.path() + "/x", "--dtype", "fp8"}, tmp_.path()).exit_code, 2);
    QCOMPARE(run_mok({"import-hf"}, tmp_.path()).exit_code, 2);
    const Result missing = run_mok({"import-hf", tmp_.path() + "/nowhere"}, tmp_.path());
    QCOMPARE(missing.exit_code, 2);
    QVERIFY(!QFile::exists(tmp_.path() + "/x"));
  }
};

QTEST_GUILESS_MAIN(TestCliHf)
#include "test_cli_hf.moc"
