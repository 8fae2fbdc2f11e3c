#pragma once
// CoalescedPlot: the base of every live plot. Data may be queued from any thread; the plot
// drains the queue and replots on one ~40 ms single-shot timer, and only when something
// changed, so a run logging thousands of rows per second costs ~25 replots per second.
// It also owns the x-axis behaviour the plots share: follow the data until the user zooms
// or drags, double-click to follow again, and linked x ranges across a PlotGroup. Ticks
// are spaced for the plot's size (ReadableTicker); a run of one point is centred.

#include <atomic>

#include <QWidget>

#include "widgets/plot/metric_point.h"

class QCustomPlot;
class QCPRange;
class QCPTextElement;
class QTimer;

namespace mok::gui {

class CoalescedPlot : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kReplotIntervalMs = 40;

  explicit CoalescedPlot(QWidget* parent = nullptr);
  ~CoalescedPlot() override;

  QCustomPlot* plot() const { return plot_; }
  void set_title(const QString& title);
  QString title() const { return title_; }

  // Thread-safe: marks the plot dirty and starts the single-shot timer if it is not running.
  void request_update();
  // Replots that QCustomPlot actually performed (counts coalescing in tests).
  int replot_count() const { return replot_count_; }
  // Drain now and replot (GUI thread), e.g. before an export.
  void flush();

  virtual void set_x_axis_mode(XAxisMode mode);
  XAxisMode x_axis_mode() const { return x_mode_; }
  virtual void set_log_y(bool on);
  bool log_y() const { return log_y_; }

  // Zoom coming from a linked plot: stop following and show `lo..hi`.
  void set_linked_x_range(double lo, double hi);
  // Follow the data again (full x range, autoscaled y).
  void reset_view();
  bool following_x() const { return follow_x_; }
  // Forget the shown data's ranges and any hover: the state a plot starts a new run in.
  void reset_ranges();
  // Hides what the pointer left on the plot (hover box, tracer); exports never show it.
  virtual void clear_overlays() {}

  bool export_png(const QString& path, int width = 0, int height = 0);
  bool export_pdf(const QString& path, int width = 0, int height = 0);

 signals:
  // The user changed the x range of this plot (drag, wheel); a PlotGroup links it.
  void user_x_range_changed(double lo, double hi);
  void view_reset_requested();

 protected:
  // GUI thread: move queued data into the plottables. Called from the timer.
  virtual void drain() = 0;
  // GUI thread: the x extent of the data in the current mode; false when there is none.
  virtual bool data_x_range(double* lo, double* hi) const = 0;
  // GUI thread: set the y range (called after drain when following or always for y).
  virtual void autoscale_y() = 0;
  // GUI thread: after the view changed (markers for sparse curves and the like).
  virtual void update_marks() {}
  void set_x_range_programmatically(double lo, double hi);
  void showEvent(QShowEvent* e) override;

 private:
  void on_timer();
  void on_x_range_changed(const QCPRange& r);
  void apply_view();
  void fit_ticks();

  QCustomPlot* plot_ = nullptr;
  QTimer* timer_ = nullptr;
  QString title_;
  QCPTextElement* title_element_ = nullptr;
  std::atomic<bool> scheduled_{false};
  int replot_count_ = 0;
  bool stale_ = false;  // drained while hidden; replot when shown
  bool programmatic_ = false;
  bool follow_x_ = true;
  bool log_y_ = false;
  XAxisMode x_mode_ = XAxisMode::step;
};

}  // namespace mok::gui
