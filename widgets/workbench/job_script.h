#pragma once
// Cluster job scripts: the Slurm template (resources/templates/slurm_job.sh) filled for a
// config. write_job_script() writes the script and the config YAML beside it.

#include <QString>

#include "core/config/experiment_config.h"

namespace mok::gui {

struct JobScriptOptions {
  QString time = QStringLiteral("04:00:00");  // Slurm --time
  QString db = QStringLiteral("runs/mok.db");
};

// The script text for `config`, whose YAML is saved as `config_name` beside the script.
QString job_script_text(const ExperimentConfig& config, const QString& script_name, const QString& config_name,
                        const JobScriptOptions& options = {});
// Writes `script_path` (executable) and <script's folder>/<config name>.yaml; false and
// `error` on failure (nothing half-written is left behind).
bool write_job_script(const ExperimentConfig& config, const QString& script_path, QString* error = nullptr,
                      const JobScriptOptions& options = {});

}  // namespace mok::gui
