#pragma once
// SetupPage: the experiment editor with the launch bar (launch, concurrent runs). The devices
// it offers are those found at start (ExperimentEditor::set_device_catalog to show others).
// The editor's config is kept across sessions (QSettings, for an application that names its
// organization): the page opens with the last config it held.

#include <QWidget>

class QPushButton;
class QSpinBox;
class QLabel;

namespace mok::gui {

class ExperimentEditor;
class RunManager;

class SetupPage : public QWidget {
  Q_OBJECT

 public:
  static constexpr const char* kLastConfigKey = "setup/last_config_yaml";

  SetupPage(RunManager* runs, QWidget* parent = nullptr);
  ExperimentEditor* editor() const { return editor_; }
  QPushButton* launch_button() const { return launch_; }
  QLabel* status_label() const { return status_; }
  bool can_launch() const;
  // Launches the current config; returns the job id, or 0 with the reason in the status line.
  int launch();

 signals:
  void launched(int job);
  void can_launch_changed(bool can);

 private:
  void update_state();
  void remember_config();
  void restore_last_config();

  RunManager* runs_;
  ExperimentEditor* editor_ = nullptr;
  QPushButton* launch_ = nullptr;
  QSpinBox* concurrent_ = nullptr;
  QLabel* status_ = nullptr;
  bool could_launch_ = false;
};

}  // namespace mok::gui
