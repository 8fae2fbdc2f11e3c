#include "core/store/store_integrity.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/store/sqlite_connection.h"
#include "core/store/store_error.h"

namespace mok {

void check_run_store_header(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw StoreError(path + " is a folder, not a MoK run store file");
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0) return;
  static const char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  char head[16] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StoreError(path + " cannot be read (check its permissions)");
  in.read(head, sizeof(head));
  if (in.gcount() < 16 || std::memcmp(head, kMagic, 16) != 0) {
    throw StoreError(path + " is not a MoK run store (not an SQLite database)");
  }
}

void check_run_store_intact(SqliteConnection& db, const std::string& path, const std::string& advice) {
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
  throw StoreError(path + " is damaged (SQLite's check: " + first + "); it was left unchanged" +
                   (advice.empty() ? std::string() : ": " + advice));
}

}  // namespace mok
