#include "widgets/plot/coalesced_plot.h"

#include <QFileDialog>
#include <QMenu>
#include <QTimer>
#include <QVBoxLayout>
#include <qcustomplot.h>

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
  if (plot_->plotLayout()->rowCount() == 1) {
    plot_->plotLayout()->insertRow(0);
    auto* t = new QCPTextElement(plot_, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    plot_->plotLayout()->addElement(0, 0, t);
  } else if (auto* t = qobject_cast<QCPTextElement*>(plot_->plotLayout()->element(0, 0))) {
    t->setText(title);
  }
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
      if (hi <= lo) hi = lo + 1.0;
      set_x_range_programmatically(lo, hi);
    }
  }
  autoscale_y();
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
  emit user_x_range_changed(r.lower, r.upper);
}

void CoalescedPlot::set_linked_x_range(double lo, double hi) {
  follow_x_ = false;
  set_x_range_programmatically(lo, hi);
  autoscale_y();
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
  follow_x_ = true;
  request_update();
}

void CoalescedPlot::set_log_y(bool on) {
  log_y_ = on;
  plot_->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (on)
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  else
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  request_update();
}

bool CoalescedPlot::export_png(const QString& path, int width, int height) {
  flush();
  return plot_->savePng(path, width, height);
}

bool CoalescedPlot::export_pdf(const QString& path, int width, int height) {
  flush();
  return plot_->savePdf(path, width, height);
}

}  // namespace mok::gui
