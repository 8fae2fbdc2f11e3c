#pragma once
// MemoryEstimateBar: the estimated memory per device for the current config as one stacked
// bar per rank (parameters, gradients, optimizer state, saved activations, workspace,
// communication), against a dashed line at the device's capacity: host memory for the CPU,
// the chosen GPU's memory for cuda (DeviceCatalog::capacity_bytes). Below it, where the saved
// activations go: their three largest kinds and how each is kept (every kind in the bar's
// tooltip), as `mok plan --by-kind` lists them.

#include <QWidget>

#include "core/config/experiment_config.h"
#include "core/plan/memory_plan.h"

class QCustomPlot;
class QLabel;

namespace mok::gui {

class MemoryEstimateBar : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryEstimateBar(QWidget* parent = nullptr);
  // `capacity_bytes`: of the device rank 0 computes on; 0 when unknown (a GPU not on this
  // machine): no line, and the summary says so.
  void show_config(const ExperimentConfig& config, double capacity_bytes);
  const MemoryEstimate& estimate() const { return estimate_; }
  double capacity_bytes() const { return capacity_; }
  QCustomPlot* plot() const { return plot_; }
  // The sentence under the bar that names the largest saved-activation kinds
  // (estimate().saved_by_kind; "" when nothing is saved).
  QString saved_summary() const { return saved_summary_; }

 private:
  QCustomPlot* plot_ = nullptr;
  QLabel* summary_ = nullptr;
  MemoryEstimate estimate_;
  double capacity_ = 0.0;
  QString saved_summary_;
};

}  // namespace mok::gui
