#pragma once
// Who is running a run: host name, process id, and when that process started. The start
// time tells a live process from a later one that reused the pid; the boot id tells this
// boot from an earlier one. Used to find runs whose process died (SIGKILL, crash, reboot).

#include <cstdint>
#include <string>

namespace mok {

struct ProcessIdentity {
  std::string host;
  int64_t pid = 0;
  int64_t start_ticks = 0;  // /proc/PID/stat field 22 (clock ticks after boot); 0 = unknown
  std::string boot_id;      // /proc/sys/kernel/random/boot_id; "" = unknown
};

ProcessIdentity current_process_identity();
std::string current_host_name();

// Is the process that `who` describes still running on this host? A pid that is gone, a
// zombie, a different start time or a different boot all mean no.
bool process_is_alive(const ProcessIdentity& who);

}  // namespace mok
