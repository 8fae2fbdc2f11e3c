#pragma once
// Where a quoted YAML scalar ends in its source text. yaml-cpp lets a quoted scalar run
// over line breaks and even to the end of the file, so an unclosed quote in a block mapping
// (`name: 'fz` and then `seed: 5`) silently turns every key below it into the value. The
// config reader uses this to refuse a quoted value that does not close on its own line.

#include <cstddef>
#include <string_view>

namespace mok {

// The offset of the quote that closes the quoted scalar opened at `open` (text[open] is ' or
// "), or npos when it is never closed. Single quotes escape themselves (''); double quotes
// take backslash escapes.
size_t closing_quote_offset(std::string_view text, size_t open);

}  // namespace mok
