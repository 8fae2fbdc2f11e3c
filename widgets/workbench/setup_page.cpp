#include "widgets/workbench/setup_page.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "widgets/config/experiment_editor.h"
#include "widgets/workbench/run_manager.h"

namespace mok::gui {

SetupPage::SetupPage(RunManager* runs, QWidget* parent) : QWidget(parent), runs_(runs) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  editor_ = new ExperimentEditor;
  layout->addWidget(editor_, 1);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(6, 2, 6, 6);
  status_ = new QLabel;
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

  connect(concurrent_, &QSpinBox::valueChanged, runs_, &RunManager::set_max_concurrent);
  connect(launch_, &QPushButton::clicked, this, &SetupPage::launch);
  connect(editor_, &ExperimentEditor::validity_changed, this, &SetupPage::update_state);
  connect(editor_, &ExperimentEditor::config_changed, this, &SetupPage::update_state);
  update_state();
}

void SetupPage::update_state() {
  const bool ok = editor_->is_valid() && RunManager::training_available();
  launch_->setEnabled(ok);
  if (!RunManager::training_available())
    status_->setText(tr("This build has no training core: runs cannot be launched."));
  else if (!editor_->is_valid())
    status_->setText(tr("<span style='color:#c62828'>%n problem(s) to fix before launching</span>", nullptr,
                        int(editor_->issues().size())));
  else
    status_->setText(tr("Runs are recorded in %1").arg(runs_->db_path()));
}

int SetupPage::launch() {
  if (!editor_->is_valid()) return 0;
  const int job = runs_->launch(editor_->config());
  emit launched(job);
  return job;
}

}  // namespace mok::gui
