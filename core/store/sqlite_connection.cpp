#include "core/store/sqlite_connection.h"

#include <sqlite3.h>

#include <cmath>
#include <limits>

#include "core/store/store_error.h"

namespace mok {

SqliteConnection::SqliteConnection(const std::string& path, int flags, const std::string& open_name) : path_(path) {
  const int rc = sqlite3_open_v2((open_name.empty() ? path : open_name).c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw StoreError(path + ": cannot open the run store: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  if (db_) sqlite3_close_v2(db_);
}

void SqliteConnection::fail(int rc, std::string_view what) {
  const int primary = rc & 0xff;
  std::string msg = path_ + ": " + std::string(what) + " failed: " + sqlite3_errmsg(db_);
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw StoreBusyError(msg);
  if (primary == SQLITE_NOTADB) {
    throw StoreError(path_ + " is not a MoK run store (not an SQLite database)");
  }
  if (primary == SQLITE_CORRUPT) throw StoreError(path_ + " is damaged (SQLite reports corruption: " +
                                                  sqlite3_errmsg(db_) + ")");
  if (primary == SQLITE_FULL) throw StoreError(path_ + ": disk full while writing the run store");
  if (primary == SQLITE_READONLY) throw StoreError(path_ + " is read-only: " + sqlite3_errmsg(db_));
  throw StoreError(msg);
}

void SqliteConnection::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, "'" + sql.substr(0, 60) + "'");
}

void SqliteConnection::rollback_quietly() {
  if (db_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

SqliteStatement SqliteConnection::prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return SqliteStatement(*this, it->second);
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) fail(rc, "preparing '" + sql.substr(0, 60) + "'");
  cache_.emplace(sql, stmt);
  return SqliteStatement(*this, stmt);
}

int64_t SqliteConnection::query_int(const std::string& sql) {
  SqliteStatement st = prepare(sql);
  return st.step() ? st.int64(0) : 0;
}

std::string SqliteConnection::query_text(const std::string& sql) {
  SqliteStatement st = prepare(sql);
  return st.step() ? st.text(0) : std::string();
}

int64_t SqliteConnection::last_insert_id() { return sqlite3_last_insert_rowid(db_); }
int SqliteConnection::changes() { return sqlite3_changes(db_); }

SqliteStatement::~SqliteStatement() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

SqliteStatement& SqliteStatement::bind(int index, int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, index, v);
  if (rc != SQLITE_OK) db_->fail(rc, "binding a value");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, double v) {
  if (std::isnan(v)) return bind_null(index);
  const int rc = sqlite3_bind_double(stmt_, index, v);
  if (rc != SQLITE_OK) db_->fail(rc, "binding a value");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, std::string_view v) {
  const int rc = sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_->fail(rc, "binding a value");
  return *this;
}

SqliteStatement& SqliteStatement::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_->fail(rc, "binding a value");
  return *this;
}

SqliteStatement& SqliteStatement::bind_column(int index, const SqliteStatement& row, int col) {
  const int rc = sqlite3_bind_value(stmt_, index, sqlite3_column_value(row.stmt_, col));
  if (rc != SQLITE_OK) db_->fail(rc, "binding a value");
  return *this;
}

bool SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset now so the statement releases its locks before the error travels up.
  sqlite3_reset(stmt_);
  db_->fail(rc, std::string("'") + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
}

void SqliteStatement::run() {
  while (step()) {
  }
}

void SqliteStatement::reset() { sqlite3_reset(stmt_); }

bool SqliteStatement::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t SqliteStatement::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double SqliteStatement::real(int col) const {
  if (is_null(col)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, col);
}
std::string SqliteStatement::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

}  // namespace mok
