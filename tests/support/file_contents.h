#pragma once
// What the checkpoint and resume tests read off disk: a file's bytes, and the digest of every
// file under a folder (to show that a refused or branching resume left a run untouched).

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/train/file_checksum.h"

namespace mok::test {

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Relative path → digest of every file under `dir` (hidden entries included).
inline std::map<std::string, FileDigest> digests(const std::filesystem::path& dir) {
  std::map<std::string, FileDigest> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[std::filesystem::relative(e.path(), dir).string()] = file_digest(e.path().string());
  return out;
}

}  // namespace mok::test
