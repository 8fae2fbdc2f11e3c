#include "widgets/workbench/job_script.h"

#include <algorithm>

#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include "core/cluster/slurm_job.h"
#include "core/config/config_io.h"

namespace mok::gui {

namespace {

// The workbench's job: one node; CPU ranks over MPI get a task each, other ranks run as
// threads of one task (local ranks, or GPUs of one process over NCCL).
SlurmJobOptions slurm_options(const ExperimentConfig& c, const QString& script_name, const QString& config_name,
                              const JobScriptOptions& options) {
  SlurmJobOptions o;
  o.nodes = 1;
  o.tasks_per_node = c.parallel.comm == "mpi" ? std::max(1, c.parallel.ranks) : 1;
  o.time = options.time.toStdString();
  o.db = options.db.toStdString();
  o.script_name = script_name.toStdString();
  o.config_name = config_name.toStdString();
  return o;
}

}  // namespace

QString job_script_problem(const ExperimentConfig& c, const QString& script_name, const QString& config_name,
                           const JobScriptOptions& options) {
  return QString::fromStdString(slurm_job_problem(c, slurm_options(c, script_name, config_name, options)));
}

QString job_script_text(const ExperimentConfig& c, const QString& script_name, const QString& config_name,
                        const JobScriptOptions& options) {
  const SlurmJobOptions o = slurm_options(c, script_name, config_name, options);
  if (!slurm_job_problem(c, o).empty()) return {};
  return QString::fromStdString(slurm_job_script(c, o));
}

QStringList job_script_outputs(const QString& script_path) {
  const QFileInfo info(script_path);
  return {info.absoluteFilePath(), info.absolutePath() + "/" + info.completeBaseName() + ".yaml"};
}

QStringList existing_job_script_outputs(const QString& script_path) {
  QStringList out;
  for (const QString& path : job_script_outputs(script_path))
    if (QFileInfo::exists(path)) out << path;
  return out;
}

bool write_job_script(const ExperimentConfig& c, const QString& script_path, QString* error, const JobScriptOptions& options) {
  const QFileInfo info(script_path);
  const QString config_name = info.completeBaseName() + ".yaml";
  const QString config_path = job_script_outputs(script_path).at(1);
  const QStringList existing = existing_job_script_outputs(script_path);
  if (!options.replace_existing && !existing.isEmpty()) {
    if (error) *error = QStringLiteral("%1 already exists; nothing was written").arg(existing.join(QStringLiteral(" and ")));
    return false;
  }
  if (const QString why = job_script_problem(c, info.fileName(), config_name, options); !why.isEmpty()) {
    if (error) *error = why;
    return false;
  }
  try {
    save_experiment_config(c, config_path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
  const QString text = job_script_text(c, info.fileName(), config_name, options);
  QSaveFile out(script_path);
  if (!out.open(QIODevice::WriteOnly)) {
    if (error) *error = out.errorString();
    return false;
  }
  out.write(text.toUtf8());
  if (!out.commit()) {
    if (error) *error = out.errorString();
    return false;
  }
  QFile::setPermissions(script_path, QFile::permissions(script_path) | QFileDevice::ExeOwner | QFileDevice::ExeGroup);
  return true;
}

}  // namespace mok::gui
