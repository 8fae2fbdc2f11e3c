#include "widgets/plot/plot_group.h"

#include "widgets/plot/coalesced_plot.h"
#include "widgets/plot/streaming_plot.h"

namespace mok::gui {

PlotGroup::PlotGroup(QObject* parent) : QObject(parent) {}

void PlotGroup::add(CoalescedPlot* plot) {
  plots_.append(plot);
  plot->set_x_axis_mode(x_mode_);
  if (auto* s = qobject_cast<StreamingPlot*>(plot)) {
    s->set_smoothing(smoothing_);
    s->set_log_y(log_y_);
    s->set_robust_autoscale(robust_);
  }
  connect(plot, &CoalescedPlot::user_x_range_changed, this,
          [this, plot](double lo, double hi) { on_user_range(plot, lo, hi); });
  connect(plot, &CoalescedPlot::view_reset_requested, this, &PlotGroup::reset_view);
}

QList<CoalescedPlot*> PlotGroup::plots() const {
  QList<CoalescedPlot*> out;
  for (const auto& p : plots_)
    if (p) out.append(p.data());
  return out;
}

void PlotGroup::on_user_range(CoalescedPlot* source, double lo, double hi) {
  if (syncing_) return;
  syncing_ = true;
  for (CoalescedPlot* p : plots())
    if (p != source && p->x_axis_mode() == source->x_axis_mode()) p->set_linked_x_range(lo, hi);
  syncing_ = false;
}

void PlotGroup::set_x_axis_mode(XAxisMode mode) {
  x_mode_ = mode;
  for (CoalescedPlot* p : plots()) p->set_x_axis_mode(mode);
}

void PlotGroup::set_smoothing(double weight) {
  smoothing_ = weight;
  for (CoalescedPlot* p : plots())
    if (auto* s = qobject_cast<StreamingPlot*>(p)) s->set_smoothing(weight);
}

void PlotGroup::set_log_y(bool on) {
  log_y_ = on;
  for (CoalescedPlot* p : plots())
    if (auto* s = qobject_cast<StreamingPlot*>(p)) s->set_log_y(on);
}

void PlotGroup::set_robust_autoscale(bool on) {
  robust_ = on;
  for (CoalescedPlot* p : plots())
    if (auto* s = qobject_cast<StreamingPlot*>(p)) s->set_robust_autoscale(on);
}

void PlotGroup::reset_view() {
  if (syncing_) return;
  syncing_ = true;
  for (CoalescedPlot* p : plots()) p->reset_view();
  syncing_ = false;
}

}  // namespace mok::gui
