#pragma once
// LayerBarPlot: the latest value per layer as bars (e.g. saved-activation MiB per layer),
// with an optional second series per layer drawn as markers on the right axis (e.g. the
// kitten rank each layer uses now). When every marker is 0 the markers would sit on the
// axis unseen, so a note above the axes says what the zeros mean (set_all_zero_note).

#include <vector>

#include "widgets/plot/coalesced_plot.h"

class QCPBars;
class QCPGraph;
class QCPTextElement;

namespace mok::gui {

class LayerBarPlot : public CoalescedPlot {
  Q_OBJECT

 public:
  explicit LayerBarPlot(QWidget* parent = nullptr);

  void set_labels(const QString& bars_label, const QString& markers_label);
  // GUI thread. Values indexed by layer; an empty vector hides that series.
  void set_values(const std::vector<double>& bars, const std::vector<double>& markers);
  std::vector<double> bar_values() const { return bars_; }
  std::vector<double> marker_values() const { return markers_; }
  // Text shown on the plot while every marker value is 0 (e.g. "no layer keeps a low-rank input").
  void set_all_zero_note(const QString& text);
  // The note as shown now; empty when hidden.
  QString shown_note() const;

 protected:
  void drain() override;
  bool data_x_range(double* lo, double* hi) const override;
  void autoscale_y() override;

 private:
  std::vector<double> bars_;
  std::vector<double> markers_;
  QCPBars* bar_series_ = nullptr;
  QCPGraph* marker_series_ = nullptr;
  QCPTextElement* note_ = nullptr;  // in a layout row of its own while shown
  QString all_zero_note_;
};

}  // namespace mok::gui
