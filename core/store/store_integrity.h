#pragma once
// Whether a file is an intact run store. A damaged file (a torn copy, flipped bytes, a disk
// error) can still pass the header and marker checks and then fail, or half-succeed, at the
// first write into the broken page, so it is checked before any write and refused whole.

#include <string>

namespace mok {

class SqliteConnection;

// Refuses a path that is a folder or a non-empty file that does not start like an SQLite
// database, naming `path`. Reads at most 16 bytes; never writes. An empty file passes.
void check_run_store_header(const std::string& path);

// Runs SQLite's quick_check (every page and record well-formed; indexes not matched to
// their tables) over `db` and throws StoreError naming `path` and the first problem found,
// followed by `advice`. Reads only; it takes about a second per few hundred MB.
void check_run_store_intact(SqliteConnection& db, const std::string& path,
                            const std::string& advice = "restore a copy, or record runs in another store (--db)");

}  // namespace mok
