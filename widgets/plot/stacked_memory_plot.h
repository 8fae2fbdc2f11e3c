#pragma once
// StackedMemoryPlot: live memory by category as stacked areas over the x-axis (MiB).
// Each row carries one value per category (mem/<category>_bytes at one step); the top
// edge of the stack is the live total. The y axis names the device the figures are of.

#include <mutex>
#include <vector>

#include <QStringList>

#include "widgets/plot/coalesced_plot.h"

class QCPGraph;

namespace mok::gui {

class StackedMemoryPlot : public CoalescedPlot {
  Q_OBJECT

 public:
  explicit StackedMemoryPlot(QWidget* parent = nullptr);

  // GUI thread; resets the data.
  void set_categories(const QStringList& names);
  QStringList categories() const { return names_; }
  // Thread-safe. `bytes` has one value per category.
  void append(const MetricPoint& x, const std::vector<double>& bytes);
  void clear_data();
  int row_count() const { return int(rows_.size()); }
  // Top of the stack (MiB) of the last drained row.
  double last_total_mib() const;
  // The device of the run ("cuda:0", "cpu"): the y axis reads "GPU memory (cuda:0), MiB" or
  // "memory (cpu), MiB"; "" (not known) leaves "MiB".
  void set_device(const QString& device);
  QString y_label() const;

  void set_x_axis_mode(XAxisMode mode) override;

 protected:
  void drain() override;
  bool data_x_range(double* lo, double* hi) const override;
  void autoscale_y() override;

 private:
  struct Row {
    MetricPoint x;
    std::vector<double> bytes;
  };
  void push_rows(size_t from);

  QStringList names_;
  std::vector<QCPGraph*> graphs_;  // graphs_[i] holds the cumulative sum of categories 0..i
  std::vector<Row> rows_;
  std::mutex pending_mutex_;
  std::vector<Row> pending_;
};

}  // namespace mok::gui
