#pragma once
// SetupPage: the experiment editor with the launch bar (launch, concurrent runs). The devices
// it offers are those found at start (ExperimentEditor::set_device_catalog to show others).

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
  SetupPage(RunManager* runs, QWidget* parent = nullptr);
  ExperimentEditor* editor() const { return editor_; }
  QPushButton* launch_button() const { return launch_; }
  // Launches the current config; returns the job id (0 when the config is not valid).
  int launch();

 signals:
  void launched(int job);

 private:
  void update_state();

  RunManager* runs_;
  ExperimentEditor* editor_ = nullptr;
  QPushButton* launch_ = nullptr;
  QSpinBox* concurrent_ = nullptr;
  QLabel* status_ = nullptr;
};

}  // namespace mok::gui
