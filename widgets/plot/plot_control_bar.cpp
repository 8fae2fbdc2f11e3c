#include "widgets/plot/plot_control_bar.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>

#include "widgets/plot/plot_group.h"

namespace mok::gui {

PlotControlBar::PlotControlBar(PlotGroup* group, QWidget* parent) : QWidget(parent), group_(group) {
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(4, 2, 4, 2);
  row->addWidget(new QLabel(tr("x-axis")));
  x_axis_ = new QComboBox;
  x_axis_->addItem(tr("step"), int(XAxisMode::step));
  x_axis_->addItem(tr("tokens"), int(XAxisMode::tokens));
  x_axis_->addItem(tr("wall time"), int(XAxisMode::wall_time));
  row->addWidget(x_axis_);
  row->addSpacing(12);
  row->addWidget(new QLabel(tr("smoothing")));
  smoothing_ = new QSlider(Qt::Horizontal);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(int(group->smoothing() * 100));
  smoothing_->setMaximumWidth(160);
  smoothing_->setToolTip(tr("Exponential moving average weight (raw curve drawn faintly behind)"));
  row->addWidget(smoothing_);
  smoothing_value_ = new QLabel(QString::number(group->smoothing(), 'f', 2));
  smoothing_value_->setMinimumWidth(32);
  row->addWidget(smoothing_value_);
  row->addSpacing(12);
  log_y_ = new QCheckBox(tr("log y"));
  row->addWidget(log_y_);
  robust_ = new QCheckBox(tr("ignore outliers"));
  robust_->setToolTip(tr("Autoscale y to the 1st..99th percentile of the visible values"));
  robust_->setChecked(group->robust_autoscale());
  row->addWidget(robust_);
  auto* reset = new QPushButton(tr("Reset zoom"));
  reset->setToolTip(tr("Follow the data again (or double-click a plot)"));
  row->addWidget(reset);
  row->addStretch(1);

  connect(x_axis_, &QComboBox::currentIndexChanged, this,
          [this] { group_->set_x_axis_mode(XAxisMode(x_axis_->currentData().toInt())); });
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) {
    group_->set_smoothing(v / 100.0);
    smoothing_value_->setText(QString::number(v / 100.0, 'f', 2));
  });
  connect(log_y_, &QCheckBox::toggled, this, [this](bool on) { group_->set_log_y(on); });
  connect(robust_, &QCheckBox::toggled, this, [this](bool on) { group_->set_robust_autoscale(on); });
  connect(reset, &QPushButton::clicked, group_, &PlotGroup::reset_view);
}

}  // namespace mok::gui
