#include "widgets/plot/stacked_memory_plot.h"

#include <algorithm>

#include <qcustomplot.h>

#include "widgets/plot/streaming_plot.h"

namespace mok::gui {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

StackedMemoryPlot::StackedMemoryPlot(QWidget* parent) : CoalescedPlot(parent) {
  plot()->yAxis->setLabel(tr("MiB"));
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
  plot()->yAxis->setLabel(device.isEmpty()            ? tr("MiB")
                          : device.startsWith("cuda") ? tr("GPU memory (%1), MiB").arg(device)
                                                      : tr("memory (%1), MiB").arg(device));
  request_update();
}

QString StackedMemoryPlot::y_label() const { return plot()->yAxis->label(); }

void StackedMemoryPlot::set_categories(const QStringList& names) {
  plot()->clearGraphs();
  graphs_.clear();
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
  request_update();
}

void StackedMemoryPlot::append(const MetricPoint& x, const std::vector<double>& bytes) {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back(Row{x, bytes});
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
  request_update();
}

double StackedMemoryPlot::last_total_mib() const {
  if (graphs_.empty() || graphs_.back()->data()->isEmpty()) return 0.0;
  return (graphs_.back()->data()->constEnd() - 1)->value;
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
  plot()->yAxis->setRange(0.0, std::max(top * 1.1, 1e-3));
}

}  // namespace mok::gui
