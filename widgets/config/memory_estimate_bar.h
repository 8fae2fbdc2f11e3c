#pragma once
// MemoryEstimateBar: the estimated memory per device for the current config as one stacked
// bar per rank (parameters, gradients, optimizer state, saved activations, workspace,
// communication), against a dashed line at the device's capacity.

#include <QWidget>

#include "core/config/experiment_config.h"
#include "widgets/config/memory_estimate.h"

class QCustomPlot;
class QLabel;

namespace mok::gui {

class MemoryEstimateBar : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryEstimateBar(QWidget* parent = nullptr);
  void show_config(const ExperimentConfig& config);
  // Capacity of one device in bytes; 0 = host memory for CPU runs.
  void set_device_capacity(double bytes);
  const MemoryEstimate& estimate() const { return estimate_; }
  double capacity_bytes() const { return capacity_; }
  QCustomPlot* plot() const { return plot_; }

 private:
  QCustomPlot* plot_ = nullptr;
  QLabel* summary_ = nullptr;
  MemoryEstimate estimate_;
  double device_capacity_ = 0.0;
  double capacity_ = 0.0;
};

}  // namespace mok::gui
