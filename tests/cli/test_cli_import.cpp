// `mok runs import OTHER.db [--run ID]... [--db PATH] [--json]` as a user runs it: runs of a
// cluster's store arrive with their rows and where they came from, a second import copies
// nothing, --run picks runs, and a store that is not ours or is damaged is refused (exit 1)
// naming the file, with neither file changed and no local store created. Bad usage exits 2.
#include <QtTest>

#include <QJsonArray>
#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "core/store/run_store.h"
#include "support/cli_process.h"
#include "support/import_fixture.h"

using mok::RunStore;
using mok::test::CliResult;
using mok::test::sha256_of;
namespace fs = std::filesystem;

class TestCliImport : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString cluster_;
  int64_t alpha_ = 0, beta_ = 0;

  QString path(const QString& name) const { return dir_.filePath(name); }
  CliResult mok(const QStringList& args) { return mok::test::run_command(MOK_CLI_PATH, args, dir_.path()); }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    cluster_ = path("cluster.db");
    RunStore store = RunStore::open(cluster_.toStdString());
    alpha_ = mok::test::add_finished_run(store, "alpha", 10);
    beta_ = mok::test::add_finished_run(store, "beta", 10);
  }

  void importsOnceWithRowsAndOrigin() {
    const QString home = path("home/mok.db");
    const QByteArray source_bytes = sha256_of(cluster_.toStdString());
    CliResult r = mok({"runs", "import", cluster_, "--db", home, "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.json["imported_count"].toInt(), 2);
    QCOMPARE(r.json["skipped_count"].toInt(), 0);
    const QJsonArray imported = r.json["imported"].toArray();
    QCOMPARE(imported.size(), 2);
    QCOMPARE(imported[0].toObject()["name"].toString(), QString("alpha"));
    QCOMPARE(imported[0].toObject()["source_id"].toInteger(), alpha_);
    QCOMPARE(imported[0].toObject()["metric_values"].toInt(), 10 * 2 + 1 + 2);
    QCOMPARE(imported[0].toObject()["checkpoints"].toInt(), 2);
    const qint64 beta_here = imported[1].toObject()["id"].toInteger();
    for (const auto& [table, query] : mok::test::run_row_queries()) {
      QVERIFY2(mok::test::run_rows(home.toStdString(), query, beta_here) ==
                   mok::test::run_rows(cluster_.toStdString(), query, beta_),
               table);
    }
    QCOMPARE(sha256_of(cluster_.toStdString()), source_bytes);

    CliResult show = mok({"runs", "show", QString::number(beta_here), "--db", home, "--json"});
    QVERIFY2(show.exit_code == 0, qPrintable(show.err));
    QCOMPARE(show.json["imported_from"].toString(), QString::fromStdString(fs::absolute(cluster_.toStdString()).string()));
    QCOMPARE(show.json["imported_run_id"].toInteger(), beta_);
    QCOMPARE(show.json["name"].toString(), QString("beta"));
    CliResult text = mok({"runs", "show", QString::number(beta_here), "--db", home});
    const QString origin = QString::fromStdString("imported  from " + fs::absolute(cluster_.toStdString()).string() +
                                                  " (run " + std::to_string(beta_) + " there)");
    QVERIFY2(text.out.contains(origin), qPrintable(text.out));

    // Again: nothing new, in words and in JSON.
    r = mok({"runs", "import", cluster_, "--db", home});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("imported 0 runs") && r.out.contains("skipped 2 runs already here"), qPrintable(r.out));
    r = mok({"runs", "import", cluster_, "--db", home, "--json"});
    QCOMPARE(r.json["imported_count"].toInt(), 0);
    QCOMPARE(r.json["skipped"].toArray()[1].toObject()["id"].toInteger(), beta_here);
    CliResult list = mok({"runs", "list", "--db", home, "--json"});
    QCOMPARE(list.json["runs"].toArray().size(), 2);
  }

  void runOptionPicksRuns() {
    const QString home = path("picked.db");
    CliResult r = mok({"runs", "import", cluster_, "--run", QString::number(beta_), "--db", home, "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.json["imported_count"].toInt(), 1);
    QCOMPARE(r.json["imported"].toArray()[0].toObject()["name"].toString(), QString("beta"));
    r = mok({"runs", "import", cluster_, "--run", QString::number(alpha_), "--run", QString::number(beta_), "--db",
             home, "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.json["imported_count"].toInt(), 1);
    QCOMPARE(r.json["skipped_count"].toInt(), 1);

    const QByteArray before = sha256_of(home.toStdString());
    r = mok({"runs", "import", cluster_, "--run", "77", "--db", home});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("run 77 does not exist in " + cluster_), qPrintable(r.err));
    QCOMPARE(sha256_of(home.toStdString()), before);
  }

  void badSourcesAreRefusedAndNothingIsCreated() {
    const QString notes = path("notes.db");
    std::ofstream(notes.toStdString()) << "not a database\n";
    const QString foreign = path("foreign.db");
    {
      sqlite3* db = nullptr;
      QCOMPARE(sqlite3_open(foreign.toUtf8().constData(), &db), SQLITE_OK);
      QCOMPARE(sqlite3_exec(db, "CREATE TABLE items(id INTEGER PRIMARY KEY)", nullptr, nullptr, nullptr), SQLITE_OK);
      sqlite3_close(db);
    }
    const QString truncated = path("truncated.db");
    {
      std::ifstream in(cluster_.toStdString(), std::ios::binary);
      std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ofstream(truncated.toStdString(), std::ios::binary) << whole.substr(0, whole.size() / 2);
    }
    const QString home = path("never/mok.db");
    for (const auto& [file, says] : {std::pair{notes, "not an SQLite database"}, std::pair{foreign, "not a MoK run store"},
                                     std::pair{truncated, "is damaged"}}) {
      const QByteArray before = sha256_of(file.toStdString());
      const CliResult r = mok({"runs", "import", file, "--db", home, "--json"});
      QCOMPARE(r.exit_code, 1);
      QVERIFY2(r.err.contains(file) && r.err.contains(says), qPrintable(r.err));
      QCOMPARE(sha256_of(file.toStdString()), before);
      QVERIFY(!fs::exists((file + "-wal").toStdString()) && !fs::exists((file + "-shm").toStdString()));
      QVERIFY(!fs::exists(home.toStdString()));
    }
  }

  void badUsageExitsTwo() {
    for (const QStringList& args : {QStringList{"runs", "import"}, QStringList{"runs", "import", cluster_, "--run", "x"},
                                    QStringList{"runs", "import", cluster_, "extra"},
                                    QStringList{"runs", "import", cluster_, "--run"}}) {
      const CliResult r = mok(args);
      QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + ": " + r.err));
    }
    const CliResult help = mok({"runs", "--help"});
    QVERIFY(help.out.contains("import OTHER.db [--run ID]..."));
  }
};

QTEST_GUILESS_MAIN(TestCliImport)
#include "test_cli_import.moc"
