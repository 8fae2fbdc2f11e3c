#include "widgets/workbench/job_script.h"

#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>

#include "core/config/config_io.h"

// resources.qrc lives in the static mok_widgets library: register it explicitly, since the
// linker may drop its static initializer.
static void init_mok_resources() { Q_INIT_RESOURCE(resources); }

namespace mok::gui {

QString job_script_text(const ExperimentConfig& c, const QString& script_name, const QString& config_name,
                        const JobScriptOptions& options) {
  init_mok_resources();
  QFile f(":/templates/slurm_job.sh");
  if (!f.open(QIODevice::ReadOnly)) return {};
  QString text = QString::fromUtf8(f.readAll());
  QString job = QString::fromStdString(c.name);
  job.replace(QRegularExpression("[^A-Za-z0-9_.-]"), "_");
  const bool cuda = c.parallel.device == "cuda";
  text.replace("{{NAME}}", QString::fromStdString(c.name));
  text.replace("{{JOB_NAME}}", job);
  text.replace("{{SCRIPT_NAME}}", script_name);
  text.replace("{{CONFIG_NAME}}", config_name);
  text.replace("{{DB}}", options.db);
  text.replace("{{TIME}}", options.time);
  text.replace("{{GPUS}}", QString::number(cuda ? std::max(1, c.parallel.ranks) : 0));
  text.replace("{{CPUS}}", QString::number(std::max(1, c.parallel.threads * std::max(1, c.parallel.ranks))));
  return text;
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
  try {
    save_experiment_config(c, config_path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
  const QString text = job_script_text(c, info.fileName(), config_name, options);
  if (text.isEmpty()) {
    if (error) *error = QStringLiteral("the job script template is missing from the resources");
    return false;
  }
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
