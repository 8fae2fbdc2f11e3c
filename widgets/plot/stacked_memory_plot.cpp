#include "widgets/plot/stacked_memory_plot.h"

#include <algorithm>

#include <qcustomplot.h>

#include "widgets/plot/streaming_plot.h"

namespace mok::gui {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

StackedMemoryPlot::StackedMemoryPlot(QWidget* parent) : CoalescedPlot(parent) {
  set_device(QString());
  plot()->legend->setVisible(true);
  plot()->legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
  // The stack fills the axis rect, so the legend sits beside it, not on it.
  auto* side = new QCPLayoutGrid;
  plot()->plotLayout()->addElement(0, 1, side);
  plot()->axisRect()->insetLayout()->take(plot()->legend);
  side->addElement(0, 0, plot()->legend);
  side->setMargins(QMargins(0, 0, 4, 0));
  plot()->plotLayout()->setColumnStretchFactor(1, 0.001);
  plot()->legend->setBorderPen(Qt::NoPen);
}

void StackedMemoryPlot::set_device(const QString& device) {
  plot()->yAxis->setLabel(device.isEmpty()            ? tr("peak in step, MiB")
                          : device.startsWith("cuda") ? tr("GPU memory (%1), peak in step, MiB").arg(device)
                                                      : tr("memory (%1), peak in step, MiB").arg(device));
  request_update();
}

QString StackedMemoryPlot::y_label() const { return plot()->yAxis->label(); }

void StackedMemoryPlot::set_planned_mib(double mib) {
  planned_mib_ = mib;
  if (!plan_line_) {
    plan_line_ = new QCPItemStraightLine(plot());
    plan_line_->setPen(QPen(QColor(90, 90, 90), 1.2, Qt::DotLine));
    plan_label_ = new QCPItemText(plot());
    plan_label_->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);  // at the right: past the first steps' spike
    plan_label_->setColor(QColor(90, 90, 90));
    plan_label_->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
    plan_label_->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    plan_label_->position->setTypeY(QCPItemPosition::ptPlotCoords);
  }
  const bool show = std::isfinite(mib) && mib > 0;
  plan_line_->setVisible(show);
  plan_label_->setVisible(show);
  if (show) {
    plan_line_->point1->setCoords(0.0, mib);
    plan_line_->point2->setCoords(1.0, mib);
    plan_label_->position->setCoords(0.99, mib);
    plan_label_->setText(tr("plan %1 MiB").arg(mib, 0, 'f', mib < 10 ? 1 : 0));
  }
  autoscale_y();
  request_update();
}

bool StackedMemoryPlot::planned_line_visible() const { return plan_line_ && plan_line_->visible(); }

void StackedMemoryPlot::set_categories(const QStringList& names) {
  plot()->clearGraphs();
  graphs_.clear();
  peak_line_ = nullptr;
  rows_.clear();
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  names_ = names;
  QCPGraph* below = nullptr;
  for (int i = 0; i < names.size(); ++i) {
    QCPGraph* g = plot()->addGraph();
    QColor c = curve_color(i);
    g->setPen(QPen(c.darker(120), 1.0));
    QColor fill = c;
    fill.setAlpha(110);
    g->setBrush(fill);
    g->setName(names[i]);
    g->setAdaptiveSampling(true);
    if (below) g->setChannelFillGraph(below);
    graphs_.push_back(g);
    below = g;
  }
  peak_line_ = plot()->addGraph();
  peak_line_->setPen(QPen(QColor(40, 40, 40), 1.2, Qt::DashLine));
  peak_line_->setName(tr("peak, all categories"));
  peak_line_->setAdaptiveSampling(true);
  request_update();
}

void StackedMemoryPlot::append(const MetricPoint& x, const std::vector<double>& bytes, double peak_total_bytes) {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back(Row{x, bytes, peak_total_bytes});
  }
  request_update();
}

void StackedMemoryPlot::clear_data() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  rows_.clear();
  for (QCPGraph* g : graphs_) g->data()->clear();
  if (peak_line_) peak_line_->data()->clear();
  reset_ranges();
}

double StackedMemoryPlot::last_total_mib() const {
  if (graphs_.empty() || graphs_.back()->data()->isEmpty()) return 0.0;
  return (graphs_.back()->data()->constEnd() - 1)->value;
}

double StackedMemoryPlot::last_peak_mib() const {
  if (!peak_line_ || peak_line_->data()->isEmpty()) return NAN;
  return (peak_line_->data()->constEnd() - 1)->value;
}

double StackedMemoryPlot::last_category_mib(int category) const {
  if (category < 0 || category >= int(graphs_.size()) || graphs_[size_t(category)]->data()->isEmpty()) return 0.0;
  const double top = (graphs_[size_t(category)]->data()->constEnd() - 1)->value;
  const double below = category == 0 ? 0.0 : (graphs_[size_t(category) - 1]->data()->constEnd() - 1)->value;
  return top - below;
}

void StackedMemoryPlot::push_rows(size_t from) {
  const int n = int(rows_.size() - from);
  if (n <= 0 || graphs_.empty()) return;
  QVector<double> keys(n);
  std::vector<QVector<double>> sums(graphs_.size(), QVector<double>(n));
  for (int r = 0; r < n; ++r) {
    const Row& row = rows_[from + r];
    keys[r] = x_of(row.x, x_axis_mode());
    double acc = 0.0;
    for (size_t c = 0; c < graphs_.size(); ++c) {
      acc += (c < row.bytes.size() ? row.bytes[c] : 0.0) / kMiB;
      sums[c][r] = acc;
    }
  }
  for (size_t c = 0; c < graphs_.size(); ++c) graphs_[c]->addData(keys, sums[c], false);
  QVector<double> peak_keys, peaks;
  for (int r = 0; r < n; ++r)
    if (std::isfinite(rows_[from + r].peak_total_bytes)) peak_keys << keys[r], peaks << rows_[from + r].peak_total_bytes / kMiB;
  if (peak_line_ && !peaks.isEmpty()) peak_line_->addData(peak_keys, peaks, false);
}

void StackedMemoryPlot::drain() {
  std::vector<Row> batch;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;
  const size_t first = rows_.size();
  for (Row& r : batch) rows_.push_back(std::move(r));
  push_rows(first);
}

void StackedMemoryPlot::set_x_axis_mode(XAxisMode mode) {
  CoalescedPlot::set_x_axis_mode(mode);
  for (QCPGraph* g : graphs_) g->data()->clear();
  if (peak_line_) peak_line_->data()->clear();
  push_rows(0);
}

bool StackedMemoryPlot::data_x_range(double* lo, double* hi) const {
  if (graphs_.empty() || graphs_.back()->data()->isEmpty()) return false;
  *lo = graphs_.back()->data()->constBegin()->key;
  *hi = (graphs_.back()->data()->constEnd() - 1)->key;
  return true;
}

void StackedMemoryPlot::autoscale_y() {
  if (graphs_.empty()) return;
  bool found = false;
  QCPRange r = graphs_.back()->getValueRange(found, QCP::sdBoth, plot()->xAxis->range());
  double top = found ? r.upper : 1.0;
  bool peak_found = false;
  const QCPRange p = peak_line_ ? peak_line_->getValueRange(peak_found, QCP::sdBoth, plot()->xAxis->range()) : QCPRange();
  if (peak_found) top = std::max(top, p.upper);
  if (std::isfinite(planned_mib_) && planned_mib_ > 0) top = std::max(top, planned_mib_);
  plot()->yAxis->setRange(0.0, std::max(top * 1.1, 1e-3));
}

}  // namespace mok::gui
