#include "core/store/store_location.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace mok {
namespace fs = std::filesystem;

namespace {

std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string access_problem(int err, const std::string& what) {
  if (err == EROFS) return "read-only file system";
  if (err == EPERM) return what + " is marked immutable";
  if (err == EACCES) return "no write permission on " + what;
  return what + ": " + std::strerror(err);
}

}  // namespace

bool folder_is_writable(const std::string& path) { return ::access(folder_of(path).c_str(), W_OK) == 0; }

std::string why_not_writable(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) return access_problem(errno, "the file");
  const std::string folder = folder_of(path);
  if (::access(folder.c_str(), W_OK) != 0) return access_problem(errno, "its folder " + folder);
  return "SQLite could open it for reading only";
}

namespace {

// "file:" and the absolute path, percent-encoded where a URI needs it.
std::string file_uri(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) abs = path;
  std::string uri = "file:";
  for (const unsigned char c : abs.string()) {
    if (c == '%' || c == '?' || c == '#' || c <= 0x20 || c >= 0x7F) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri;
}

}  // namespace

std::string immutable_uri(const std::string& path) { return file_uri(path) + "?immutable=1"; }

std::string readonly_uri(const std::string& path, bool immutable) {
  return file_uri(path) + (immutable ? "?mode=ro&immutable=1" : "?mode=ro");
}

}  // namespace mok
