#include "core/util/special_file.h"

#include <filesystem>

namespace mok {

std::string special_file_description(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::unknown: return "a file of unknown type";
    default: return {};
  }
}

}  // namespace mok
