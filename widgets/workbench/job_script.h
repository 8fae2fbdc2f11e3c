#pragma once
// Cluster job scripts for the Export menu: the core's Slurm job (core/cluster/slurm_job.h)
// on one node for a config. write_job_script() writes the script and the config YAML beside it.

#include <QString>
#include <QStringList>

#include "core/config/experiment_config.h"

namespace mok::gui {

struct JobScriptOptions {
  QString time = QStringLiteral("04:00:00");  // Slurm --time
  QString db = QStringLiteral("runs/mok.db");
  bool replace_existing = false;  // false: refuse when the script or its config exists
};

// The files write_job_script() writes for `script_path` (the script, then its config).
QStringList job_script_outputs(const QString& script_path);
// Those of them that exist now (what writing would replace).
QStringList existing_job_script_outputs(const QString& script_path);

// Why no script can be written for `config` with these names and options ("" when one can).
QString job_script_problem(const ExperimentConfig& config, const QString& script_name, const QString& config_name,
                           const JobScriptOptions& options = {});
// The script text for `config`, whose YAML is saved as `config_name` beside the script; ""
// when job_script_problem() names a problem.
QString job_script_text(const ExperimentConfig& config, const QString& script_name, const QString& config_name,
                        const JobScriptOptions& options = {});
// Writes `script_path` (executable) and <script's folder>/<script's base name>.yaml; false
// and `error` on failure (nothing half-written is left behind), and when either file exists
// and options.replace_existing is false (then nothing is written).
bool write_job_script(const ExperimentConfig& config, const QString& script_path, QString* error = nullptr,
                      const JobScriptOptions& options = {});

}  // namespace mok::gui
