// RunStore refuses what it must not touch: a file that is not a database, someone else's
// SQLite database, a newer schema. Each case gives a clear message naming the file and
// leaves the file byte-for-byte and mtime-for-mtime as it was. Read-only opens never create.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/store/checked_store_reader.h"
#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "support/raw_sqlite.h"

using mok::RunStore;
namespace fs = std::filesystem;

namespace {

struct FileSnapshot {
  std::string bytes;
  fs::file_time_type mtime;
  bool operator==(const FileSnapshot&) const = default;
};

FileSnapshot snapshot(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return {s.str(), fs::last_write_time(path)};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

void raw_exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  QCOMPARE(sqlite3_close(db), SQLITE_OK);
}

// Both opens must throw a StoreError whose message contains `needle` and the path.
void expect_refused(const std::string& path, const QString& needle) {
  for (bool readonly : {false, true}) {
    try {
      RunStore s = readonly ? RunStore::open_readonly(path) : RunStore::open(path);
      QFAIL(qPrintable(QString("opened %1 (readonly=%2)").arg(QString::fromStdString(path)).arg(readonly)));
    } catch (const mok::StoreError& e) {
      const QString msg = QString::fromUtf8(e.what());
      QVERIFY2(msg.contains(needle), qPrintable(msg));
      QVERIFY2(msg.contains(QString::fromStdString(path)), qPrintable(msg));
    }
  }
}

}  // namespace

class TestStoreSafety : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

 private slots:
  void textFileIsRefusedAndUntouched() {
    const std::string p = path("notes.db");
    write_file(p, "these are my notes, not a database\n");
    const FileSnapshot before = snapshot(p);
    expect_refused(p, "is not a MoK run store (not an SQLite database)");
    QVERIFY(snapshot(p) == before);
    QVERIFY(!fs::exists(p + "-wal"));
    QVERIFY(!fs::exists(p + "-journal"));
  }

  void shortAndFakeHeaderFilesAreRefused() {
    const std::string tiny = path("tiny.db");
    write_file(tiny, "SQLite");
    const FileSnapshot tiny_before = snapshot(tiny);
    expect_refused(tiny, "not an SQLite database");
    QVERIFY(snapshot(tiny) == tiny_before);

    // The right magic followed by garbage: SQLite itself must reject it, and nothing changes.
    std::string fake("SQLite format 3", 16);
    for (int i = 0; i < 4000; ++i) fake += static_cast<char>((i * 37 + 11) & 0xff);
    const std::string p = path("fake.db");
    write_file(p, fake);
    const FileSnapshot before = snapshot(p);
    for (bool readonly : {false, true}) {
      QVERIFY_THROWS_EXCEPTION(mok::StoreError, readonly ? RunStore::open_readonly(p) : RunStore::open(p));
    }
    QVERIFY(snapshot(p) == before);
  }

  void foreignDatabaseIsRefusedAndUntouched() {
    const std::string p = path("inventory.db");
    raw_exec(p, "CREATE TABLE items(id INTEGER PRIMARY KEY, label TEXT); INSERT INTO items(label) VALUES ('cat food');");
    const FileSnapshot before = snapshot(p);
    expect_refused(p, "not a MoK run store");
    expect_refused(p, "items");
    QVERIFY(snapshot(p) == before);
  }

  void newerSchemaIsRefusedAndUntouched() {
    const std::string p = path("future.db");
    {
      RunStore s = RunStore::open(p);
      s.create_run({.name = "from the future"});
    }
    const int newer = mok::kRunStoreSchemaVersion + 1;
    raw_exec(p, ("PRAGMA user_version = " + std::to_string(newer)).c_str());
    const FileSnapshot before = snapshot(p);
    expect_refused(p, QString("was written by a newer MoK (schema %1, this build reads up to %2)")
                          .arg(newer)
                          .arg(mok::kRunStoreSchemaVersion));
    QVERIFY(snapshot(p) == before);
  }

  void emptyFileBecomesAStore() {
    const std::string p = path("empty.db");
    write_file(p, "");
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, RunStore::open_readonly(p));
    QCOMPARE(fs::file_size(p), uintmax_t(0));
    RunStore s = RunStore::open(p);  // an empty file is ours to fill
    QVERIFY(s.create_run({.name = "x"}) > 0);
  }

  void readonlyOpenNeverCreates() {
    const std::string p = path("missing/sub/runs.db");
    try {
      RunStore s = RunStore::open_readonly(p);
      QFAIL("opened a missing store");
    } catch (const mok::StoreError& e) {
      QVERIFY(QString(e.what()).contains("does not exist"));
    }
    QVERIFY(!fs::exists(path("missing")));
  }

  // A store whose schema lost a column (a damaged schema page, or an edit by hand) is refused
  // by every open before anything is written. A read-write open used to upgrade such a
  // schema-1 store to the current schema first and fail only at its next query, leaving the
  // file changed (found by fuzzing: tests/fuzz/corpus/run_store/regress_schema1_*).
  void storeWithAColumnMissingIsRefusedBeforeAnyWrite() {
    const std::string p = path("no_last_step.db");
    std::string schema1 = mok::run_store_migrations().front().sql;
    const std::string column = "  last_step      INTEGER,\n";
    const size_t at = schema1.find(column);
    QVERIFY(at != std::string::npos);
    schema1.erase(at, column.size());
    raw_exec(p, schema1.c_str());
    raw_exec(p,
             "INSERT INTO meta(key, value) VALUES ('app', 'mok-run-store'); PRAGMA user_version = 1;"
             "INSERT INTO runs(name, status, created_at) VALUES ('old', 'finished', 1700000000);");
    const FileSnapshot before = snapshot(p);
    expect_refused(p, "is damaged (its table runs has no column last_step, which schema 1 has); it was left unchanged");
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, RunStore::open_snapshot(p));
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, mok::check_run_store_readable(p));
    QVERIFY(snapshot(p) == before);
    QVERIFY(!fs::exists(p + "-wal"));
    QVERIFY(!fs::exists(p + "-journal"));
    QCOMPARE(mok::test::raw_count(p, "PRAGMA user_version"), int64_t(1));  // not upgraded
  }

  // A view in the place of a table: a `runs` view joined with an endless recursive count
  // made every read of the runs (`mok runs list`, an import, the workbench's pages) run until
  // memory ran out. A trigger would run its own SQL inside a trainer's writes. Every open
  // refuses such a file at once, unchanged; a view of another name is someone's addition
  // and left alone.
  void storeWithAViewForATableOrATriggerIsRefused() {
    const std::string view = path("view.db");
    {
      RunStore s = RunStore::open(view);
      s.create_run({.name = "kept"});
    }
    raw_exec(view,
             "PRAGMA legacy_alter_table=ON; ALTER TABLE runs RENAME TO runs_kept;"
             "CREATE VIEW runs AS SELECT r.* FROM runs_kept r,"
             " (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n);");
    const std::string trigger = path("trigger.db");
    {
      RunStore s = RunStore::open(trigger);
      s.create_run({.name = "kept"});
    }
    raw_exec(trigger, "CREATE TRIGGER wipe AFTER UPDATE ON runs BEGIN DELETE FROM metrics; END;");
    for (const auto& [p, says] : {std::pair{view, "is damaged (runs is a view, not a table); it was left unchanged"},
                                  std::pair{trigger, "is damaged (it holds a trigger 'wipe', which a run store never has)"}}) {
      const FileSnapshot before = snapshot(p);
      expect_refused(p, says);
      QVERIFY_THROWS_EXCEPTION(mok::StoreError, RunStore::open_snapshot(p));
      QVERIFY_THROWS_EXCEPTION(mok::StoreError, mok::check_run_store_readable(p));
      QVERIFY(snapshot(p) == before);
    }
    const std::string added = path("added_view.db");
    {
      RunStore s = RunStore::open(added);
      s.create_run({.name = "kept"});
    }
    raw_exec(added, "CREATE VIEW finished_runs AS SELECT id, name FROM runs WHERE status = 'finished';");
    RunStore s = RunStore::open(added);
    QCOMPARE(s.list_runs().size(), size_t(1));
  }

  void folderIsRefused() {
    const std::string p = path("a_folder.db");
    fs::create_directories(p);
    expect_refused(p, "is a folder");
  }
};

QTEST_GUILESS_MAIN(TestStoreSafety)
#include "test_store_safety.moc"
