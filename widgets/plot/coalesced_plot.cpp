#include "widgets/plot/coalesced_plot.h"

#include <QFileDialog>
#include <QFontMetrics>
#include <QMenu>
#include <QTimer>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "widgets/plot/readable_ticker.h"

namespace mok::gui {

CoalescedPlot::CoalescedPlot(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = new QCustomPlot(this);
  layout->addWidget(plot_);
  // Thin pens, no antialiasing on data: the cheapest lines that still read well.
  plot_->setNotAntialiasedElements(QCP::aePlottables | QCP::aeGrid | QCP::aeSubGrid | QCP::aeAxes |
                                   QCP::aeItems | QCP::aeFills);
  plot_->setNoAntialiasingOnDrag(true);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->xAxis->setLabel(x_axis_label(x_mode_));
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis, plot_->yAxis2}) axis->setTicker(QSharedPointer<ReadableTicker>::create());
  qSharedPointerCast<ReadableTicker>(plot_->xAxis->ticker())->set_whole_numbers(x_mode_ != XAxisMode::wall_time);
  connect(plot_, &QCustomPlot::beforeReplot, this, &CoalescedPlot::fit_ticks);
  plot_->setMinimumSize(160, 110);
  connect(plot_, &QCustomPlot::afterReplot, this, [this] { ++replot_count_; });
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          &CoalescedPlot::on_x_range_changed);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { emit view_reset_requested(); reset_view(); });

  // Right-click: save this plot, or follow the data again.
  plot_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(plot_, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
    QMenu menu(this);
    menu.addAction(tr("Save as PNG…"), this, [this] {
      const QString path = QFileDialog::getSaveFileName(this, tr("Save plot"), title_ + ".png", tr("PNG image (*.png)"));
      if (!path.isEmpty()) export_png(path, 0, 0);
    });
    menu.addAction(tr("Save as PDF…"), this, [this] {
      const QString path = QFileDialog::getSaveFileName(this, tr("Save plot"), title_ + ".pdf", tr("PDF (*.pdf)"));
      if (!path.isEmpty()) export_pdf(path, 0, 0);
    });
    menu.addSeparator();
    menu.addAction(tr("Reset zoom"), this, [this] {
      emit view_reset_requested();
      reset_view();
    });
    menu.exec(plot_->mapToGlobal(pos));
  });

  timer_ = new QTimer(this);
  timer_->setSingleShot(true);
  timer_->setInterval(kReplotIntervalMs);
  connect(timer_, &QTimer::timeout, this, &CoalescedPlot::on_timer);
}

CoalescedPlot::~CoalescedPlot() = default;

void CoalescedPlot::set_title(const QString& title) {
  title_ = title;
  if (!title_element_) {
    plot_->plotLayout()->insertRow(0);
    title_element_ = new QCPTextElement(plot_, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    plot_->plotLayout()->addElement(0, 0, title_element_);
    plot_->plotLayout()->setRowStretchFactor(0, 0.001);
  } else {
    title_element_->setText(title);
  }
}

void CoalescedPlot::fit_ticks() {
  // The axis rect's size from the last layout; before the first one, the widget's.
  const QRect r = plot_->axisRect()->rect();
  const int width = r.width() > 10 ? r.width() : plot_->width() * 3 / 4;
  const int height = r.height() > 10 ? r.height() : plot_->height() * 2 / 3;
  // Labels as wide as the longer end of the range (what the axis will print, near enough).
  const QFontMetrics metrics(plot_->xAxis->tickLabelFont());
  const QCPRange xr = plot_->xAxis->range();
  const int label_width = std::max(metrics.horizontalAdvance(QString::number(xr.lower, 'g', 6)),
                                   metrics.horizontalAdvance(QString::number(xr.upper, 'g', 6)));
  if (auto t = qSharedPointerDynamicCast<ReadableTicker>(plot_->xAxis->ticker())) t->fit_to_length(width, label_width);
  for (QCPAxis* axis : {plot_->yAxis, plot_->yAxis2})
    if (auto t = qSharedPointerDynamicCast<ReadableTicker>(axis->ticker()))
      t->fit_to_length(height, QFontMetrics(axis->tickLabelFont()).height());
}

void CoalescedPlot::request_update() {
  if (!scheduled_.exchange(true)) {
    QMetaObject::invokeMethod(this, [this] { timer_->start(); }, Qt::QueuedConnection);
  }
}

void CoalescedPlot::on_timer() {
  scheduled_.store(false);
  drain();
  if (!isVisible()) {
    stale_ = true;  // hidden pages cost no painting
    return;
  }
  apply_view();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CoalescedPlot::flush() {
  scheduled_.store(false);
  timer_->stop();
  drain();
  apply_view();
  plot_->replot(QCustomPlot::rpImmediateRefresh);
}

void CoalescedPlot::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (stale_) {
    stale_ = false;
    apply_view();
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
}

void CoalescedPlot::apply_view() {
  if (follow_x_) {
    double lo = 0, hi = 0;
    if (data_x_range(&lo, &hi)) {
      if (hi <= lo) {  // one x: centre it, so a single point is not drawn on the frame
        const double half = std::max(1.0, std::abs(lo) * 0.05);
        lo -= half;
        hi += half;
      }
      set_x_range_programmatically(lo, hi);
    }
  }
  autoscale_y();
  update_marks();
}

void CoalescedPlot::reset_ranges() {
  clear_overlays();
  follow_x_ = true;
  set_x_range_programmatically(0.0, 1.0);
  plot_->yAxis->setRange(0.0, 1.0);
  plot_->yAxis2->setRange(0.0, 1.0);
  request_update();
}

void CoalescedPlot::set_x_range_programmatically(double lo, double hi) {
  programmatic_ = true;
  plot_->xAxis->setRange(lo, hi);
  programmatic_ = false;
}

void CoalescedPlot::on_x_range_changed(const QCPRange& r) {
  if (programmatic_) return;
  follow_x_ = false;
  autoscale_y();
  update_marks();
  emit user_x_range_changed(r.lower, r.upper);
}

void CoalescedPlot::set_linked_x_range(double lo, double hi) {
  follow_x_ = false;
  set_x_range_programmatically(lo, hi);
  autoscale_y();
  update_marks();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CoalescedPlot::reset_view() {
  follow_x_ = true;
  apply_view();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CoalescedPlot::set_x_axis_mode(XAxisMode mode) {
  x_mode_ = mode;
  plot_->xAxis->setLabel(x_axis_label(mode));
  if (auto t = qSharedPointerDynamicCast<ReadableTicker>(plot_->xAxis->ticker()))
    t->set_whole_numbers(mode != XAxisMode::wall_time);
  follow_x_ = true;
  request_update();
}

void CoalescedPlot::set_log_y(bool on) {
  log_y_ = on;
  plot_->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on)
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  else
    plot_->yAxis->setTicker(QSharedPointer<ReadableTicker>::create());
  request_update();
}

bool CoalescedPlot::export_png(const QString& path, int width, int height) {
  clear_overlays();
  flush();
  return plot_->savePng(path, width, height);
}

bool CoalescedPlot::export_pdf(const QString& path, int width, int height) {
  clear_overlays();
  flush();
  return plot_->savePdf(path, width, height);
}

}  // namespace mok::gui
