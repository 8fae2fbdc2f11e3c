#include "core/store/run_store_schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <utility>

#include "core/store/run_uid.h"
#include "core/store/sqlite_connection.h"
#include "core/store/store_error.h"

namespace mok {

const std::vector<Migration>& run_store_migrations() {
  static const std::vector<Migration> migrations = {
      {1, R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE runs (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  name           TEXT NOT NULL,
  status         TEXT NOT NULL,
  status_message TEXT NOT NULL DEFAULT '',
  created_at     REAL NOT NULL,
  started_at     REAL,
  finished_at    REAL,
  updated_at     REAL,
  config_yaml    TEXT NOT NULL DEFAULT '',
  host           TEXT NOT NULL DEFAULT '',
  device         TEXT NOT NULL DEFAULT '',
  code_version   TEXT NOT NULL DEFAULT '',
  pid            INTEGER NOT NULL DEFAULT 0,
  process_start  INTEGER NOT NULL DEFAULT 0,
  boot_id        TEXT NOT NULL DEFAULT '',
  notes          TEXT NOT NULL DEFAULT '',
  archived       INTEGER NOT NULL DEFAULT 0,
  model_layers   INTEGER NOT NULL DEFAULT 0,
  model_d_model  INTEGER NOT NULL DEFAULT 0,
  model_experts  INTEGER NOT NULL DEFAULT 0,
  model_top_k    INTEGER NOT NULL DEFAULT 0,
  dispatcher     TEXT NOT NULL DEFAULT '',
  policy         TEXT NOT NULL DEFAULT '',
  kittens_mode   TEXT NOT NULL DEFAULT '',
  last_step      INTEGER,
  last_tokens    INTEGER,
  last_wall_s    REAL,
  best_val_bpb   REAL,
  best_val_ppl   REAL,
  peak_bytes     REAL
);
CREATE INDEX runs_status ON runs(status);
CREATE TABLE metric_names (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE metrics (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name_id INTEGER NOT NULL REFERENCES metric_names(id),
  step    INTEGER NOT NULL,
  tokens  INTEGER NOT NULL,
  wall_s  REAL NOT NULL,
  value   REAL,
  PRIMARY KEY (run_id, name_id, step)
) WITHOUT ROWID;
CREATE TABLE events (
  id     INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time   REAL NOT NULL,
  level  TEXT NOT NULL,
  text   TEXT NOT NULL
);
CREATE INDEX events_run ON events(run_id, id);
CREATE TABLE checkpoints (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step       INTEGER NOT NULL,
  path       TEXT NOT NULL,
  created_at REAL NOT NULL
);
CREATE INDEX checkpoints_run ON checkpoints(run_id, step);
CREATE TABLE tags (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag    TEXT NOT NULL,
  PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX tags_tag ON tags(tag);
)sql"},
      // 2: where each run computed (RunEnvironment). Older runs have no row: "not recorded".
      {2, R"sql(
CREATE TABLE environments (
  run_id         INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  cpu_model      TEXT NOT NULL DEFAULT '',
  cpu_count      INTEGER NOT NULL DEFAULT 0,
  threads        INTEGER NOT NULL DEFAULT 0,
  blas_library   TEXT NOT NULL DEFAULT '',
  blas_kernel    TEXT NOT NULL DEFAULT '',
  blas_config    TEXT NOT NULL DEFAULT '',
  gpu_model      TEXT NOT NULL DEFAULT '',
  gpu_driver     TEXT NOT NULL DEFAULT '',
  cuda_version   TEXT NOT NULL DEFAULT '',
  cublas_version TEXT NOT NULL DEFAULT '',
  nccl_version   TEXT NOT NULL DEFAULT ''
);
)sql"},
      // 3: a run's identity across stores (run_uid.h), so importing a store twice copies each
      // run once; runs made before get one derived from their creation time and id. An
      // imported run records where it came from (the source file, its id there, when).
      {3, std::string(R"sql(
ALTER TABLE runs ADD COLUMN uid TEXT;
UPDATE runs SET uid = )sql") + kLegacyRunUidSql + R"sql(;
CREATE UNIQUE INDEX runs_uid ON runs(uid);
ALTER TABLE runs ADD COLUMN imported_from TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN imported_run_id INTEGER;
ALTER TABLE runs ADD COLUMN imported_at REAL;
)sql"},
  };
  return migrations;
}

const std::vector<std::string>& per_run_tables() {
  static const std::vector<std::string> tables = {"metrics", "events", "checkpoints", "tags", "environments"};
  return tables;
}

namespace {

// Table → its columns, as the migrations up to one version create them.
using TableColumns = std::map<std::string, std::vector<std::string>>;

std::vector<std::string> column_names(SqliteConnection& db, const std::string& table) {
  std::vector<std::string> columns;
  SqliteStatement st = db.prepare("SELECT name FROM pragma_table_info(?1)");
  st.bind(1, table);
  while (st.step()) columns.push_back(st.text(0));
  return columns;
}

// The tables and columns of every schema version, read off an in-memory database the
// migrations build (index: the version), so they never disagree with the migrations.
const std::vector<TableColumns>& tables_by_version() {
  static const std::vector<TableColumns> by_version = [] {
    std::vector<TableColumns> out(kRunStoreSchemaVersion + 1);
    SqliteConnection mem(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    for (const Migration& m : run_store_migrations()) {
      mem.exec(m.sql);
      TableColumns& tables = out.at(static_cast<size_t>(m.version));
      SqliteStatement st =
          mem.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'");
      std::vector<std::string> names;
      while (st.step()) names.push_back(st.text(0));
      for (const std::string& t : names) tables[t] = column_names(mem, t);
    }
    return out;
  }();
  return by_version;
}

// What the schema of a store of ours at `version` lacks, or holds that would change what
// MoK's own statements do; "" when whole. Tables, indexes and views of other names are left
// alone (someone's additions by hand); a view in the place of one of ours is not (reading it
// could run any query, endlessly), nor is a trigger (it would run inside MoK's writes).
std::string schema_damage(SqliteConnection& db, int version) {
  for (const auto& [table, columns] : tables_by_version().at(static_cast<size_t>(version))) {
    SqliteStatement st = db.prepare("SELECT type FROM sqlite_master WHERE name = ?1");
    st.bind(1, table);
    if (!st.step()) return "its table " + table + " is missing";
    if (st.text(0) != "table") return table + " is a " + st.text(0) + ", not a table";
    const std::vector<std::string> present = column_names(db, table);
    for (const std::string& c : columns) {
      if (std::find(present.begin(), present.end(), c) == present.end()) {
        return "its table " + table + " has no column " + c + ", which schema " + std::to_string(version) + " has";
      }
    }
  }
  SqliteStatement trigger = db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name LIMIT 1");
  if (trigger.step()) return "it holds a trigger '" + trigger.text(0) + "', which a run store never has";
  return {};
}

}  // namespace

StoreInspection inspect_run_store(SqliteConnection& db) {
  StoreInspection out;
  out.version = static_cast<int>(db.query_int("PRAGMA user_version"));
  const int64_t tables = db.query_int("SELECT count(*) FROM sqlite_master");
  if (tables == 0 && out.version == 0) return out;  // empty: ours to create
  const int64_t has_meta =
      db.query_int("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'");
  if (has_meta) {
    SqliteStatement st = db.prepare("SELECT value FROM meta WHERE key='app'");
    if (st.step() && st.text(0) == kRunStoreAppId) {
      out.kind = StoreInspection::Kind::ours;
      if (out.version >= 1 && out.version <= kRunStoreSchemaVersion) out.schema_damage = schema_damage(db, out.version);
      return out;
    }
  }
  out.kind = StoreInspection::Kind::foreign;
  std::string names;
  SqliteStatement st = db.prepare(
      "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name LIMIT 6");
  while (st.step()) names += (names.empty() ? "" : ", ") + st.text(0);
  out.foreign_detail = names.empty() ? "no MoK tables" : "it holds other tables: " + names;
  return out;
}

void check_run_store_usable(const StoreInspection& found, const std::string& path) {
  if (found.kind == StoreInspection::Kind::foreign) {
    throw StoreError(path + " is an SQLite database but not a MoK run store (" + found.foreign_detail +
                     "); it was left unchanged");
  }
  if (found.version > kRunStoreSchemaVersion) {
    throw StoreError(path + " was written by a newer MoK (schema " + std::to_string(found.version) +
                     ", this build reads up to " + std::to_string(kRunStoreSchemaVersion) +
                     "); it was left unchanged");
  }
  if (!found.schema_damage.empty()) {
    throw StoreError(path + " is damaged (" + found.schema_damage + "); it was left unchanged");
  }
}

void migrate_run_store(SqliteConnection& db) {
  if (db.query_int("PRAGMA user_version") == kRunStoreSchemaVersion) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    const StoreInspection found = inspect_run_store(db);
    check_run_store_usable(found, db.path());
    for (const Migration& m : run_store_migrations()) {
      if (m.version > found.version) db.exec(m.sql);
    }
    {
      SqliteStatement st = db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)");
      st.bind(1, "app").bind(2, kRunStoreAppId).run();
    }
    {
      SqliteStatement st = db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)");
      st.bind(1, "schema_written_by").bind(2, std::string("mok ") + MOK_VERSION).run();
    }
    db.exec("PRAGMA user_version = " + std::to_string(kRunStoreSchemaVersion));
    db.exec("COMMIT");
  } catch (...) {
    db.rollback_quietly();
    throw;
  }
}

}  // namespace mok
