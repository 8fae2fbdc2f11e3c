#pragma once
// The folder a run writes its checkpoints into: <checkpoint root>/<name>-run<id>/ (with the
// run store's id) or <name>-<YYYYmmdd-HHMMSS>/ without a store; "-2", "-3", … are appended
// when that folder exists already, so a new run never writes into another run's folder.

#include <cstdint>
#include <string>

namespace mok {

// A folder-name-safe version of a run name: letters, digits, '-' and '_' kept, others '_',
// cut to its first kMaxRunNameBytes bytes (core/config/config_check.h).
std::string safe_run_name(const std::string& name);

// The folder (not created) for a new run named `name` with store id `run_id` (0: none).
std::string new_run_folder(const std::string& checkpoint_root, const std::string& name, int64_t run_id);

}  // namespace mok
