#pragma once
// PlotGroup: plots that share one x-axis behaviour. Zooming or dragging one plot shows the
// same x range in all (when their x modes agree); double-click resets them all; the
// smoothing, x mode, log y and autoscale settings apply to every member.

#include <QList>
#include <QObject>
#include <QPointer>

#include "widgets/plot/metric_point.h"

namespace mok::gui {

class CoalescedPlot;

class PlotGroup : public QObject {
  Q_OBJECT

 public:
  explicit PlotGroup(QObject* parent = nullptr);

  void add(CoalescedPlot* plot);
  QList<CoalescedPlot*> plots() const;

  void set_x_axis_mode(XAxisMode mode);
  XAxisMode x_axis_mode() const { return x_mode_; }
  void set_smoothing(double weight);  // applies to StreamingPlot members
  double smoothing() const { return smoothing_; }
  void set_log_y(bool on);            // applies to StreamingPlot members
  bool log_y() const { return log_y_; }
  void set_robust_autoscale(bool on);
  bool robust_autoscale() const { return robust_; }
  void reset_view();

 private:
  void on_user_range(CoalescedPlot* source, double lo, double hi);

  QList<QPointer<CoalescedPlot>> plots_;
  XAxisMode x_mode_ = XAxisMode::step;
  double smoothing_ = 0.0;
  bool log_y_ = false;
  bool robust_ = true;
  bool syncing_ = false;
};

}  // namespace mok::gui
