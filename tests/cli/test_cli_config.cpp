// `mok config validate|print|schema` run as a process: exit codes, located errors on
// stderr, the --json last line, and print output that reads back to the same config.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include "core/config/config_io.h"

namespace {

struct Result {
  int code = -1;
  QString out;
  QString err;
};

Result run_mok(const QStringList& args) {
  QProcess p;
  p.setWorkingDirectory(MOK_SOURCE_DIR);
  p.start(MOK_CLI_PATH, args);
  if (!p.waitForFinished(60000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

void write_file(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text);
}

QJsonObject last_line_json(const QString& out) {
  const QStringList lines = out.trimmed().split('\n');
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(lines.last().toUtf8(), &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) return {};
  return doc.object();
}

}  // namespace

class TestCliConfig : public QObject {
  Q_OBJECT
 private slots:
  void validateOk() {
    const Result r = run_mok({"config", "validate", "experiments/quickstart.yaml"});
    QCOMPARE(r.code, 0);
    QCOMPARE(r.out, QString("experiments/quickstart.yaml: ok\n"));
    QCOMPARE(r.err, QString());
  }

  void validateBadConfigNamesTheLocation() {
    QTemporaryDir dir;
    const QString bad = dir.filePath("bad.yaml");
    write_file(bad, "name: bad\nmodel:\n  top_k: 9\n");
    const Result r = run_mok({"config", "validate", bad});
    QCOMPARE(r.code, 2);
    QCOMPARE(r.out, QString());
    QCOMPARE(r.err, bad + ":3:3: model.top_k: model.top_k (9) exceeds model.experts (8)\n");
    // Nothing written beside the config.
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::NoDotAndDotDot), QStringList{"bad.yaml"});
  }

  void validateJsonLastLine() {
    QTemporaryDir dir;
    const QString bad = dir.filePath("bad.yaml");
    write_file(bad, "name: bad\ntrain:\n  stesp: 10\n");
    const Result r = run_mok({"config", "validate", bad, "--json"});
    QCOMPARE(r.code, 2);
    const QJsonObject j = last_line_json(r.out);
    QCOMPARE(j.value("ok").toBool(true), false);
    QCOMPARE(j.value("file").toString(), bad);
    QCOMPARE(j.value("line").toInt(), 3);
    QCOMPARE(j.value("column").toInt(), 3);
    QCOMPARE(j.value("key").toString(), QString("train.stesp"));
    QCOMPARE(j.value("error").toString(),
             bad + ":3:3: train.stesp: unknown key; did you mean 'train.steps'?");

    const Result ok = run_mok({"config", "validate", "experiments/quickstart.yaml", "--json"});
    QCOMPARE(ok.code, 0);
    const QJsonObject jo = last_line_json(ok.out);
    QCOMPARE(jo.value("ok").toBool(false), true);
    QVERIFY(jo.value("error").isNull());
  }

  void badOverrideIsLocated() {
    const Result r = run_mok({"config", "validate", "experiments/quickstart.yaml", "--set", "train.steps=20",
                              "--set", "train.lr=fast"});
    QCOMPARE(r.code, 2);
    QCOMPARE(r.err, QString("--set:2:10: train.lr: expected a number, got 'fast'\n"));
  }

  void printRoundTrips() {
    QTemporaryDir dir;
    const Result r = run_mok({"config", "print", "experiments/quickstart.yaml", "--set", "train.steps=7", "--set",
                              "kittens.layers.1.rank=8", "--set", "kittens.kinds.moe.expert.bits=4"});
    QCOMPARE(r.code, 0);
    const QString printed = dir.filePath("printed.yaml");
    write_file(printed, r.out.toUtf8());
    const Result again = run_mok({"config", "print", printed});
    QCOMPARE(again.code, 0);
    QCOMPARE(again.out, r.out);

    mok::ExperimentConfig expected =
        mok::load_experiment_config(MOK_SOURCE_DIR "/experiments/quickstart.yaml", {"train.steps=7"});
    expected.kittens.layers[1].rank = 8;
    expected.kittens.kinds["moe.expert"].bits = 4;
    QVERIFY(r.out.contains("  kinds:\n    moe.expert: {bits: 4}\n"));
    QVERIFY(mok::load_experiment_config(printed.toStdString()) == expected);
  }

  void printRefusesABadConfig() {
    const Result r = run_mok({"config", "print", "experiments/quickstart.yaml", "--set", "model.heads=3"});
    QCOMPARE(r.code, 2);
    QCOMPARE(r.out, QString());
    QVERIFY(r.err.startsWith("--set:1:13: model.heads: "));
  }

  void schemaMatchesTheLibrary() {
    const Result md = run_mok({"config", "schema", "--markdown"});
    QCOMPARE(md.code, 0);
    QCOMPARE(md.out, QString::fromStdString(mok::config_schema_markdown()));
    const Result text = run_mok({"config", "schema"});
    QCOMPARE(text.code, 0);
    QCOMPARE(text.out, QString::fromStdString(mok::config_schema_text()));
    QCOMPARE(run_mok({"config", "--schema"}).out, text.out);
    QVERIFY(text.out.contains("kittens.layers.<L>.rank"));
    QVERIFY(text.out.contains("kittens.kinds.<K>.bits"));
  }

  void usage() {
    const Result help = run_mok({"config", "--help"});
    QCOMPARE(help.code, 0);
    QVERIFY(help.out.contains("mok config validate FILE"));
    QCOMPARE(run_mok({"config"}).code, 2);
    QCOMPARE(run_mok({"config", "frobnicate"}).code, 2);
    QCOMPARE(run_mok({"config", "validate"}).code, 2);
    QCOMPARE(run_mok({"config", "validate", "experiments/quickstart.yaml", "--bogus"}).code, 2);
    const Result missing = run_mok({"config", "validate", "no/such/file.yaml"});
    QCOMPARE(missing.code, 2);
    QVERIFY(missing.err.startsWith("no/such/file.yaml: cannot read file"));
  }
};

QTEST_GUILESS_MAIN(TestCliConfig)
#include "test_cli_config.moc"
