#pragma once
// Sizes in bytes as people write them: "16GiB", "512 MiB", "24GB", "1.5GiB", "4096".
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) of
// 1000; a bare number or "B" is bytes. Case of the unit is ignored ("gib" works).

#include <cstdint>
#include <optional>
#include <string>

namespace mok {

// The size, or nothing when the text is not a non-negative size (or overflows int64).
std::optional<int64_t> parse_byte_size(const std::string& text);

// "16 GiB", "1.5 GiB", "512 MiB", "300 B": binary units, at most one decimal.
std::string format_byte_size(int64_t bytes);

}  // namespace mok
