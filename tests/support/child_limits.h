#pragma once
// Faults a test can give a child process honestly, also when the suite runs as root:
//   - unprivileged: the child runs as user and group 65534 (nobody) when the test runs as
//     root, so file modes bind it (root ignores them); a non-root test is bound already;
//   - max_file_bytes: RLIMIT_FSIZE, so writing a file past that size fails (EFBIG, SIGXFSZ
//     ignored) as on a full disk; it binds root too.
// The child must be able to reach its files as nobody: keep them (and a copy of the binary,
// see reachable_copy) in a folder readable by all.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <grp.h>

#include <QFile>
#include <QProcess>
#include <QString>

namespace mok::test {

struct ChildLimits {
  bool unprivileged = false;
  rlim_t max_file_bytes = RLIM_INFINITY;
};

inline constexpr uid_t kNobody = 65534;

inline void apply_child_limits(QProcess& p, ChildLimits limits) {
  p.setChildProcessModifier([limits] {
    // Runs in the child between fork and exec: system calls only.
    if (limits.max_file_bytes != RLIM_INFINITY) {
      ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails instead of killing
      const rlimit r{limits.max_file_bytes, limits.max_file_bytes};
      ::setrlimit(RLIMIT_FSIZE, &r);
    }
    if (limits.unprivileged && ::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(126);
    }
  });
}

// A copy of `program` at `path` that every user may run (a build folder may be private).
inline bool reachable_copy(const QString& program, const QString& path) {
  QFile::remove(path);
  return QFile::copy(program, path) &&
         QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup |
                                         QFile::ExeGroup | QFile::ReadOther | QFile::ExeOther);
}

}  // namespace mok::test
