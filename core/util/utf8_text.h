#pragma once
// UTF-8 checks for text that crosses a boundary: config files, corpora, JSON output.

#include <cstdint>
#include <string>
#include <string_view>

namespace mok {

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points
// above U+10FFFF count as invalid), or -1 when the whole text is valid.
int64_t find_invalid_utf8(std::string_view text);

// `text` with every byte that breaks UTF-8 replaced by U+FFFD, so that it can be written
// where only valid UTF-8 may go (JSON); valid text comes back unchanged.
std::string replace_invalid_utf8(std::string_view text);

}  // namespace mok
