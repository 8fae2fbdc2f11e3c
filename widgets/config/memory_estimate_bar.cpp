#include "widgets/config/memory_estimate_bar.h"

#include <algorithm>
#include <stdexcept>

#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "core/train/rank_device.h"
#include "widgets/models/run_record.h"
#include "widgets/plot/streaming_plot.h"

namespace mok::gui {

MemoryEstimateBar::MemoryEstimateBar(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  plot_ = new QCustomPlot;
  plot_->setMinimumHeight(190);
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 2)));
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  plot_->yAxis->setLabel(tr("GiB (estimate)"));
  plot_->xAxis->setLabel(tr("device"));
  layout->addWidget(plot_, 1);
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
}

void MemoryEstimateBar::show_config(const ExperimentConfig& c, double capacity_bytes) {
  estimate_ = estimate_memory(c);
  capacity_ = capacity_bytes;
  // GiB for real models, MiB for toy ones, so the bar is never a sliver.
  const bool small = estimate_.total_bytes() < 1024.0 * 1024.0 * 1024.0;
  const double kGiB = small ? 1024.0 * 1024.0 : 1024.0 * 1024.0 * 1024.0;
  plot_->yAxis->setLabel(small ? tr("MiB (estimate)") : tr("GiB (estimate)"));
  plot_->clearPlottables();
  plot_->clearItems();
  const int ranks = std::clamp(c.parallel.ranks, 1, 16);
  QVector<double> keys;
  QVector<QString> labels;
  // Each rank's device as the trainer will place it ("cuda:1"); ranks on the CPU share it.
  auto label_of = [&](int r) {
    if (c.parallel.device != "cuda") return tr("cpu %1").arg(r);
    try {
      return QString::fromStdString(plan_rank_device(c, r, std::max(1, c.parallel.ranks), r).label());
    } catch (const std::runtime_error&) {
      return tr("gpu %1").arg(r);
    }
  };
  for (int r = 0; r < ranks; ++r) keys << r, labels << label_of(r);
  QCPBars* below = nullptr;
  int i = 0;
  for (const MemoryEstimate::Part& part : estimate_.parts) {
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars->setName(QString::fromStdString(part.category));
    QColor color = curve_color(i++);
    bars->setPen(QPen(color.darker(130), 1));
    bars->setBrush(color);
    bars->setWidth(0.6);
    QVector<double> v(keys.size(), part.bytes / kGiB);
    bars->setData(keys, v, true);
    if (below) bars->moveAbove(below);
    below = bars;
  }
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  ticker->addTicks(keys, labels);
  plot_->xAxis->setTicker(ticker);
  // Room on the right for the legend, so it never hides a bar.
  plot_->xAxis->setRange(-0.7, ranks - 0.3 + 1.6);
  const double total = estimate_.total_bytes();
  auto* line = new QCPItemStraightLine(plot_);
  line->point1->setCoords(0, capacity_ / kGiB);
  line->point2->setCoords(1, capacity_ / kGiB);
  line->setPen(QPen(QColor(198, 40, 40), 1.5, Qt::DashLine));
  const double top = std::max(total / kGiB, 1e-6);
  // Show the capacity line only when it is within reach of the bar, else note it in text.
  const bool capacity_visible = capacity_ > 0 && capacity_ < total * 4.0;
  line->setVisible(capacity_visible);
  plot_->yAxis->setRange(0, (capacity_visible ? std::max(top, capacity_ / kGiB) : top) * 1.15);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  const double share = capacity_ > 0 ? total / capacity_ : 0.0;
  const QString parameters = tr("%1 parameters (%2 per device).")
                                 .arg(format_count(estimate_.parameter_count), format_count(estimate_.device_parameter_count));

  // Where the saved activations go: the three largest kinds here, all of them in the tooltip.
  const double saved = estimate_.bytes_of("saved_activations");
  saved_summary_.clear();
  QString table = tr("<b>Saved activations by kind</b> (summed over layers)<table>");
  int named = 0;
  for (const SavedKindBytes& k : estimate_.saved_by_kind) {
    const double of_saved = saved > 0 ? 100.0 * k.bytes / saved : 0.0;
    table += QString("<tr><td>%1</td><td>%2</td><td align=right>%3</td><td align=right>%4%</td></tr>")
                 .arg(QString::fromStdString(k.kind), QString::fromStdString(k.kept), format_bytes(k.bytes))
                 .arg(of_saved, 0, 'f', 1);
    if (k.bytes <= 0 || named == 3) continue;
    saved_summary_ += (named++ ? ", " : "") + tr("%1 %2% (%3)")
                                                  .arg(QString::fromStdString(k.kind))
                                                  .arg(of_saved, 0, 'f', 0)
                                                  .arg(QString::fromStdString(k.kept));
  }
  table += "</table>";
  if (!saved_summary_.isEmpty()) saved_summary_ = tr("Saved activations: %1.").arg(saved_summary_);
  plot_->setToolTip(estimate_.saved_by_kind.empty() ? QString() : table);
  if (capacity_ > 0)
    summary_->setText(tr("<b>%1</b> per device (estimate) of %2 capacity: %3%. %4 %5")
                          .arg(format_bytes(total), format_bytes(capacity_))
                          .arg(share * 100.0, 0, 'f', share < 0.01 ? 2 : 0)
                          .arg(parameters, saved_summary_));
  else
    summary_->setText(tr("<b>%1</b> per device (estimate); capacity unknown: that GPU is not on this machine. %2 %3")
                          .arg(format_bytes(total), parameters, saved_summary_));
  summary_->setStyleSheet(share > 1.0 ? "color: #c62828;" : "");
}

}  // namespace mok::gui
