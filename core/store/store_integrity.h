#pragma once
// Whether a run store's pages are intact. A damaged file (a torn copy, flipped bytes, a disk
// error) can still pass the header and marker checks and then fail, or half-succeed, at the
// first write into the broken page, so it is checked before any write and refused whole.

#include <string>

namespace mok {

class SqliteConnection;

// Runs SQLite's quick_check (every page and record well-formed; indexes not matched to
// their tables) over `db` and throws StoreError naming `path` and the first problem found.
// Reads only; it takes about a second per few hundred MB.
void check_run_store_intact(SqliteConnection& db, const std::string& path);

}  // namespace mok
