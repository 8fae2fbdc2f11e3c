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

#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"

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

  void folderIsRefused() {
    const std::string p = path("a_folder.db");
    fs::create_directories(p);
    expect_refused(p, "is a folder");
  }
};

QTEST_GUILESS_MAIN(TestStoreSafety)
#include "test_store_safety.moc"
