#include "widgets/plot/streaming_plot.h"

#include <algorithm>
#include <cmath>

#include <qcustomplot.h>

namespace mok::gui {

QColor curve_color(int i) {
  static const QColor palette[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),
                                   QColor(214, 39, 40),  QColor(148, 103, 189), QColor(140, 86, 75),
                                   QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34),
                                   QColor(23, 190, 207)};
  return palette[((i % 10) + 10) % 10];
}

StreamingPlot::StreamingPlot(QWidget* parent) : CoalescedPlot(parent) {
  plot()->legend->setVisible(false);
  plot()->legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
  plot()->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  tracer_ = new QCPItemTracer(plot());
  tracer_->setStyle(QCPItemTracer::tsCircle);
  tracer_->setSize(6);
  tracer_->setInterpolating(false);
  tracer_->setVisible(false);
  hover_label_ = new QCPItemText(plot());
  hover_label_->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
  hover_label_->position->setType(QCPItemPosition::ptAxisRectRatio);
  hover_label_->position->setCoords(0.01, 0.02);
  hover_label_->setTextAlignment(Qt::AlignLeft);
  hover_label_->setPadding(QMargins(4, 2, 4, 2));
  hover_label_->setBrush(QBrush(QColor(255, 255, 255, 220)));
  hover_label_->setPen(QPen(QColor(160, 160, 160)));
  hover_label_->setVisible(false);
  plot()->setMouseTracking(true);
  connect(plot(), &QCustomPlot::mouseMove, this, &StreamingPlot::on_mouse_move);
}

StreamingPlot::~StreamingPlot() = default;

int StreamingPlot::add_curve(const QString& name, const QColor& color) {
  Curve c;
  c.name = name;
  c.color = color.isValid() ? color : curve_color(int(curves_.size()));
  c.ema = EmaSmoother(smoothing_);
  c.raw = plot()->addGraph();
  QColor faint = c.color;
  faint.setAlpha(60);
  c.raw->setPen(QPen(faint, 1.0));
  c.raw->removeFromLegend();
  c.raw->setVisible(smoothing_ > 0.0);
  c.smooth = plot()->addGraph();
  c.smooth->setPen(QPen(c.color, 1.0));
  c.smooth->setName(name);
  c.raw->setAdaptiveSampling(true);
  c.smooth->setAdaptiveSampling(true);
  curves_.push_back(std::move(c));
  return int(curves_.size()) - 1;
}

int StreamingPlot::find_curve(const QString& name) const {
  for (size_t i = 0; i < curves_.size(); ++i)
    if (curves_[i].name == name) return int(i);
  return -1;
}

QString StreamingPlot::curve_name(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) ? curves_[curve].name : QString();
}

void StreamingPlot::set_curve_visible(int curve, bool on) {
  if (curve < 0 || curve >= int(curves_.size())) return;
  curves_[curve].visible = on;
  curves_[curve].smooth->setVisible(on);
  curves_[curve].raw->setVisible(on && smoothing_ > 0.0);
  request_update();
}

void StreamingPlot::remove_all_curves() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  tracer_->setGraph(nullptr);
  plot()->clearGraphs();
  curves_.clear();
  request_update();
}

void StreamingPlot::clear_data() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  for (Curve& c : curves_) c.points.clear();
  rebuild_graphs();
  request_update();
}

void StreamingPlot::append(int curve, const MetricPoint& p) {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.emplace_back(curve, p);
  }
  request_update();
}

void StreamingPlot::append(int curve, const std::vector<MetricPoint>& points) {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    for (const MetricPoint& p : points) pending_.emplace_back(curve, p);
  }
  request_update();
}

int StreamingPlot::point_count(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) ? int(curves_[curve].points.size()) : 0;
}

const std::vector<MetricPoint>& StreamingPlot::points(int curve) const { return curves_.at(curve).points; }

void StreamingPlot::push_to_graphs(Curve& c, size_t from) {
  const size_t n = c.points.size() - from;
  if (n == 0) return;
  const int count = static_cast<int>(n);
  QVector<double> keys(count), raw(count), smooth(count);
  bool sorted = true;
  double last_key = c.smooth->data()->isEmpty() ? -INFINITY : (c.smooth->data()->constEnd() - 1)->key;
  for (size_t i = 0; i < n; ++i) {
    const MetricPoint& p = c.points[from + i];
    keys[int(i)] = x_of(p, x_axis_mode());
    if (keys[int(i)] < last_key) sorted = false;
    last_key = keys[int(i)];
    raw[int(i)] = p.value;
    smooth[int(i)] = c.ema.push(p.value);
  }
  c.smooth->addData(keys, smooth, sorted);
  if (smoothing_ > 0.0) c.raw->addData(keys, raw, sorted);
}

void StreamingPlot::rebuild_graphs() {
  for (Curve& c : curves_) {
    c.smooth->data()->clear();
    c.raw->data()->clear();
    c.ema = EmaSmoother(smoothing_);
    c.raw->setVisible(c.visible && smoothing_ > 0.0);
    push_to_graphs(c, 0);
  }
}

void StreamingPlot::drain() {
  std::vector<std::pair<int, MetricPoint>> batch;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;
  std::vector<size_t> first(curves_.size());
  for (size_t i = 0; i < curves_.size(); ++i) first[i] = curves_[i].points.size();
  for (const auto& [curve, p] : batch) {
    if (curve < 0 || curve >= int(curves_.size())) continue;
    curves_[curve].points.push_back(p);
  }
  for (size_t i = 0; i < curves_.size(); ++i) push_to_graphs(curves_[i], first[i]);
}

bool StreamingPlot::data_x_range(double* lo, double* hi) const {
  bool any = false;
  for (const Curve& c : curves_) {
    if (!c.visible || c.smooth->data()->isEmpty()) continue;
    double a = c.smooth->data()->constBegin()->key;
    double b = (c.smooth->data()->constEnd() - 1)->key;
    if (!any) *lo = a, *hi = b, any = true;
    *lo = std::min(*lo, a);
    *hi = std::max(*hi, b);
  }
  return any;
}

void StreamingPlot::autoscale_y() {
  const QCPRange xr = plot()->xAxis->range();
  std::vector<double> values;
  for (const Curve& c : curves_) {
    if (!c.visible) continue;
    auto data = c.smooth->data();
    auto begin = data->findBegin(xr.lower, false);
    auto end = data->findEnd(xr.upper, false);
    const int count = int(end - begin);
    if (count <= 0) continue;
    // At most ~8k samples per curve decide the range: cheap at 100k points, still robust.
    const int stride = std::max(1, count / 8192);
    for (auto it = begin; it < end; it += stride) values.push_back(it->value);
  }
  ValueRange r = robust_ ? robust_value_range(values, 0.01, 0.99, 0.08, log_y())
                         : robust_value_range(values, 0.0, 1.0, 0.05, log_y());
  if (r.valid) plot()->yAxis->setRange(r.lo, r.hi);
}

void StreamingPlot::set_smoothing(double weight) {
  smoothing_ = std::clamp(weight, 0.0, 0.999);
  rebuild_graphs();
  request_update();
}

void StreamingPlot::set_robust_autoscale(bool on) {
  robust_ = on;
  request_update();
}

void StreamingPlot::set_y_label(const QString& label) { plot()->yAxis->setLabel(label); }

void StreamingPlot::set_legend_visible(bool on) { plot()->legend->setVisible(on); }

void StreamingPlot::set_x_axis_mode(XAxisMode mode) {
  CoalescedPlot::set_x_axis_mode(mode);
  rebuild_graphs();
}

void StreamingPlot::set_log_y(bool on) { CoalescedPlot::set_log_y(on); }

QString StreamingPlot::hover_text_at(double x) const {
  QStringList lines;
  bool header = false;
  for (const Curve& c : curves_) {
    if (!c.visible || c.smooth->data()->isEmpty()) continue;
    auto data = c.smooth->data();
    auto it = data->findBegin(x, false);
    if (it == data->constEnd()) --it;
    if (it != data->constBegin()) {
      auto prev = it - 1;
      if (std::abs(prev->key - x) < std::abs(it->key - x)) it = prev;
    }
    if (!header) {
      lines << QStringLiteral("%1 %2").arg(x_axis_label(x_axis_mode())).arg(it->key, 0, 'g', 8);
      header = true;
    }
    lines << QStringLiteral("%1: %2").arg(c.name).arg(it->value, 0, 'g', 5);
  }
  return lines.join('\n');
}

void StreamingPlot::on_mouse_move(QMouseEvent* e) {
  if (curves_.empty()) return;
  const bool inside = plot()->axisRect()->rect().contains(e->pos());
  const double x = plot()->xAxis->pixelToCoord(e->pos().x());
  const QString text = inside ? hover_text_at(x) : QString();
  if (text.isEmpty()) tracer_->setGraph(nullptr);
  tracer_->setVisible(!text.isEmpty());
  hover_label_->setVisible(!text.isEmpty());
  if (!text.isEmpty()) {
    for (const Curve& c : curves_) {
      if (c.visible && !c.smooth->data()->isEmpty()) {
        tracer_->setGraph(c.smooth);
        break;
      }
    }
    tracer_->setGraphKey(x);
    hover_label_->setText(text);
  }
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace mok::gui
