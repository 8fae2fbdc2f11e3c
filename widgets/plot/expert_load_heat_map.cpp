#include "widgets/plot/expert_load_heat_map.h"

#include <algorithm>

#include <qcustomplot.h>

#include "widgets/plot/readable_ticker.h"

namespace mok::gui {

ExpertLoadHeatMap::ExpertLoadHeatMap(QWidget* parent) : CoalescedPlot(parent) {
  map_ = new QCPColorMap(plot()->xAxis, plot()->yAxis);
  map_->setInterpolate(false);
  map_->setTightBoundary(false);
  scale_ = new QCPColorScale(plot());
  plot()->plotLayout()->addElement(0, 1, scale_);
  scale_->setType(QCPAxis::atRight);
  scale_->axis()->setLabel(tr("load"));
  map_->setColorScale(scale_);
  map_->setGradient(QCPColorGradient::gpThermal);
  auto* margins = new QCPMarginGroup(plot());
  plot()->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  plot()->yAxis->setLabel(tr("expert"));
  if (auto t = qSharedPointerDynamicCast<ReadableTicker>(plot()->yAxis->ticker())) t->set_whole_numbers(true);
  plot()->yAxis->setRangeReversed(false);
}

void ExpertLoadHeatMap::set_expert_count(int experts) {
  experts_ = std::max(0, experts);
  rows_.clear();
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.clear();
  }
  rebuild_map();
  request_update();
}

void ExpertLoadHeatMap::append(const MetricPoint& x, const std::vector<double>& load) {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back(Row{x, load});
  }
  request_update();
}

void ExpertLoadHeatMap::clear_data() {
  set_expert_count(experts_);
  reset_ranges();
}

void ExpertLoadHeatMap::drain() {
  std::vector<Row> batch;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;
  for (Row& r : batch) rows_.push_back(std::move(r));
  rebuild_map();
}

int ExpertLoadHeatMap::column_count() const { return map_->data()->keySize(); }

double ExpertLoadHeatMap::cell(int column, int expert) const { return map_->data()->cell(column, expert); }

void ExpertLoadHeatMap::rebuild_map() {
  if (rows_.empty() || experts_ == 0) {
    map_->data()->setSize(0, 0);
    return;
  }
  // Bin rows uniformly in x; each cell is the mean load of the rows in its bin.
  const XAxisMode mode = x_axis_mode();
  const double x0 = x_of(rows_.front().x, mode);
  const double x1 = std::max(x_of(rows_.back().x, mode), x0 + 1e-9);
  const int columns = std::min<int>(int(rows_.size()), kMaxColumns);
  std::vector<double> sum(size_t(columns) * experts_, 0.0);
  std::vector<int> count(columns, 0);
  for (const Row& r : rows_) {
    int c = columns == 1 ? 0 : int((x_of(r.x, mode) - x0) / (x1 - x0) * (columns - 1) + 0.5);
    c = std::clamp(c, 0, columns - 1);
    ++count[c];
    for (int e = 0; e < experts_ && e < int(r.load.size()); ++e) sum[size_t(c) * experts_ + e] += r.load[e];
  }
  map_->data()->setSize(columns, experts_);
  map_->data()->setRange(QCPRange(x0, columns == 1 ? x0 + 1.0 : x1), QCPRange(0, std::max(experts_ - 1, 1)));
  for (int c = 0; c < columns; ++c) {
    for (int e = 0; e < experts_; ++e) {
      // Empty bins (gaps in x) repeat the previous column so the map has no holes.
      double v = count[c] ? sum[size_t(c) * experts_ + e] / count[c] : map_->data()->cell(std::max(c - 1, 0), e);
      map_->data()->setCell(c, e, v);
    }
  }
  map_->rescaleDataRange(true);
}

void ExpertLoadHeatMap::set_x_axis_mode(XAxisMode mode) {
  CoalescedPlot::set_x_axis_mode(mode);
  rebuild_map();
}

bool ExpertLoadHeatMap::data_x_range(double* lo, double* hi) const {
  if (rows_.empty()) return false;
  *lo = x_of(rows_.front().x, x_axis_mode());
  *hi = x_of(rows_.back().x, x_axis_mode());
  return true;
}

void ExpertLoadHeatMap::autoscale_y() { plot()->yAxis->setRange(-0.5, std::max(experts_, 1) - 0.5); }

}  // namespace mok::gui
