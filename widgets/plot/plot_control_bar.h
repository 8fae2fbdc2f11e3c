#pragma once
// PlotControlBar: one row of controls for a PlotGroup: x-axis (step/tokens/wall time),
// smoothing slider, log y, robust autoscale, reset zoom.

#include <QWidget>

class QComboBox;
class QSlider;
class QCheckBox;
class QLabel;

namespace mok::gui {

class PlotGroup;

class PlotControlBar : public QWidget {
  Q_OBJECT

 public:
  explicit PlotControlBar(PlotGroup* group, QWidget* parent = nullptr);
  QComboBox* x_axis_combo() const { return x_axis_; }
  QSlider* smoothing_slider() const { return smoothing_; }
  QCheckBox* log_y_box() const { return log_y_; }

 private:
  PlotGroup* group_;
  QComboBox* x_axis_ = nullptr;
  QSlider* smoothing_ = nullptr;
  QLabel* smoothing_value_ = nullptr;
  QCheckBox* log_y_ = nullptr;
  QCheckBox* robust_ = nullptr;
};

}  // namespace mok::gui
