#include "widgets/workbench/setup_page.h"

#include <QCoreApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include "widgets/config/experiment_editor.h"
#include "widgets/workbench/run_manager.h"

namespace mok::gui {

namespace {

// Settings are kept only by an application that names its organization (the workbench
// does; test programs do not, so they never read or write a user's settings).
bool settings_kept() { return !QCoreApplication::organizationName().isEmpty(); }

}  // namespace

SetupPage::SetupPage(RunManager* runs, QWidget* parent) : QWidget(parent), runs_(runs) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  editor_ = new ExperimentEditor;
  layout->addWidget(editor_, 1);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(6, 2, 6, 6);
  status_ = new QLabel;
  status_->setWordWrap(true);
  bar->addWidget(status_, 1);
  bar->addWidget(new QLabel(tr("Concurrent runs")));
  concurrent_ = new QSpinBox;
  concurrent_->setRange(1, 16);
  concurrent_->setValue(runs_->max_concurrent());
  concurrent_->setToolTip(tr("Runs beyond this number wait in the queue"));
  bar->addWidget(concurrent_);
  launch_ = new QPushButton(tr("Launch run"));
  launch_->setDefault(true);
  launch_->setStyleSheet("QPushButton { font-weight: bold; padding: 4px 18px; }");
  bar->addWidget(launch_);
  layout->addLayout(bar);

  restore_last_config();
  connect(concurrent_, &QSpinBox::valueChanged, runs_, &RunManager::set_max_concurrent);
  connect(launch_, &QPushButton::clicked, this, &SetupPage::launch);
  connect(editor_, &ExperimentEditor::validity_changed, this, &SetupPage::update_state);
  connect(editor_, &ExperimentEditor::config_changed, this, &SetupPage::update_state);
  connect(editor_, &ExperimentEditor::config_changed, this, &SetupPage::remember_config);
  update_state();
}

bool SetupPage::can_launch() const { return editor_->is_valid() && RunManager::training_available(); }

void SetupPage::update_state() {
  const bool ok = can_launch();
  launch_->setEnabled(ok);
  if (!RunManager::training_available())
    status_->setText(tr("This build has no training core: runs cannot be launched."));
  else if (!editor_->is_valid())
    status_->setText(tr("<span style='color:#c62828'>%n problem(s) to fix before launching</span>", nullptr,
                        int(editor_->issues().size())));
  else
    status_->setText(tr("Runs are recorded in %1").arg(runs_->db_path()));
  if (ok != could_launch_) {
    could_launch_ = ok;
    emit can_launch_changed(ok);
  }
}

int SetupPage::launch() {
  if (!can_launch()) {
    // Say why, wherever the launch came from (button, menu, shortcut).
    const QString why = !RunManager::training_available() ? tr("this build has no training core")
                                                          : editor_->issues().join(QStringLiteral("; "));
    status_->setText(tr("<span style='color:#c62828'>Not launched: %1</span>").arg(why.toHtmlEscaped()));
    return 0;
  }
  const int job = runs_->launch(editor_->config());
  emit launched(job);
  return job;
}

void SetupPage::remember_config() {
  if (settings_kept()) QSettings().setValue(kLastConfigKey, editor_->yaml_text());
}

void SetupPage::restore_last_config() {
  if (!settings_kept()) return;
  const QString yaml = QSettings().value(kLastConfigKey).toString();
  if (yaml.isEmpty()) return;
  QString error;
  if (!editor_->apply_yaml_text(yaml, &error))  // kept as text: the YAML view shows it with its problem
    status_->setText(tr("The last session's config does not parse: %1").arg(error.toHtmlEscaped()));
  editor_->mark_restored_config();
}

}  // namespace mok::gui
