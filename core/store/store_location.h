#pragma once
// Where a run store lives on disk: whether this process can write there, why not, and the
// SQLite URI that reads a store as immutable.

#include <string>

namespace mok {

// Whether this process may create files in the folder holding `path` (SQLite puts the
// write-ahead log and its index there). False on read-only media, for root too.
bool folder_is_writable(const std::string& path);

// Why `path` cannot be written, in words: "read-only file system", "no write permission on
// the file", "no write permission on its folder runs", "the file is marked immutable", ...
std::string why_not_writable(const std::string& path);

// "file:/abs/path?immutable=1": SQLite then takes no locks and creates no -wal or -shm file.
std::string immutable_uri(const std::string& path);

// "file:/abs/path?mode=ro", with "&immutable=1" when `immutable`: a connection that cannot
// write whatever flags it is opened with.
std::string readonly_uri(const std::string& path, bool immutable);

}  // namespace mok
