#pragma once
// A run store opened to be read whole and trusted: the source of an import (run_import.h), or
// a file the workbench is about to switch to. It passes every check a writer makes before it
// writes (SQLite header, our marker, a schema this build reads, intact pages), and it is
// read without ever being written: a read-only connection (URI mode=ro), immutable when no
// writer has the file open, so no -wal or -shm file appears beside it either.

#include <memory>
#include <string>

#include "core/store/sqlite_connection.h"

namespace mok {

struct CheckedStoreReader {
  std::unique_ptr<SqliteConnection> db;  // query_only
  int version = 0;                       // its schema version, 1 … kRunStoreSchemaVersion
};

// Throws StoreError naming `path` when the file is missing, a folder, empty, not an SQLite
// database, someone else's database, of a newer schema, or damaged (its schema not what the
// migrations make, or quick_check).
CheckedStoreReader open_checked_store_reader(const std::string& path);

// The same checks for a caller that wants only the verdict; the file is closed again.
void check_run_store_readable(const std::string& path);

}  // namespace mok
