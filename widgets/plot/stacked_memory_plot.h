#pragma once
// StackedMemoryPlot: memory by category as stacked areas over the x-axis (MiB), each
// category at the figure that decides whether a step fits: its peak within the step where
// the trainer records one (saved activations), and a dashed line at the recorded peak of
// all categories together. The y axis says so and names the device the figures are of. A
// dotted horizontal line marks the memory plan's total for the run (core/plan), so the
// prediction and the measurement are seen together.

#include <cmath>
#include <mutex>
#include <vector>

#include <QStringList>

#include "widgets/plot/coalesced_plot.h"

class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;

namespace mok::gui {

class StackedMemoryPlot : public CoalescedPlot {
  Q_OBJECT

 public:
  explicit StackedMemoryPlot(QWidget* parent = nullptr);

  // GUI thread; resets the data.
  void set_categories(const QStringList& names);
  QStringList categories() const { return names_; }
  // Thread-safe. `bytes` has one value per category; `peak_total_bytes` is the peak of all
  // categories together within the step (NaN: not recorded, no line).
  void append(const MetricPoint& x, const std::vector<double>& bytes, double peak_total_bytes = NAN);
  void clear_data();
  int row_count() const { return int(rows_.size()); }
  // Top of the stack (MiB) of the last drained row.
  double last_total_mib() const;
  // The recorded peak of all categories (MiB) of the last drained row; NaN when none.
  double last_peak_mib() const;
  // Stack height (MiB) of category `category` alone in the last drained row.
  double last_category_mib(int category) const;
  // The device of the run ("cuda:0", "cpu"): the y axis reads "GPU memory (cuda:0), peak in
  // step, MiB" or "memory (cpu), peak in step, MiB"; "" (not known) leaves "peak in step, MiB".
  void set_device(const QString& device);
  QString y_label() const;
  // The plan's total per rank (MiB) as a labelled dotted line; NaN hides it.
  void set_planned_mib(double mib);
  double planned_mib() const { return planned_mib_; }
  bool planned_line_visible() const;

  void set_x_axis_mode(XAxisMode mode) override;

 protected:
  void drain() override;
  bool data_x_range(double* lo, double* hi) const override;
  void autoscale_y() override;

 private:
  struct Row {
    MetricPoint x;
    std::vector<double> bytes;
    double peak_total_bytes = NAN;
  };
  void push_rows(size_t from);

  QStringList names_;
  std::vector<QCPGraph*> graphs_;  // graphs_[i] holds the cumulative sum of categories 0..i
  QCPGraph* peak_line_ = nullptr;  // peak of all categories together
  QCPItemStraightLine* plan_line_ = nullptr;
  QCPItemText* plan_label_ = nullptr;
  double planned_mib_ = NAN;
  std::vector<Row> rows_;
  std::mutex pending_mutex_;
  std::vector<Row> pending_;
};

}  // namespace mok::gui
