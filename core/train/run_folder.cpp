#include "core/train/run_folder.h"

#include <cctype>
#include <ctime>
#include <filesystem>

#include "core/config/config_check.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

std::string timestamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

std::string safe_run_name(const std::string& name) {
  std::string s;
  // At most kMaxRunNameBytes, so the folder name stays far below the 255-byte file name limit
  // whatever name a front end passes.
  for (char c : name.substr(0, kMaxRunNameBytes))
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return s.empty() ? std::string("run") : s;
}

std::string new_run_folder(const std::string& checkpoint_root, const std::string& name, int64_t run_id) {
  const fs::path root(checkpoint_root);
  const std::string base = safe_run_name(name) + (run_id > 0 ? "-run" + std::to_string(run_id) : "-" + timestamp_now());
  fs::path dir = root / base;
  for (int k = 2; fs::exists(dir); ++k) dir = root / (base + "-" + std::to_string(k));
  return dir.string();
}

}  // namespace mok
