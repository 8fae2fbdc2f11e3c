// A run store written by schema 1 (before run environments) or 2 (before run uids): a
// read-only open reads it as it is, without changing a byte, and shows its runs' environments
// as not recorded; a read-write open upgrades it to the current schema in place, keeping every
// row, giving old runs a uid derived from their creation time and id, and new runs then record
// their environment and a random uid.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <sqlite3.h>

#include <fstream>
#include <iterator>

#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "support/file_contents.h"
#include "support/raw_sqlite.h"

using mok::RunStore;

namespace {

void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const QString message = error ? QString(error) : QString();
  sqlite3_free(error);
  sqlite3_close(db);
  QVERIFY2(rc == SQLITE_OK, qPrintable(message));
}

const char* kConfig = "name: old\nmodel: {layers: 2, d_model: 64}\nparallel: {threads: 4}\n";

// A store as schema 1 left it: its tables (migration 1), the marker, user_version 1, and
// one finished run with metrics, an event, a checkpoint and a tag.
void write_schema1_store(const std::string& path) {
  const mok::Migration& first = mok::run_store_migrations().front();
  QCOMPARE(first.version, 1);
  raw_exec(path, first.sql);
  raw_exec(path,
           "INSERT INTO meta(key, value) VALUES ('app', 'mok-run-store'), ('schema_written_by', 'mok 0.1.0');"
           "PRAGMA user_version = 1;");
  raw_exec(path, std::string("INSERT INTO runs(id, name, status, created_at, started_at, finished_at, config_yaml, "
                             "host, device, code_version, notes, model_layers, model_d_model, last_step, best_val_bpb) "
                             "VALUES (1, 'old', 'finished', 1700000000.0, 1700000000.0, 1700000100.0, '") +
                     kConfig + "', 'oldhost', 'cpu', 'v0.1', 'kept notes', 2, 64, 3, 2.25);"
                     "INSERT INTO metric_names(id, name) VALUES (1, 'train/loss');"
                     "INSERT INTO metrics(run_id, name_id, step, tokens, wall_s, value) VALUES "
                     "(1, 1, 1, 100, 0.5, 3.5), (1, 1, 2, 200, 1.0, 3.25), (1, 1, 3, 300, 1.5, 3.125);"
                     "INSERT INTO events(run_id, time, level, text) VALUES (1, 1700000000.0, 'info', 'created');"
                     "INSERT INTO checkpoints(run_id, step, path, created_at) VALUES (1, 3, 'ck/step3', 1700000100.0);"
                     "INSERT INTO tags(run_id, tag) VALUES (1, 'baseline');");
}

void check_old_run(RunStore& store) {
  const mok::RunRecord rec = store.get_run(1);
  QCOMPARE(rec.summary.name, std::string("old"));
  QCOMPARE(rec.summary.status, mok::RunStatus::finished);
  QCOMPARE(rec.config_yaml, std::string(kConfig));
  QCOMPARE(rec.host, std::string("oldhost"));
  QCOMPARE(rec.device, std::string("cpu"));
  QCOMPARE(rec.code_version, std::string("v0.1"));
  QCOMPARE(rec.notes, std::string("kept notes"));
  QCOMPARE(rec.summary.best_val_bpb, 2.25);
  QCOMPARE(rec.summary.tags, std::vector<std::string>{"baseline"});
  QVERIFY(!rec.environment.recorded);  // schema 1 kept none
  const auto loss = store.metric_series(1, "train/loss");
  QCOMPARE(loss.size(), size_t(3));
  QCOMPARE(loss[0].value, 3.5);
  QCOMPARE(loss[2].value, 3.125);
  QCOMPARE(loss[2].tokens, int64_t(300));
  QCOMPARE(store.events(1).front().text, std::string("created"));
  QCOMPARE(store.checkpoints(1).size(), size_t(1));
}

}  // namespace

class TestStoreMigration : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private slots:
  void readOnlyOpenReadsSchema1Unchanged() {
    const std::string path = (dir_.path() + "/v1-readonly.db").toStdString();
    write_schema1_store(path);
    const std::string before = mok::test::read_all(path);
    {
      RunStore store = RunStore::open_readonly(path);
      QCOMPARE(store.schema_version(), 1);
      QCOMPARE(store.list_runs().size(), size_t(1));
      check_old_run(store);
    }
    QCOMPARE(mok::test::raw_count(path, "PRAGMA user_version"), int64_t(1));
    QVERIFY(mok::test::read_all(path) == before);
  }

  void readWriteOpenUpgradesWithoutLoss() {
    QVERIFY(mok::kRunStoreSchemaVersion >= 2);
    const std::string path = (dir_.path() + "/v1-upgrade.db").toStdString();
    write_schema1_store(path);
    const char* tables[] = {"runs", "metric_names", "metrics", "events", "checkpoints", "tags"};
    std::vector<int64_t> counts;
    for (const char* t : tables) counts.push_back(mok::test::raw_count(path, std::string("SELECT count(*) FROM ") + t));
    int64_t fresh = 0;
    {
      RunStore store = RunStore::open(path);
      QCOMPARE(store.schema_version(), mok::kRunStoreSchemaVersion);
      check_old_run(store);
      for (size_t i = 0; i < std::size(tables); ++i)
        QCOMPARE(mok::test::raw_count(path, std::string("SELECT count(*) FROM ") + tables[i]), counts[i]);
      QCOMPARE(store.get_run(1).uid, std::string("legacy-1700000000000000-1"));
      fresh = store.create_run({.name = "new", .config_yaml = kConfig});
      const std::string uid = store.get_run(fresh).uid;
      QCOMPARE(uid.size(), size_t(36));
      QCOMPARE(uid[14], '4');  // a version-4 UUID
      QVERIFY(uid != store.get_run(store.create_run({.name = "another"})).uid);
      const mok::RunEnvironment env = store.get_run(fresh).environment;
      QVERIFY(env.recorded);
      QVERIFY(!env.cpu_model.empty() && !env.blas_library.empty());
      QCOMPARE(env.threads, 4);
    }
    QCOMPARE(mok::test::raw_count(path, "PRAGMA user_version"), int64_t(mok::kRunStoreSchemaVersion));
    QCOMPARE(mok::test::raw_count(path, "SELECT count(*) FROM environments"), int64_t(2));  // "new", "another"
    // Reopened (read-only and read-write), both runs are as they were.
    RunStore again = RunStore::open_readonly(path);
    check_old_run(again);
    QVERIFY(again.get_run(fresh).environment.recorded);
    RunStore rw = RunStore::open(path);
    QCOMPARE(rw.list_runs().size(), size_t(3));
  }

  void schema2StoreGetsUidsKeepingItsEnvironments() {
    QVERIFY(mok::kRunStoreSchemaVersion >= 3);
    const std::string path = (dir_.path() + "/v2-upgrade.db").toStdString();
    write_schema1_store(path);
    raw_exec(path, mok::run_store_migrations()[1].sql + "PRAGMA user_version = 2;"
                   "INSERT INTO environments(run_id, cpu_model, cpu_count, threads, blas_library) "
                   "VALUES (1, 'Old CPU', 8, 4, 'OpenBLAS 0.3.20');");
    {
      RunStore before = RunStore::open_readonly(path);
      QCOMPARE(before.schema_version(), 2);
      QVERIFY(before.get_run(1).uid.empty());  // read as it is: no uid column yet
    }
    RunStore store = RunStore::open(path);
    QCOMPARE(store.schema_version(), mok::kRunStoreSchemaVersion);
    const mok::RunRecord rec = store.get_run(1);
    QCOMPARE(rec.summary.name, std::string("old"));
    QCOMPARE(rec.notes, std::string("kept notes"));
    QCOMPARE(store.metric_series(1, "train/loss").size(), size_t(3));
    QCOMPARE(store.checkpoints(1).size(), size_t(1));
    QVERIFY(rec.environment.recorded);
    QCOMPARE(rec.environment.cpu_model, std::string("Old CPU"));
    QCOMPARE(rec.environment.threads, 4);
    QCOMPARE(rec.uid, std::string("legacy-1700000000000000-1"));
    QVERIFY(rec.imported_from.empty());
    QCOMPARE(mok::test::raw_count(path, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_uid'"), int64_t(1));
  }
};

QTEST_GUILESS_MAIN(TestStoreMigration)
#include "test_store_migration.moc"
