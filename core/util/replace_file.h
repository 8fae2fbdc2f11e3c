#pragma once
// A file written whole or not at all. The contents go to a hidden temporary beside the target
// (".NAME.tmp-PID", same folder, so the rename stays on one filesystem), are flushed to disk,
// and the temporary is renamed over the target: a reader, or a crash at any point, sees the old
// file or the new one. A failed write (no folder, no permission, a full disk, an exception from
// `write`) leaves the old file as it was and no temporary behind.

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mok {

// what(): "PATH: cannot write: REASON"; reason alone for callers with their own wording.
struct ReplaceFileError : std::runtime_error {
  ReplaceFileError(const std::string& path, const std::string& why)
      : std::runtime_error(path + ": cannot write: " + why), reason(why) {}
  std::string reason;
};

// `write` fills the stream; its exceptions pass through after the temporary is removed.
void replace_file(const std::string& path, const std::function<void(std::ostream&)>& write);
void replace_file(const std::string& path, std::string_view contents);

// The temporary's name for `path` in this process (tests look for leftovers).
std::string replace_file_temporary(const std::string& path);

// Flushes a written file's bytes to the disk (fsync), as replace_file does before its rename;
// false (errno set) if it cannot. For writers that rename their temporaries themselves.
bool sync_file(const std::string& path);

}  // namespace mok
