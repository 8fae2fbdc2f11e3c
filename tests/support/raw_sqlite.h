#pragma once
// Reading a store's file behind the RunStore's back, for the store tests: one integer a query
// returns, through a read-only connection (−1 when the query fails).

#include <sqlite3.h>

#include <cstdint>
#include <string>

namespace mok::test {

inline int64_t raw_count(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

}  // namespace mok::test
