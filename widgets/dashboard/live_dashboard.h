#pragma once
// LiveDashboard: every live figure of one run, fed MetricRows on the GUI thread:
//   loss (train, val) · validation bpb and perplexity (an axis each) · tokens/s · memory by
//   category at its peak within the step (stacked; over ranks the rank that peaked highest,
//   named in the title) · saved-activation MiB and kitten rank
//   per layer · bytes between ranks by purpose (MiB per step) with the time spent in
//   communication (ms per step, the right axis), titled "Between GPUs" on a GPU run ·
//   expert-load heat map (one layer at a time) · learning rate and gradient norm (an axis each).
// One PlotControlBar drives all plots (x-axis step/tokens/time, smoothing, log y,
// outlier-robust autoscale); x zoom is linked across them.

#include <map>
#include <vector>

#include <QStringList>
#include <QWidget>

#include "core/events/metric_event.h"

class QComboBox;
class QLabel;

namespace mok::gui {

class StreamingPlot;
class StackedMemoryPlot;
class ExpertLoadHeatMap;
class LayerBarPlot;
class PlotGroup;
class CoalescedPlot;

class LiveDashboard : public QWidget {
  Q_OBJECT

 public:
  // The byte curves of the comm plot, in MiB per step, each a recorded metric: the total,
  // then by purpose (dispatch, combine, gradients, weights fetched for shadow experts,
  // control messages).
  static QStringList comm_byte_curves();

  explicit LiveDashboard(QWidget* parent = nullptr);

  void clear();
  void add_rows(const std::vector<MetricRow>& rows);
  void set_title(const QString& text);
  // Where the run computes and in which precision ("cuda:0", "bf16"): shown beside the title
  // and on the memory plot's axis. Empty strings: not known.
  void set_device(const QString& device, const QString& precision);
  // The memory plan's total per rank (bytes; NaN: none), drawn on the memory plot.
  void set_planned_bytes(double bytes);
  QString device_text() const;
  QString title() const;

  int rows_seen() const { return rows_seen_; }
  int64_t last_step() const { return last_step_; }
  StreamingPlot* loss_plot() const { return loss_; }
  StreamingPlot* validation_plot() const { return validation_; }
  StreamingPlot* throughput_plot() const { return throughput_; }
  StackedMemoryPlot* memory_plot() const { return memory_; }
  LayerBarPlot* layer_plot() const { return layers_; }
  StreamingPlot* comm_plot() const { return comm_; }
  StreamingPlot* optimizer_plot() const { return optimizer_; }
  ExpertLoadHeatMap* heat_map() const { return heat_; }
  PlotGroup* group() const { return group_; }
  QList<CoalescedPlot*> plots() const;

 private:
  void on_heat_layer_changed();
  void show_comm_device(const QString& device);
  void show_memory_rank(int rank);  // −1: one rank
  void update_layer_bars();

  PlotGroup* group_ = nullptr;
  QLabel* title_ = nullptr;
  QLabel* device_ = nullptr;
  StreamingPlot* loss_ = nullptr;
  StreamingPlot* validation_ = nullptr;
  StreamingPlot* throughput_ = nullptr;
  StreamingPlot* optimizer_ = nullptr;
  StackedMemoryPlot* memory_ = nullptr;
  LayerBarPlot* layers_ = nullptr;
  StreamingPlot* comm_ = nullptr;
  ExpertLoadHeatMap* heat_ = nullptr;
  QComboBox* heat_layer_ = nullptr;

  int rows_seen_ = 0;
  int64_t last_step_ = -1;
  // Expert load per layer as rows (x, load per expert), kept so the layer can be switched.
  struct LoadRow {
    int64_t step, tokens;
    double wall_s;
    std::vector<double> load;
  };
  std::map<int, std::vector<LoadRow>> loads_;
  std::map<int, double> saved_bytes_by_layer_;  // latest row
  std::map<int, double> rank_by_layer_;
};

}  // namespace mok::gui
