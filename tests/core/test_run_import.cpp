// Importing runs from another store (core/store/run_import.h): every row of a run arrives as it
// was, under a new local id; a second import copies nothing; a chosen run comes alone; the
// source is never written (its bytes hash the same, nothing appears beside it); a foreign,
// non-SQLite, newer, truncated or damaged source is refused naming the file; and an import
// that fails part way leaves the destination exactly as it was.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/store/run_import.h"
#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "support/file_contents.h"
#include "support/import_fixture.h"
#include "support/raw_sqlite.h"

using mok::RunImportResult;
using mok::RunStore;
using mok::test::raw_count;
using mok::test::run_row_queries;
using mok::test::run_rows;
using mok::test::sha256_of;
namespace fs = std::filesystem;

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

// Row counts of every table, to show a refused or failed import changed nothing.
std::vector<int64_t> table_counts(const std::string& path) {
  std::vector<int64_t> out;
  for (const char* t : {"runs", "metric_names", "metrics", "events", "checkpoints", "tags", "environments"})
    out.push_back(raw_count(path, std::string("SELECT count(*) FROM ") + t));
  return out;
}

bool has_side_files(const std::string& path) { return fs::exists(path + "-wal") || fs::exists(path + "-shm"); }

// The message of the StoreError `f` throws; "" when it throws none.
template <class F>
QString refusal(F&& f) {
  try {
    f();
  } catch (const mok::StoreError& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

// The copy of source run `from` (in `source`) as local run `to` (in `local`) has every row of
// every per-run table its original has.
void expect_same_rows(const std::string& source, int64_t from, const std::string& local, int64_t to) {
  for (const auto& [table, query] : run_row_queries()) {
    const std::vector<std::string> original = run_rows(source, query, from);
    const std::vector<std::string> copy = run_rows(local, query, to);
    QVERIFY2(!original.empty(), table);
    QVERIFY2(original.front().rfind("error", 0) != 0, original.front().c_str());
    QVERIFY2(copy == original, qPrintable(QString("%1: %2 rows in the copy, %3 in the original")
                                              .arg(table).arg(copy.size()).arg(original.size())));
  }
}

}  // namespace

class TestRunImport : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string cluster_;  // two finished runs and an archived one, closed (no -wal beside it)
  int64_t alpha_ = 0, beta_ = 0, gamma_ = 0;

  std::string path(const std::string& name) { return (dir_.path() + "/").toStdString() + name; }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    cluster_ = path("cluster.db");
    RunStore store = RunStore::open(cluster_);
    alpha_ = mok::test::add_finished_run(store, "alpha", 20);
    beta_ = mok::test::add_finished_run(store, "beta", 12, 0.5);
    gamma_ = mok::test::add_finished_run(store, "gamma", 6);
    store.archive(gamma_, true);
  }

  void importsEveryRunIntoANewStoreRowForRow() {
    const QByteArray before = sha256_of(cluster_);
    QVERIFY(!has_side_files(cluster_));
    const std::string local = path("new/home.db");
    RunStore home = RunStore::open(local);
    const RunImportResult r = mok::import_runs(home, cluster_);
    QCOMPARE(r.imported.size(), size_t(3));
    QCOMPARE(r.skipped.size(), size_t(0));
    QCOMPARE(r.imported[0].name, std::string("alpha"));
    QCOMPARE(r.imported[0].source_id, alpha_);
    QCOMPARE(r.imported[0].metric_values, int64_t(20 * 2 + 1 + 4));  // loss and speed, a NaN, val every 5th
    QCOMPARE(r.imported[0].checkpoints, int64_t(2));
    QCOMPARE(r.imported[1].name, std::string("beta"));
    QCOMPARE(r.imported[2].name, std::string("gamma"));
    for (const mok::ImportedRun& i : r.imported) expect_same_rows(cluster_, i.source_id, local, i.id);
    // Read through the store too: the NaN stays missing, the archive flag and uid travel,
    // and the copy knows where it came from.
    const mok::RunRecord alpha = home.get_run(r.imported[0].id);
    QCOMPARE(alpha.summary.status, mok::RunStatus::finished);
    QVERIFY(std::isnan(home.metric_series(alpha.summary.id, "train/grad_norm").front().value));
    QVERIFY(!alpha.uid.empty());
    QCOMPARE(alpha.uid, RunStore::open_snapshot(cluster_).get_run(alpha_).uid);
    QCOMPARE(alpha.imported_from, fs::absolute(cluster_).lexically_normal().string());
    QCOMPARE(alpha.imported_run_id, alpha_);
    QVERIFY(alpha.imported_at > 0);
    QVERIFY(home.get_run(r.imported[2].id).summary.archived);
    QCOMPARE(home.checkpoints(r.imported[1].id).back().path, std::string("/scratch/ckpt/beta/step12"));
    // The source: not a byte changed, nothing created beside it.
    QCOMPARE(sha256_of(cluster_), before);
    QVERIFY(!has_side_files(cluster_));
  }

  void importsIntoAStoreWithRunsOfItsOwnAndSkipsThemTheSecondTime() {
    const std::string local = path("busy.db");
    RunStore home = RunStore::open(local);
    // Local runs first, with metric names in another order, so ids differ from the source's.
    const int64_t mine = home.create_run({.name = "mine"});
    mok::MetricRow row;
    row.step = 1;
    row.values = {{"val/bpb", 2.5}, {"mem/peak_bytes", 1e6}};
    home.append_metrics(mine, row);
    const RunImportResult first = mok::import_runs(home, cluster_);
    QCOMPARE(first.imported.size(), size_t(3));
    std::set<int64_t> ids = {mine};
    for (const mok::ImportedRun& i : first.imported) {
      QVERIFY(i.id > mine);
      ids.insert(i.id);
      expect_same_rows(cluster_, i.source_id, local, i.id);
    }
    QCOMPARE(ids.size(), size_t(4));
    QCOMPARE(home.metric_series(mine, "val/bpb").front().value, 2.5);  // the local run as it was
    const std::vector<int64_t> counts = table_counts(local);

    const RunImportResult second = mok::import_runs(home, cluster_);
    QCOMPARE(second.imported.size(), size_t(0));
    QCOMPARE(second.skipped.size(), size_t(3));
    for (size_t k = 0; k < 3; ++k) {
      QCOMPARE(second.skipped[k].source_id, first.imported[k].source_id);
      QCOMPARE(second.skipped[k].id, first.imported[k].id);  // the copy already here
      QVERIFY(!second.skipped[k].changed_at_source);
    }
    QCOMPARE(table_counts(local), counts);
    QCOMPARE(home.list_runs({.include_archived = true}).size(), size_t(4));
  }

  void chosenRunsComeAloneAndTheRestLater() {
    const std::string local = path("picked.db");
    RunStore home = RunStore::open(local);
    const RunImportResult one = mok::import_runs(home, cluster_, {beta_, beta_});
    QCOMPARE(one.imported.size(), size_t(1));
    QCOMPARE(one.imported[0].source_id, beta_);
    QCOMPARE(home.list_runs({.include_archived = true}).size(), size_t(1));
    QCOMPARE(home.list_runs().front().name, std::string("beta"));
    expect_same_rows(cluster_, beta_, local, one.imported[0].id);

    const RunImportResult rest = mok::import_runs(home, cluster_);
    QCOMPARE(rest.imported.size(), size_t(2));
    QCOMPARE(rest.skipped.size(), size_t(1));
    QCOMPARE(rest.skipped[0].source_id, beta_);

    const std::vector<int64_t> counts = table_counts(local);
    const QString msg = refusal([&] { mok::import_runs(home, cluster_, {alpha_, 99}); });
    QVERIFY2(msg.contains("run 99 does not exist in") && msg.contains(QString::fromStdString(cluster_)),
             qPrintable(msg));
    QCOMPARE(table_counts(local), counts);
  }

  void foreignAndNonSqliteFilesAreRefusedAndUntouched() {
    const std::string local = path("refusing.db");
    RunStore home = RunStore::open(local);
    mok::import_runs(home, cluster_, {alpha_});
    const std::vector<int64_t> counts = table_counts(local);

    const std::string foreign = path("inventory.db");
    raw_exec(foreign, "CREATE TABLE items(id INTEGER PRIMARY KEY, label TEXT); INSERT INTO items(label) VALUES ('cat food');");
    const std::string garbage = path("notes.db");
    std::ofstream(garbage, std::ios::binary) << "these are my notes, not a database\n";
    const std::string fake = path("fake.db");
    {
      std::string bytes("SQLite format 3", 16);
      for (int i = 0; i < 8192; ++i) bytes += static_cast<char>((i * 37 + 11) & 0xff);
      std::ofstream(fake, std::ios::binary) << bytes;
    }
    const std::string empty = path("empty.db");
    std::ofstream(empty, std::ios::binary).flush();
    const struct {
      std::string file;
      const char* says;
    } cases[] = {{foreign, "is an SQLite database but not a MoK run store"},
                 {garbage, "is not a MoK run store (not an SQLite database)"},
                 {fake, ""},
                 {empty, "is an empty file"},
                 {path("missing.db"), "does not exist"},
                 {dir_.path().toStdString(), "is a folder"}};
    for (const auto& c : cases) {
      const bool is_file = fs::is_regular_file(c.file);
      const QByteArray before = is_file ? sha256_of(c.file) : QByteArray();
      const QString msg = refusal([&] { mok::import_runs(home, c.file); });
      QVERIFY2(!msg.isEmpty(), c.file.c_str());
      QVERIFY2(msg.contains(QString::fromStdString(c.file)), qPrintable(msg));
      QVERIFY2(msg.contains(c.says), qPrintable(msg));
      if (is_file) QCOMPARE(sha256_of(c.file), before);
      QVERIFY(!has_side_files(c.file));
      QCOMPARE(table_counts(local), counts);
    }
    QVERIFY(!fs::exists(path("missing.db")));
  }

  void newerDamagedAndTruncatedStoresAreRefused() {
    const std::string local = path("careful.db");
    RunStore home = RunStore::open(local);
    const std::vector<int64_t> counts = table_counts(local);

    const std::string newer = path("newer.db");
    fs::copy_file(cluster_, newer);
    raw_exec(newer, "PRAGMA user_version = " + std::to_string(mok::kRunStoreSchemaVersion + 1));
    // A page three quarters in holds metric rows; the header, schema and marker stay intact.
    const std::string damaged = path("damaged.db");
    std::string bytes = mok::test::read_all(cluster_);
    const size_t pages = bytes.size() / 4096;
    QVERIFY(pages > 8);
    std::fill(bytes.begin() + static_cast<long>(pages * 3 / 4 * 4096),
              bytes.begin() + static_cast<long>((pages * 3 / 4 + 1) * 4096), '\xff');
    std::ofstream(damaged, std::ios::binary) << bytes;
    // A copy cut short (an interrupted scp): the header promises pages the file lacks.
    const std::string truncated = path("truncated.db");
    const std::string whole = mok::test::read_all(cluster_);
    std::ofstream(truncated, std::ios::binary) << whole.substr(0, whole.size() / 2);

    for (const auto& [file, says] : {std::pair{newer, "was written by a newer MoK"},
                                     std::pair{damaged, "is damaged"}, std::pair{truncated, "is damaged"}}) {
      const QByteArray before = sha256_of(file);
      const QString msg = refusal([&] { mok::import_runs(home, file); });
      QVERIFY2(msg.contains(QString::fromStdString(file)) && msg.contains(says), qPrintable(msg));
      QCOMPARE(sha256_of(file), before);
      QVERIFY(!has_side_files(file));
      QCOMPARE(table_counts(local), counts);
    }
  }

  // A source whose schema lost a column is refused, naming it, before the destination exists.
  // It used to pass the checks and fail in the copy with a NOT NULL constraint of the
  // destination, under the destination's name (found by fuzzing:
  // tests/fuzz/corpus/run_store/regress_checkpoints_without_path.db).
  void sourceWithAColumnMissingIsRefusedNamingIt() {
    const std::string damaged = path("no_path.db");
    fs::copy_file(cluster_, damaged);
    raw_exec(damaged, "ALTER TABLE checkpoints DROP COLUMN path");
    const std::string local = path("not_made.db");
    const QByteArray before = sha256_of(damaged);
    const QString msg = refusal([&] { mok::open_import_source(damaged, local); });
    QVERIFY2(msg.startsWith(QString::fromStdString(damaged) +
                            " is damaged (its table checkpoints has no column path, which schema"),
             qPrintable(msg));
    QCOMPARE(sha256_of(damaged), before);
    QVERIFY(!has_side_files(damaged));
    QVERIFY(!fs::exists(local));
  }

  void importingAStoreIntoItselfIsRefused() {
    const std::string self = path("self.db");
    fs::copy_file(cluster_, self);
    RunStore store = RunStore::open(self);
    const std::vector<int64_t> counts = table_counts(self);
    const QString msg = refusal([&] { mok::import_runs(store, self); });
    QVERIFY2(msg.contains("is the store the runs would be imported into"), qPrintable(msg));
    QCOMPARE(table_counts(self), counts);
  }

  // The second run's metric rows name a metric the source's metric_names lacks (foreign keys
  // are not enforced for other writers, and quick_check does not look at them): the import
  // fails at that run, after the first was copied, and the destination keeps none of it.
  void importThatFailsPartWayLeavesTheDestinationAsItWas() {
    const std::string broken = path("broken.db");
    fs::copy_file(cluster_, broken);
    raw_exec(broken, "UPDATE metrics SET name_id = 999 WHERE run_id = " + std::to_string(beta_) +
                         " AND step = 7 AND name_id = (SELECT id FROM metric_names WHERE name = 'train/loss')");
    const std::string local = path("intact.db");
    RunStore home = RunStore::open(local);
    const int64_t mine = home.create_run({.name = "mine"});
    const std::vector<int64_t> counts = table_counts(local);
    const QByteArray before = sha256_of(local), wal_before = sha256_of(local + "-wal");
    const QString msg = refusal([&] { mok::import_runs(home, broken); });
    QVERIFY2(msg.contains(QString::fromStdString(broken)) && msg.contains(QString("run %1").arg(beta_)) &&
                 msg.contains("name id (999)"),
             qPrintable(msg));
    QCOMPARE(table_counts(local), counts);
    QCOMPARE(home.list_runs().size(), size_t(1));
    QCOMPARE(home.list_runs().front().id, mine);
    QCOMPARE(sha256_of(local), before);
    QCOMPARE(sha256_of(local + "-wal"), wal_before);
    // The same store imports once repaired: nothing of the failed attempt is in the way.
    raw_exec(broken, "DELETE FROM metrics WHERE name_id = 999");
    QCOMPARE(mok::import_runs(home, broken).imported.size(), size_t(3));
  }

  // A store a trainer still has open (a -wal beside it): the import sees what it committed.
  void importsFromAStoreBeingWritten() {
    const std::string live = path("live.db");
    RunStore writer = RunStore::open(live);
    const int64_t id = mok::test::add_finished_run(writer, "live", 8);
    QVERIFY(fs::exists(live + "-wal"));
    const std::string local = path("watching.db");
    RunStore home = RunStore::open(local);
    const RunImportResult r = mok::import_runs(home, live);
    QCOMPARE(r.imported.size(), size_t(1));
    QCOMPARE(home.metric_row_count(r.imported[0].id), writer.metric_row_count(id));
    // The run trains on: a second import keeps the copy and says it is behind.
    mok::MetricRow later;
    later.step = 9;
    later.values = {{"train/loss", 3.0}};
    writer.append_metrics(id, later);
    const RunImportResult again = mok::import_runs(home, live);
    QCOMPARE(again.skipped.size(), size_t(1));
    QVERIFY(again.skipped[0].changed_at_source);
    QCOMPARE(home.get_run(r.imported[0].id).summary.last_step, int64_t(8));
  }

  // Runs of a store from before uids (schema 1) keep one identity whether the store is read
  // as it is or after it was upgraded, so importing both copies it once.
  void oldSchemaSourceKeepsItsRunsIdentityAcrossItsUpgrade() {
    const std::string old_path = path("old.db");
    raw_exec(old_path, mok::run_store_migrations().front().sql);
    raw_exec(old_path,
             "INSERT INTO meta(key, value) VALUES ('app', 'mok-run-store'); PRAGMA user_version = 1;"
             "INSERT INTO runs(id, name, status, created_at) VALUES (4, 'vintage', 'finished', 1700000000.123456);"
             "INSERT INTO metric_names(id, name) VALUES (1, 'train/loss');"
             "INSERT INTO metrics(run_id, name_id, step, tokens, wall_s, value) VALUES (4, 1, 1, 10, 0.5, 3.5);"
             "INSERT INTO events(run_id, time, level, text) VALUES (4, 1700000000.5, 'info', 'created');"
             "INSERT INTO tags(run_id, tag) VALUES (4, 'old');");
    const QByteArray before = sha256_of(old_path);
    const std::string local = path("modern.db");
    RunStore home = RunStore::open(local);
    const RunImportResult first = mok::import_runs(home, old_path);
    QCOMPARE(first.imported.size(), size_t(1));
    QCOMPARE(sha256_of(old_path), before);  // read as it is: not upgraded
    const mok::RunRecord copy = home.get_run(first.imported[0].id);
    QCOMPARE(copy.uid, std::string("legacy-1700000000123456-4"));
    QCOMPARE(copy.summary.tags, std::vector<std::string>{"old"});
    QVERIFY(!copy.environment.recorded);
    QCOMPARE(home.metric_series(copy.summary.id, "train/loss").front().value, 3.5);

    RunStore::open(old_path);  // upgraded in place
    QCOMPARE(raw_count(old_path, "PRAGMA user_version"), int64_t(mok::kRunStoreSchemaVersion));
    QCOMPARE(RunStore::open_readonly(old_path).get_run(4).uid, copy.uid);
    const RunImportResult again = mok::import_runs(home, old_path);
    QCOMPARE(again.imported.size(), size_t(0));
    QCOMPARE(again.skipped.size(), size_t(1));
  }

  // Every table a run owns is one the import copies (a table added later must join the list).
  void everyTableWithRunRowsIsCopied() {
    const std::string fresh = path("fresh.db");
    RunStore::open(fresh);
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(fresh.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db,
                                "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c "
                                "WHERE m.type = 'table' AND c.name = 'run_id'",
                                -1, &st, nullptr),
             SQLITE_OK);
    std::set<std::string> with_run_id;
    while (sqlite3_step(st) == SQLITE_ROW) with_run_id.insert(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    sqlite3_close(db);
    const std::set<std::string> copied(mok::per_run_tables().begin(), mok::per_run_tables().end());
    QCOMPARE(with_run_id, copied);
    std::set<std::string> compared;
    for (const auto& [table, query] : run_row_queries()) compared.insert(table);
    compared.erase("runs");
    QCOMPARE(compared, copied);
  }
};

QTEST_GUILESS_MAIN(TestRunImport)
#include "test_run_import.moc"
