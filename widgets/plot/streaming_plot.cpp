#include "widgets/plot/streaming_plot.h"

#include <algorithm>
#include <cmath>

#include <QEvent>
#include <qcustomplot.h>

#include "widgets/plot/readable_ticker.h"

namespace mok::gui {

QColor curve_color(int i) {
  static const QColor palette[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44),
                                   QColor(214, 39, 40),  QColor(148, 103, 189), QColor(140, 86, 75),
                                   QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34),
                                   QColor(23, 190, 207)};
  return palette[((i % 10) + 10) % 10];
}

namespace {

// Legend entries per legend row before it wraps.
constexpr int kLegendColumns = 2;

QString format_x(double x, XAxisMode mode) {
  return QStringLiteral("%1 %2").arg(x_axis_label(mode)).arg(x, 0, 'g', mode == XAxisMode::wall_time ? 4 : 10);
}

}  // namespace

StreamingPlot::StreamingPlot(QWidget* parent) : CoalescedPlot(parent) {
  plot()->legend->setVisible(false);
  plot()->legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
  plot()->legend->setBorderPen(Qt::NoPen);
  plot()->legend->setBrush(Qt::NoBrush);
  plot()->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot()->legend->setWrap(kLegendColumns);
  plot()->legend->setMargins(QMargins(2, 0, 2, 0));
  plot()->legend->setRowSpacing(0);
  plot()->yAxis2->setVisible(false);
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
  empty_note_ = new QCPItemText(plot());
  empty_note_->position->setType(QCPItemPosition::ptAxisRectRatio);
  empty_note_->position->setCoords(0.5, 0.5);
  empty_note_->setColor(QColor(120, 120, 120));
  empty_note_->setVisible(false);
  plot()->setMouseTracking(true);
  plot()->installEventFilter(this);  // the pointer leaving the plot takes the hover with it
  connect(plot(), &QCustomPlot::mouseMove, this, &StreamingPlot::on_mouse_move);
}

StreamingPlot::~StreamingPlot() = default;

int StreamingPlot::add_curve(const QString& name, const QColor& color, CurveAxis axis, const QString& legend) {
  Curve c;
  c.name = name;
  c.color = color.isValid() ? color : curve_color(int(curves_.size()));
  c.axis = axis;
  c.ema = EmaSmoother(smoothing_);
  QCPAxis* value_axis = axis == CurveAxis::right ? plot()->yAxis2 : plot()->yAxis;
  c.raw = plot()->addGraph(plot()->xAxis, value_axis);
  QColor faint = c.color;
  faint.setAlpha(60);
  c.raw->setPen(QPen(faint, 1.0));
  c.raw->removeFromLegend();
  c.raw->setVisible(smoothing_ > 0.0);
  c.smooth = plot()->addGraph(plot()->xAxis, value_axis);
  c.smooth->setPen(QPen(c.color, 1.0));
  const QString shown = legend.isEmpty() ? name : legend;
  c.smooth->setName(axis == CurveAxis::right ? shown + tr(" (right)") : shown);
  c.raw->setAdaptiveSampling(true);
  c.smooth->setAdaptiveSampling(true);
  curves_.push_back(std::move(c));
  update_right_axis();
  return int(curves_.size()) - 1;
}

void StreamingPlot::update_right_axis() {
  bool right = false;
  QColor left_color, right_color;
  int left_count = 0, right_count = 0;
  for (const Curve& c : curves_) {
    if (c.axis == CurveAxis::right) right = true, right_color = c.color, ++right_count;
    else left_color = c.color, ++left_count;
  }
  plot()->yAxis2->setVisible(right);
  // With two axes, each axis label takes the colour of its (single) curve.
  const QColor neutral = plot()->xAxis->labelColor();
  plot()->yAxis->setLabelColor(right && left_count == 1 ? left_color : neutral);
  plot()->yAxis2->setLabelColor(right_count == 1 ? right_color : neutral);
}

int StreamingPlot::find_curve(const QString& name) const {
  for (size_t i = 0; i < curves_.size(); ++i)
    if (curves_[i].name == name) return int(i);
  return -1;
}

QString StreamingPlot::curve_name(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) ? curves_[curve].name : QString();
}

QCPAxis* StreamingPlot::value_axis(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) ? curves_[curve].smooth->valueAxis() : nullptr;
}

bool StreamingPlot::curve_visible(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) && curves_[size_t(curve)].visible;
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
  update_right_axis();
  reset_ranges();
}

void StreamingPlot::clear_data() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  for (Curve& c : curves_) c.points.clear();
  rebuild_graphs();
  reset_ranges();
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

bool StreamingPlot::curve_has_markers(int curve) const {
  return curve >= 0 && curve < int(curves_.size()) &&
         curves_[curve].smooth->scatterStyle().shape() != QCPScatterStyle::ssNone;
}

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
  autoscale_axis(CurveAxis::left);
  autoscale_axis(CurveAxis::right);
}

void StreamingPlot::autoscale_axis(CurveAxis axis) {
  const QCPRange xr = plot()->xAxis->range();
  std::vector<double> values;
  for (const Curve& c : curves_) {
    if (!c.visible || c.axis != axis) continue;
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
  if (r.valid) (axis == CurveAxis::right ? plot()->yAxis2 : plot()->yAxis)->setRange(r.lo, r.hi);
}

void StreamingPlot::set_empty_note(const QString& text) {
  empty_note_->setText(text);
  request_update();
}

QString StreamingPlot::shown_empty_note() const { return empty_note_->visible() ? empty_note_->text() : QString(); }

void StreamingPlot::update_marks() {
  const bool empty = std::none_of(curves_.begin(), curves_.end(), [](const Curve& c) { return !c.points.empty(); });
  empty_note_->setVisible(empty && !empty_note_->text().isEmpty());
  const QCPRange xr = plot()->xAxis->range();
  const int pixels = std::max(plot()->axisRect()->width(), 1);
  for (Curve& c : curves_) {
    auto data = c.smooth->data();
    const int in_view = int(data->findEnd(xr.upper, false) - data->findBegin(xr.lower, false));
    const bool sparse = in_view > 0 && in_view * kMarkerPixelsPerPoint <= pixels;
    c.smooth->setScatterStyle(sparse ? QCPScatterStyle(QCPScatterStyle::ssDisc, c.color, c.color, 5)
                                     : QCPScatterStyle(QCPScatterStyle::ssNone));
  }
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

void StreamingPlot::set_right_y_label(const QString& label) { plot()->yAxis2->setLabel(label); }

void StreamingPlot::set_legend_visible(bool on) {
  QCPLegend* legend = plot()->legend;
  QCPLayoutGrid* layout = plot()->plotLayout();
  const bool in_layout = layout->hasElement(layout->rowCount() - 1, 0) && layout->element(layout->rowCount() - 1, 0) == legend;
  if (on && !in_layout) {
    // A row of its own under the axes: the legend never covers a curve.
    plot()->axisRect()->insetLayout()->take(legend);
    layout->insertRow(layout->rowCount());
    layout->addElement(layout->rowCount() - 1, 0, legend);
    layout->setRowStretchFactor(layout->rowCount() - 1, 0.001);
  } else if (!on && in_layout) {
    layout->take(legend);
    layout->simplify();
    plot()->axisRect()->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignRight);
  }
  legend->setVisible(on);
}

void StreamingPlot::set_x_axis_mode(XAxisMode mode) {
  CoalescedPlot::set_x_axis_mode(mode);
  rebuild_graphs();
}

void StreamingPlot::set_log_y(bool on) {
  CoalescedPlot::set_log_y(on);
  plot()->yAxis2->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on) plot()->yAxis2->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  else plot()->yAxis2->setTicker(QSharedPointer<ReadableTicker>::create());
}

QString StreamingPlot::hover_text_at(double x) const {
  QStringList lines;
  for (const Curve& c : curves_) {
    if (!c.visible || c.smooth->data()->isEmpty()) continue;
    // The curve's nearest real sample, with its own x: a curve sampled every 10 steps shows
    // its sample at step 30 under a pointer at step 27, and says so.
    auto data = c.smooth->data();
    auto it = data->findBegin(x, false);
    if (it == data->constEnd()) --it;
    if (it != data->constBegin()) {
      auto prev = it - 1;
      if (std::abs(prev->key - x) < std::abs(it->key - x)) it = prev;
    }
    QString line = QStringLiteral("%1: %2").arg(c.name).arg(it->value, 0, 'g', 5);
    if (smoothing_ > 0.0 && !c.raw->data()->isEmpty()) {
      auto raw = c.raw->data()->findBegin(it->key, false);
      if (raw != c.raw->data()->constEnd()) line += tr(" (smoothed; raw %1)").arg(raw->value, 0, 'g', 5);
    }
    lines << line + QStringLiteral("  @ ") + format_x(it->key, x_axis_mode());
  }
  return lines.join('\n');
}

bool StreamingPlot::hover_visible() const { return hover_label_->visible(); }

void StreamingPlot::clear_overlays() {
  if (!tracer_->visible() && !hover_label_->visible()) return;
  tracer_->setVisible(false);
  tracer_->setGraph(nullptr);
  hover_label_->setVisible(false);
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

bool StreamingPlot::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot() && event->type() == QEvent::Leave) clear_overlays();
  return CoalescedPlot::eventFilter(watched, event);
}

void StreamingPlot::on_mouse_move(QMouseEvent* e) {
  if (curves_.empty()) return;
  const bool inside = plot()->axisRect()->rect().contains(e->pos());
  const double x = plot()->xAxis->pixelToCoord(e->pos().x());
  const QString text = inside ? hover_text_at(x) : QString();
  if (text.isEmpty()) {
    clear_overlays();
    return;
  }
  for (const Curve& c : curves_) {
    if (c.visible && !c.smooth->data()->isEmpty()) {
      tracer_->setGraph(c.smooth);
      break;
    }
  }
  tracer_->setGraphKey(x);  // not interpolating: the tracer sits on the nearest sample
  tracer_->setVisible(true);
  hover_label_->setText(text);
  hover_label_->setVisible(true);
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace mok::gui
