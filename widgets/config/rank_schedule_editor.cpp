#include "widgets/config/rank_schedule_editor.h"

#include <algorithm>

#include <QFormLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "widgets/config/config_field.h"
#include "widgets/config/rank_schedule_curve.h"

namespace mok::gui {

RankScheduleEditor::RankScheduleEditor(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  // Every kitten key that shapes the schedule; keys the schema gains later show up here too.
  for (const ConfigKeySpec& spec : experiment_config_schema()) {
    const std::string& p = spec.path;
    if (spec.in_map() || p.rfind("kittens.", 0) != 0) continue;
    const bool schedule_key = p == "kittens.mode" || p == "kittens.rank" || p.find("schedule") != std::string::npos ||
                              p.find("_rank") != std::string::npos || p == "kittens.warmup_steps" ||
                              p == "kittens.target_error" || p.find("step_") != std::string::npos;
    if (!schedule_key) continue;
    auto* field = new ConfigField(spec);
    form->addRow(QString::fromStdString(spec.field_name()), field);
    fields_ << field;
  }
  layout->addLayout(form);
  plot_ = new QCustomPlot;
  plot_->setMinimumHeight(120);
  plot_->xAxis->setLabel(tr("step"));
  plot_->yAxis->setLabel(tr("rank"));
  plot_->setNotAntialiasedElements(QCP::aeAll);
  layout->addWidget(plot_, 1);
  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setStyleSheet("color: gray; font-size: small;");
  layout->addWidget(note_);
}

void RankScheduleEditor::show_config(const ExperimentConfig& config) {
  const std::vector<RankAtStep> curve = rank_schedule_curve(config);
  plot_->clearGraphs();
  plot_->clearItems();
  QVector<double> steps, ranks, lo, hi;
  int64_t exact_until = -1;
  // Scale to the curve (and the adaptive band), not to an unused max_rank.
  int top = config.kittens.schedule == "adaptive" ? std::max(config.kittens.max_rank, config.kittens.rank) : 1;
  for (const RankAtStep& p : curve) {
    steps << double(p.step);
    ranks << double(p.rank);
    lo << double(config.kittens.min_rank);
    hi << double(config.kittens.max_rank);
    if (p.exact) exact_until = p.step;
    top = std::max(top, p.rank);
  }
  const bool adaptive = config.kittens.schedule == "adaptive";
  if (adaptive) {
    QCPGraph* g_lo = plot_->addGraph();
    QCPGraph* g_hi = plot_->addGraph();
    g_lo->setData(steps, lo, true);
    g_hi->setData(steps, hi, true);
    g_lo->setPen(QPen(QColor(44, 160, 44, 120), 1, Qt::DashLine));
    g_hi->setPen(QPen(QColor(44, 160, 44, 120), 1, Qt::DashLine));
    g_hi->setBrush(QColor(44, 160, 44, 35));
    g_hi->setChannelFillGraph(g_lo);
  }
  QCPGraph* g = plot_->addGraph();
  g->setLineStyle(QCPGraph::lsStepLeft);
  g->setPen(QPen(QColor(31, 119, 180), 1.5));
  g->setData(steps, ranks, true);
  if (exact_until >= 0) {
    auto* rect = new QCPItemRect(plot_);
    rect->topLeft->setCoords(0, top * 1.15);
    rect->bottomRight->setCoords(double(exact_until), 0);
    rect->setPen(Qt::NoPen);
    rect->setBrush(QColor(255, 127, 14, 50));
    auto* label = new QCPItemText(plot_);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->position->setCoords(0.0, top * 1.14);
    label->setText(config.kittens.mode == "exact" ? tr("mode exact: full activations") : tr("exact warm-up"));
    label->setColor(QColor(190, 90, 0));
  }
  plot_->xAxis->setRange(0, std::max(1, config.train.steps));
  plot_->yAxis->setRange(0, top * 1.15 + 1);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  drawn_ = int(curve.size());
  rank_end_ = curve.empty() ? 0 : curve.back().rank;
  note_->setText(adaptive ? tr("Adaptive: starts at rank; the controller keeps the reconstruction error under "
                               "target_error by moving within the band.")
                          : (rank_schedule_from_core() ? QString() : tr("Preview from the workbench's own evaluator.")));
}

}  // namespace mok::gui
