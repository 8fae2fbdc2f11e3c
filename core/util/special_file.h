#pragma once
// Paths that exist but hold no ordinary data: a FIFO blocks a reader until someone writes,
// /dev/zero never ends, a socket cannot be read at all. Inputs (configs, corpora) are
// refused by what they are rather than reported as missing.

#include <string>

namespace mok {

// What `path` is when it exists (symbolic links followed) and is neither a regular file nor
// a folder — "a FIFO (named pipe)", "a character device", "a block device", "a socket" —
// or "" otherwise (a regular file, a folder, or nothing there).
std::string special_file_description(const std::string& path);

}  // namespace mok
