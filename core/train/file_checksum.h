#pragma once
// CRC-32C (Castagnoli) checksums of checkpoint files, so a flipped byte in a weight or
// optimizer file is caught when the checkpoint is loaded, not as a different loss later.
// CRC-32C detects every error burst up to 32 bits and any odd number of flipped bits;
// other damage slips through with probability 2⁻³². Table-driven (slicing by 8, ~1–2 GB/s).

#include <cstddef>
#include <cstdint>
#include <string>

namespace mok {

// Continues `crc` (0 for a fresh checksum) over `bytes` bytes at `data`.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32c = 0;

  std::string crc_hex() const;  // 8 lowercase hex digits
  bool operator==(const FileDigest& o) const { return bytes == o.bytes && crc32c == o.crc32c; }
  bool operator!=(const FileDigest& o) const { return !(*this == o); }
};

// Size and CRC-32C of a whole file. Throws std::runtime_error when it cannot be read.
FileDigest file_digest(const std::string& path);

}  // namespace mok
