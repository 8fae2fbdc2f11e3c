#include "core/store/checked_store_reader.h"

#include <sqlite3.h>

#include <filesystem>

#include "core/store/run_store_schema.h"
#include "core/store/sqlite_connection.h"
#include "core/store/store_error.h"
#include "core/store/store_integrity.h"
#include "core/store/store_location.h"

namespace mok {

namespace {
constexpr int kBusyTimeoutMs = 10000;  // as the store's own connections
}

CheckedStoreReader open_checked_store_reader(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw StoreError("no run store path given");
  if (!fs::exists(path, ec)) throw StoreError(path + " does not exist (no run store there)");
  check_run_store_header(path);
  if (fs::file_size(path, ec) == 0) throw StoreError(path + " is an empty file, not a MoK run store");
  // Without a write-ahead log beside it no writer has the file open, and reading it as
  // immutable takes no locks and creates nothing beside it. With one, a plain read-only
  // connection sees what the writer committed (the log's pages included).
  const bool no_writer = !fs::exists(path + "-wal", ec);
  CheckedStoreReader out;
  out.db = std::make_unique<SqliteConnection>(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                                              readonly_uri(path, no_writer));
  SqliteConnection& db = *out.db;
  sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs);
  db.exec("PRAGMA query_only=1");
  const StoreInspection found = inspect_run_store(db);
  check_run_store_usable(found, path);
  if (found.kind == StoreInspection::Kind::empty) {
    throw StoreError(path + " is an empty SQLite database, not a MoK run store");
  }
  if (found.version < 1) throw StoreError(path + " has no schema version; it is not a usable MoK run store");
  check_run_store_intact(db, path, "restore a copy, or copy it again from where it was written");
  out.version = found.version;
  return out;
}

void check_run_store_readable(const std::string& path) { open_checked_store_reader(path); }

}  // namespace mok
