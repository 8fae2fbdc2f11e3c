#include "widgets/plot/layer_bar_plot.h"

#include <algorithm>

#include <qcustomplot.h>

#include "widgets/plot/readable_ticker.h"

namespace mok::gui {

LayerBarPlot::LayerBarPlot(QWidget* parent) : CoalescedPlot(parent) {
  bar_series_ = new QCPBars(plot()->xAxis, plot()->yAxis);
  bar_series_->setWidth(0.6);
  bar_series_->setPen(QPen(QColor(31, 119, 180).darker(130), 1.0));
  bar_series_->setBrush(QColor(31, 119, 180, 170));
  marker_series_ = new QCPGraph(plot()->xAxis, plot()->yAxis2);
  marker_series_->setLineStyle(QCPGraph::lsNone);
  marker_series_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, QColor(214, 39, 40), 9));
  plot()->yAxis2->setVisible(true);
  if (auto t = qSharedPointerDynamicCast<ReadableTicker>(plot()->yAxis2->ticker())) t->set_whole_numbers(true);
  plot()->xAxis->setLabel(tr("layer"));
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  plot()->xAxis->setTicker(ticker);
  plot()->setInteractions(QCP::Interactions());  // a snapshot, nothing to zoom
  note_ = new QCPTextElement(plot());
  note_->setTextColor(QColor(214, 39, 40));
  note_->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
}

void LayerBarPlot::set_all_zero_note(const QString& text) {
  all_zero_note_ = text;
  request_update();
}

QString LayerBarPlot::shown_note() const { return note_->layout() ? note_->text() : QString(); }

void LayerBarPlot::set_labels(const QString& bars_label, const QString& markers_label) {
  plot()->yAxis->setLabel(bars_label);
  plot()->yAxis2->setLabel(markers_label);
  bar_series_->setName(bars_label);
  marker_series_->setName(markers_label);
}

void LayerBarPlot::set_values(const std::vector<double>& bars, const std::vector<double>& markers) {
  bars_ = bars;
  markers_ = markers;
  request_update();
}

void LayerBarPlot::drain() {
  QVector<double> keys, values;
  for (size_t i = 0; i < bars_.size(); ++i) keys << double(i), values << bars_[i];
  bar_series_->setData(keys, values, true);
  keys.clear(), values.clear();
  for (size_t i = 0; i < markers_.size(); ++i) keys << double(i), values << markers_[i];
  marker_series_->setData(keys, values, true);
  plot()->yAxis2->setVisible(!markers_.empty());
  const bool all_zero = !markers_.empty() && std::all_of(markers_.begin(), markers_.end(), [](double v) { return v == 0.0; });
  note_->setText(all_zero_note_);
  const bool show = all_zero && !all_zero_note_.isEmpty();
  QCPLayoutGrid* layout = plot()->plotLayout();
  if (show && !note_->layout()) {
    // The row above the axes (under the title, when there is one): never on the bars.
    int row = 0;
    while (row < layout->rowCount() && layout->element(row, 0) != plot()->axisRect()) ++row;
    layout->insertRow(row);
    layout->addElement(row, 0, note_);
    layout->setRowStretchFactor(row, 0.001);
  } else if (!show && note_->layout()) {
    layout->take(note_);
    layout->simplify();
  }
}

bool LayerBarPlot::data_x_range(double* lo, double* hi) const {
  const size_t n = std::max(bars_.size(), markers_.size());
  *lo = -0.6;
  *hi = std::max<double>(double(n) - 0.4, 0.6);
  return true;
}

void LayerBarPlot::autoscale_y() {
  double top = 0.0, top2 = 0.0;
  for (double v : bars_) top = std::max(top, v);
  for (double v : markers_) top2 = std::max(top2, v);
  plot()->yAxis->setRange(0.0, top > 0 ? top * 1.15 : 1.0);
  plot()->yAxis2->setRange(0.0, top2 > 0 ? top2 * 1.15 : 1.0);
}

}  // namespace mok::gui
