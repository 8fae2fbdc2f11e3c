#pragma once
// The run store's schema: an ordered list of migrations (migration i takes the schema from
// version i-1 to i), PRAGMA user_version holding the version, and a meta table whose
// app='mok-run-store' row marks the database as ours. docs/run_store.md shows the tables.

#include <string>
#include <vector>

namespace mok {

class SqliteConnection;

inline constexpr int kRunStoreSchemaVersion = 3;   // the newest schema this build reads and writes
inline constexpr const char* kRunStoreAppId = "mok-run-store";

struct Migration {
  int version;      // the schema version after this migration
  std::string sql;  // statements run inside the migration transaction
};
const std::vector<Migration>& run_store_migrations();

// The tables whose rows belong to one run (a run_id column), besides `runs` itself: what
// deleting a run removes and importing a run copies.
const std::vector<std::string>& per_run_tables();

// What an existing database holds, found with reads only.
struct StoreInspection {
  enum class Kind { empty, ours, foreign } kind = Kind::empty;
  int version = 0;                 // PRAGMA user_version
  std::string foreign_detail;      // for foreign: what was found instead
  // For ours, of a version this build knows: how its schema differs from what the
  // migrations up to `version` create ("" when it is whole): one of those tables missing or
  // not a table (a view), a column of theirs missing, a trigger (a run store has none).
  std::string schema_damage;
};
StoreInspection inspect_run_store(SqliteConnection& db);

// Throws StoreError when the inspection rules the file out for this build: someone else's
// database, a schema newer than kRunStoreSchemaVersion, or a damaged schema (whose queries
// would fail part way, after a writer had changed the file). `path` goes in the message.
void check_run_store_usable(const StoreInspection& found, const std::string& path);

// Brings the schema to kRunStoreSchemaVersion in one IMMEDIATE transaction (re-checking the
// version inside it, as another process may have migrated first). Nothing when current.
void migrate_run_store(SqliteConnection& db);

}  // namespace mok
