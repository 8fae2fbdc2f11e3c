#include "core/util/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace mok {

namespace fs = std::filesystem;

std::string replace_file_temporary(const std::string& path) {
  const fs::path p(path);
  std::string name = ".";  // appended piece by piece: "." + string trips GCC 12's -Wrestrict
  name += p.filename().string();
  name += ".tmp-";
  name += std::to_string(::getpid());
  return (p.parent_path() / name).string();
}

bool sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

void replace_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (fs::path(path).filename().empty()) throw ReplaceFileError(path, "not a file name");
  const std::string tmp = replace_file_temporary(path);
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    throw ReplaceFileError(path, why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
    out.close();
    if (!out) fail("the write failed (is the disk full?)");
  }
  if (!sync_file(tmp)) fail(std::string("cannot flush to disk: ") + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(std::strerror(errno));
}

void replace_file(const std::string& path, std::string_view contents) {
  replace_file(path, [&](std::ostream& out) { out.write(contents.data(), static_cast<std::streamsize>(contents.size())); });
}

}  // namespace mok
