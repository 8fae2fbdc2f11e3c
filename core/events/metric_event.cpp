#include "core/events/metric_event.h"

namespace mok {

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::queued: return "queued";
    case RunStatus::running: return "running";
    case RunStatus::paused: return "paused";
    case RunStatus::finished: return "finished";
    case RunStatus::stopped: return "stopped";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "unknown";
}

bool parse_run_status(const std::string& text, RunStatus* out) {
  for (RunStatus s : {RunStatus::queued, RunStatus::running, RunStatus::paused, RunStatus::finished,
                      RunStatus::stopped, RunStatus::failed, RunStatus::interrupted}) {
    if (text == run_status_name(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

}  // namespace mok
