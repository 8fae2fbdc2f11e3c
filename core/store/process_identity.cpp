#include "core/store/process_identity.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace mok {
namespace {

// Reads state (field 3) and starttime (field 22) of /proc/PID/stat. The command name
// (field 2) is in parentheses and may hold spaces, so fields are counted after the last ')'.
bool read_proc_stat(int64_t pid, char* state, int64_t* start_ticks) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] = field 3 (state)
  std::string f;
  while (rest >> f) fields.push_back(f);
  if (fields.size() < 20) return false;
  *state = fields[0].empty() ? '?' : fields[0][0];
  *start_ticks = std::stoll(fields[19]);
  return true;
}

std::string read_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in) std::getline(in, id);
  return id;
}

}  // namespace

std::string current_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

ProcessIdentity current_process_identity() {
  ProcessIdentity id;
  id.host = current_host_name();
  id.pid = static_cast<int64_t>(getpid());
  char state = '?';
  if (!read_proc_stat(id.pid, &state, &id.start_ticks)) id.start_ticks = 0;
  id.boot_id = read_boot_id();
  return id;
}

bool process_is_alive(const ProcessIdentity& who) {
  // A stored pid outside pid_t (a damaged row) would wrap: 2³² to 0, which kill() takes as
  // "this process group" and answers alive.
  if (who.pid <= 0 || who.pid > std::numeric_limits<pid_t>::max()) return false;
  if (!who.boot_id.empty()) {
    const std::string now = read_boot_id();
    if (!now.empty() && now != who.boot_id) return false;  // rebooted since
  }
  if (kill(static_cast<pid_t>(who.pid), 0) != 0 && errno != EPERM) return false;
  char state = '?';
  int64_t start = 0;
  if (read_proc_stat(who.pid, &state, &start)) {
    if (state == 'Z' || state == 'X') return false;
    if (who.start_ticks != 0 && start != who.start_ticks) return false;  // pid reused
  }
  return true;
}

}  // namespace mok
