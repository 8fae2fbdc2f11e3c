#pragma once
// Settings that are each valid but make little sense together (a warm-up longer than the
// run, validation that never comes round): warnings with the reason, shown beside the
// config's problems but never blocking a launch. A pure function of the config.

#include <vector>

#include "core/config/config_check.h"
#include "core/config/experiment_config.h"

namespace mok::gui {

// Each warning names the key it is shown at (key_path) and why (message).
std::vector<ConfigIssue> config_warnings(const ExperimentConfig& config);

}  // namespace mok::gui
