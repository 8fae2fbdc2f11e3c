#pragma once
// ExpertLoadHeatMap: the load of each expert (routed tokens or their share) over training, one layer at a time
// (moe/load/layer<L>/expert<E>). Columns are x (step/tokens/time) binned to at most
// kMaxColumns, rows are experts; colour is the load.

#include <mutex>
#include <vector>

#include "widgets/plot/coalesced_plot.h"

class QCPColorMap;
class QCPColorScale;

namespace mok::gui {

class ExpertLoadHeatMap : public CoalescedPlot {
  Q_OBJECT

 public:
  static constexpr int kMaxColumns = 400;

  explicit ExpertLoadHeatMap(QWidget* parent = nullptr);

  void set_expert_count(int experts);  // GUI thread; resets the data
  int expert_count() const { return experts_; }
  // Thread-safe: load per expert at one x.
  void append(const MetricPoint& x, const std::vector<double>& load);
  void clear_data();
  int row_count() const { return int(rows_.size()); }
  // Cell value (column, expert) of the displayed map, for tests.
  double cell(int column, int expert) const;
  int column_count() const;

  void set_x_axis_mode(XAxisMode mode) override;

 protected:
  void drain() override;
  bool data_x_range(double* lo, double* hi) const override;
  void autoscale_y() override;

 private:
  struct Row {
    MetricPoint x;
    std::vector<double> load;
  };
  void rebuild_map();

  int experts_ = 0;
  std::vector<Row> rows_;
  std::mutex pending_mutex_;
  std::vector<Row> pending_;
  QCPColorMap* map_ = nullptr;
  QCPColorScale* scale_ = nullptr;
};

}  // namespace mok::gui
