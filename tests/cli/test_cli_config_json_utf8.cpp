// `mok config validate --json` on bytes that are not UTF-8: the JSON line stays valid UTF-8
// (a strict parser reads it) and says where the bad bytes are.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <cstdio>

#include "support/cli_process.h"

namespace {

// The last stdout line parsed strictly (Qt refuses JSON text that is not valid UTF-8).
QJsonObject strict_last_line(const QString& out, QJsonParseError* error) {
  const QStringList lines = out.trimmed().split('\n');
  return QJsonDocument::fromJson(lines.last().toUtf8(), error).object();
}

QByteArray raw_stdout_last_line(const QString& program, const QStringList& args) {
  QProcess p;
  p.start(program, args);
  p.waitForFinished(60000);
  const QList<QByteArray> lines = p.readAllStandardOutput().trimmed().split('\n');
  return lines.last();
}

}  // namespace

class TestCliConfigJsonUtf8 : public QObject {
  Q_OBJECT
 private slots:
  void latin1KeyGivesValidJsonWithThePlace() {
    QTemporaryDir dir;
    const QString path = dir.filePath("latin1.yaml");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("name: x\nmodel:\n  d_mod\xe9l: 5\n");  // é in Latin-1
    f.close();
    // Bytes as printed, before any decoding: a raw 0xE9 would be invalid UTF-8 here.
    const QByteArray raw = raw_stdout_last_line(MOK_CLI_PATH, {"config", "validate", path, "--json"});
    QCOMPARE(raw.indexOf('\xe9'), -1);
    QJsonParseError error;
    const QJsonObject j = strict_last_line(QString::fromUtf8(raw), &error);
    QCOMPARE(error.error, QJsonParseError::NoError);
    QCOMPARE(j["ok"].toBool(true), false);
    QCOMPARE(j["line"].toInt(), 3);
    QCOMPARE(j["column"].toInt(), 8);
    QVERIFY2(j["error"].toString().contains("0xE9"), qPrintable(j["error"].toString()));
  }

  void nonUtf8FileNameGivesValidJson() {
    QTemporaryDir dir;
    const QByteArray name = QFile::encodeName(dir.path()) + "/caf\xe9.yaml";  // not UTF-8 as a name
    // QTemporaryDir removes its files through names decoded as UTF-8, which cannot reach this
    // one: removed here by its bytes, on every way out of the test, so the folder goes too.
    struct RemoveByBytes {
      const QByteArray& name;
      ~RemoveByBytes() { std::remove(name.constData()); }
    } remove_file{name};
    FILE* f = std::fopen(name.constData(), "w");
    QVERIFY(f);
    std::fputs("name: x\nmodel:\n  top_k: 99\n", f);
    std::fclose(f);
    // Qt passes arguments as UTF-8; the shell's printf makes the raw byte.
    QProcess p;
    p.start("/bin/sh", {"-c", "exec \"$0\" config validate \"$(printf '%s/caf\\351.yaml' \"$1\")\" --json",
                        MOK_CLI_PATH, dir.path()});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    const QByteArray raw = p.readAllStandardOutput().trimmed().split('\n').last();
    QCOMPARE(raw.indexOf('\xe9'), -1);
    QJsonParseError error;
    const QJsonObject j = strict_last_line(QString::fromUtf8(raw), &error);
    QCOMPARE(error.error, QJsonParseError::NoError);
    QCOMPARE(j["key"].toString(), QString("model.top_k"));
    QVERIFY(j["file"].toString().endsWith(QString::fromUtf8("caf\xef\xbf\xbd.yaml")));  // U+FFFD for the byte
  }
};

QTEST_GUILESS_MAIN(TestCliConfigJsonUtf8)
#include "test_cli_config_json_utf8.moc"
