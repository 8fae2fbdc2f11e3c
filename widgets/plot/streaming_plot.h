#pragma once
// StreamingPlot: live curves of scalar metrics (loss, perplexity, tokens/s...).
//   - append() from any thread; points wait in a mutex-guarded queue until the next
//     coalesced replot (CoalescedPlot), where they are added to QCustomPlot with sorted keys.
//   - x-axis as step, tokens or wall time; log y; debiased EMA smoothing with the raw
//     curve drawn faintly behind; outlier-robust y autoscale over the visible x range.
//   - A curve goes on the left or the right y axis, so values of different magnitude
//     (bpb and perplexity, lr and gradient norm) each get a readable scale.
//   - A curve with few points in view (one evaluation, a sparse validation series) is drawn
//     with a marker at every point, so a single point is seen.
//   - Hover shows, for every curve, its nearest real sample with that sample's own x; a
//     value between two samples is never made up. The legend sits under the axes, off the data.
//   - Adaptive sampling keeps 100k points per curve cheap to draw.

#include <mutex>
#include <vector>

#include <QColor>

#include "widgets/plot/coalesced_plot.h"
#include "widgets/plot/robust_range.h"

class QCPAxis;
class QCPGraph;
class QCPItemTracer;
class QCPItemText;
class QMouseEvent;

namespace mok::gui {

enum class CurveAxis { left, right };

class StreamingPlot : public CoalescedPlot {
  Q_OBJECT

 public:
  // A curve with at most one point per this many pixels of the axis is drawn with markers.
  static constexpr int kMarkerPixelsPerPoint = 6;

  explicit StreamingPlot(QWidget* parent = nullptr);
  ~StreamingPlot() override;

  // GUI thread. Returns the curve id used by append(). `name` is the metric (hover text,
  // find_curve); `legend` the legend's shorter text where the name would not fit (default: the
  // name), followed by " (right)" for a curve on the right axis.
  int add_curve(const QString& name, const QColor& color = QColor(), CurveAxis axis = CurveAxis::left,
                const QString& legend = QString());
  int curve_count() const { return int(curves_.size()); }
  int find_curve(const QString& name) const;  // -1 when absent
  QString curve_name(int curve) const;
  void set_curve_visible(int curve, bool on);
  bool curve_visible(int curve) const;
  void remove_all_curves();
  void clear_data();

  // Thread-safe.
  void append(int curve, const MetricPoint& p);
  void append(int curve, const std::vector<MetricPoint>& points);

  // GUI thread: points drained into the curve so far.
  int point_count(int curve) const;
  const std::vector<MetricPoint>& points(int curve) const;
  // Whether curve `curve` is drawn with a marker at each point now.
  bool curve_has_markers(int curve) const;
  // The y axis curve `curve` is drawn against.
  QCPAxis* value_axis(int curve) const;

  // 0 = raw values, up to 0.999 = heavy smoothing.
  void set_smoothing(double weight);
  double smoothing() const { return smoothing_; }
  // true: y range from the 1st..99th percentile of visible values; false: min..max.
  void set_robust_autoscale(bool on);
  void set_y_label(const QString& label);        // left axis
  void set_right_y_label(const QString& label);  // right axis (shown while a curve uses it)
  void set_legend_visible(bool on);
  // Text shown in the middle of the plot while no curve has a point (why it is empty).
  void set_empty_note(const QString& text);
  QString shown_empty_note() const;
  void set_x_axis_mode(XAxisMode mode) override;
  void set_log_y(bool on) override;

  // Text the hover box shows at plot x `x` (what a user reads off the tracer).
  QString hover_text_at(double x) const;
  bool hover_visible() const;
  void clear_overlays() override;

 protected:
  void drain() override;
  bool data_x_range(double* lo, double* hi) const override;
  void autoscale_y() override;
  void update_marks() override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  struct Curve {
    QString name;
    QColor color;
    CurveAxis axis = CurveAxis::left;
    std::vector<MetricPoint> points;
    EmaSmoother ema;
    QCPGraph* smooth = nullptr;  // what the user reads
    QCPGraph* raw = nullptr;     // faint raw curve behind the smoothed one
    bool visible = true;
  };
  void rebuild_graphs();
  void push_to_graphs(Curve& c, size_t from);
  void on_mouse_move(QMouseEvent* e);
  void autoscale_axis(CurveAxis axis);
  void update_right_axis();

  std::vector<Curve> curves_;
  mutable std::mutex pending_mutex_;
  std::vector<std::pair<int, MetricPoint>> pending_;
  double smoothing_ = 0.0;
  bool robust_ = true;
  QCPItemTracer* tracer_ = nullptr;
  QCPItemText* hover_label_ = nullptr;
  QCPItemText* empty_note_ = nullptr;
};

// A pleasant, distinguishable colour for curve `i`.
QColor curve_color(int i);

}  // namespace mok::gui
