#include "core/store/store_integrity.h"

#include "core/store/sqlite_connection.h"
#include "core/store/store_error.h"

namespace mok {

void check_run_store_intact(SqliteConnection& db, const std::string& path) {
  std::string first;
  try {
    first = db.query_text("PRAGMA quick_check(1)");
  } catch (const StoreBusyError&) {
    throw;
  } catch (const StoreError& e) {
    first = e.what();
  }
  if (first == "ok") return;
  // One line for the message: "*** in database main ***\nPage 25: ..." → "page 25: ...".
  const std::string banner = "*** in database main ***";
  if (first.compare(0, banner.size(), banner) == 0) first.erase(0, banner.size());
  for (char& c : first)
    if (c == '\n') c = ' ';
  first.erase(0, first.find_first_not_of(' '));
  throw StoreError(path + " is damaged (SQLite's check: " + first +
                   "); it was left unchanged: restore a copy, or record runs in another store (--db)");
}

}  // namespace mok
