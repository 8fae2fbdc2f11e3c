#pragma once
// SetupPage: the experiment editor with the launch bar (launch, concurrent runs).

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

// GPUs this machine shows (/dev/nvidia<N>); 0 on a CPU-only machine.
int detect_gpu_count();

}  // namespace mok::gui
