#pragma once
// SqliteConnection / SqliteStatement: a thin RAII layer over the libsqlite3 C API used by
// the run store. Errors become StoreError with the database path in the message.
// A connection keeps its prepared statements in a cache keyed by the SQL text.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace mok {

class SqliteConnection;

// One prepared statement. Bind with 1-based indexes, then step() until it returns false.
class SqliteStatement {
 public:
  SqliteStatement(SqliteConnection& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  ~SqliteStatement();  // resets and clears bindings (the statement stays cached)
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  SqliteStatement& bind(int index, int64_t v);
  SqliteStatement& bind(int index, int v) { return bind(index, static_cast<int64_t>(v)); }
  SqliteStatement& bind(int index, double v);  // NaN is stored as NULL
  SqliteStatement& bind(int index, std::string_view v);
  SqliteStatement& bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  SqliteStatement& bind(int index, const std::string& v) { return bind(index, std::string_view(v)); }
  SqliteStatement& bind_null(int index);
  // Column `col` of `row`'s current result exactly as stored (type and bytes), for copying
  // rows between databases.
  SqliteStatement& bind_column(int index, const SqliteStatement& row, int col);

  bool step();  // true: a row is ready; false: done. Throws StoreError (SQLITE_BUSY included).
  void run();   // step() to completion, for statements without result rows
  void reset();  // ready to bind and run again (bindings stay until rebound)

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;  // NULL → NaN
  std::string text(int col) const;

 private:
  SqliteConnection* db_;
  sqlite3_stmt* stmt_;
};

class SqliteConnection {
 public:
  // flags: SQLITE_OPEN_* bits. `open_name`, when given, is what SQLite opens (a file: URI
  // with SQLITE_OPEN_URI) while messages keep naming `path`. Throws StoreError.
  SqliteConnection(const std::string& path, int flags, const std::string& open_name = {});
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

  void exec(const std::string& sql);          // one or more statements, no results
  void rollback_quietly();                    // ROLLBACK when a transaction is open; never throws
  int64_t query_int(const std::string& sql);  // first column of the first row (0 when none)
  std::string query_text(const std::string& sql);
  SqliteStatement prepare(const std::string& sql);  // cached
  int64_t last_insert_id();
  int changes();

  // Throws StoreError for `rc`, with what SQLite says; `what` names the operation.
  [[noreturn]] void fail(int rc, std::string_view what);

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace mok
