#include "widgets/workbench/compare_page.h"

#include <algorithm>
#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "core/store/paired_comparison.h"
#include "core/store/run_store.h"
#include "widgets/models/compare_summary_model.h"
#include "widgets/models/config_diff_model.h"
#include "widgets/models/flatten_yaml.h"
#include "widgets/models/run_label.h"
#include "widgets/plot/metric_unit.h"
#include "widgets/plot/plot_control_bar.h"
#include "widgets/plot/plot_group.h"
#include "widgets/plot/streaming_plot.h"
#include "widgets/workbench/run_manager.h"

namespace mok::gui {

ComparePage::ComparePage(RunManager* runs, QWidget* parent) : QWidget(parent), runs_(runs) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* split = new QSplitter(Qt::Horizontal);
  layout->addWidget(split);

  auto* left = new QWidget;
  auto* ll = new QVBoxLayout(left);
  ll->setContentsMargins(0, 0, 0, 0);
  ll->addWidget(new QLabel(tr("Runs to compare")));
  list_ = new QListWidget;
  list_->setMinimumWidth(230);
  ll->addWidget(list_, 1);
  auto* refresh = new QPushButton(tr("Refresh list"));
  ll->addWidget(refresh);
  ll->addWidget(new QLabel(tr("Baseline")));
  baseline_ = new QComboBox;
  ll->addWidget(baseline_);
  split->addWidget(left);

  auto* right = new QWidget;
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(0, 0, 0, 0);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Metric")));
  metric_ = new QComboBox;
  metric_->setEditable(true);
  metric_->setMinimumWidth(220);
  for (const char* m : {"train/loss", "val/loss", "val/bpb", "val/ppl", "perf/tokens_per_s", "mem/peak_bytes",
                        "mem/peak_saved_activation_bytes", "comm/remote_bytes", "train/grad_norm", "train/lr"})
    metric_->addItem(m);
  top->addWidget(metric_);
  group_ = new PlotGroup(this);
  top->addWidget(new PlotControlBar(group_), 1);
  rl->addLayout(top);
  hardware_note_ = new QLabel;
  hardware_note_->setWordWrap(true);
  hardware_note_->setTextFormat(Qt::PlainText);
  hardware_note_->setStyleSheet("QLabel { background: #fff4d6; border: 1px solid #e0b44c; padding: 4px; }");
  hardware_note_->setVisible(false);
  rl->addWidget(hardware_note_);
  seeds_note_ = new QLabel;
  seeds_note_->setWordWrap(true);
  seeds_note_->setTextFormat(Qt::PlainText);
  seeds_note_->setStyleSheet("QLabel { background: #e8f1fb; border: 1px solid #8fb3dd; padding: 4px; }");
  seeds_note_->setVisible(false);
  rl->addWidget(seeds_note_);
  auto* vsplit = new QSplitter(Qt::Vertical);
  plot_ = new StreamingPlot;
  plot_->set_legend_visible(true);
  group_->add(plot_);
  vsplit->addWidget(plot_);
  auto* tabs = new QTabWidget;
  summary_ = new CompareSummaryModel(this);
  summary_view_ = new QTableView;
  summary_view_->setModel(summary_);
  summary_view_->verticalHeader()->setVisible(false);
  summary_view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  summary_view_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);  // two-line cells
  tabs->addTab(summary_view_, tr("Summary"));
  auto* diff_box = new QWidget;
  auto* dl = new QVBoxLayout(diff_box);
  dl->setContentsMargins(0, 0, 0, 0);
  only_diff_ = new QCheckBox(tr("only keys that differ"));
  only_diff_->setChecked(true);
  dl->addWidget(only_diff_);
  diff_ = new ConfigDiffModel(this);
  diff_->set_only_differences(true);
  diff_view_ = new QTableView;
  diff_view_->setModel(diff_);
  diff_view_->verticalHeader()->setVisible(false);
  diff_view_->verticalHeader()->setDefaultSectionSize(20);
  diff_view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  dl->addWidget(diff_view_, 1);
  tabs->addTab(diff_box, tr("Config diff"));
  vsplit->addWidget(tabs);
  vsplit->setStretchFactor(0, 3);
  vsplit->setStretchFactor(1, 2);
  rl->addWidget(vsplit, 1);
  split->addWidget(right);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 4);

  connect(refresh, &QPushButton::clicked, this, &ComparePage::refresh_run_list);
  connect(list_, &QListWidget::itemChanged, this, &ComparePage::rebuild);
  connect(baseline_, &QComboBox::activated, this, &ComparePage::rebuild);
  connect(metric_, &QComboBox::currentTextChanged, this, &ComparePage::rebuild);
  connect(only_diff_, &QCheckBox::toggled, diff_, &ConfigDiffModel::set_only_differences);
}

void ComparePage::refresh_run_list() {
  const QList<qint64> checked = checked_runs();
  rebuilding_ = true;
  list_->clear();
  try {
    if (QFileInfo::exists(runs_->db_path())) {
      RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
      for (const mok::RunSummary& s : store.list_runs()) {
        auto* item = new QListWidgetItem(QStringLiteral("%1 (%2)").arg(run_label(QString::fromStdString(s.name), s.id),
                                                                        QString::fromUtf8(run_status_name(s.status))));
        item->setData(Qt::UserRole, qint64(s.id));
        item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
        item->setCheckState(checked.contains(s.id) ? Qt::Checked : Qt::Unchecked);
        list_->addItem(item);
      }
    }
  } catch (...) {
  }
  rebuilding_ = false;
  rebuild();
}

QList<qint64> ComparePage::checked_runs() const {
  QList<qint64> out;
  for (int i = 0; i < list_->count(); ++i)
    if (list_->item(i)->checkState() == Qt::Checked) out << list_->item(i)->data(Qt::UserRole).toLongLong();
  return out;
}

void ComparePage::set_runs(const QList<qint64>& run_ids) {
  refresh_run_list();
  rebuilding_ = true;
  for (int i = 0; i < list_->count(); ++i)
    list_->item(i)->setCheckState(run_ids.contains(list_->item(i)->data(Qt::UserRole).toLongLong()) ? Qt::Checked : Qt::Unchecked);
  rebuilding_ = false;
  rebuild();
  if (!run_ids.isEmpty()) set_baseline(run_ids.front());
}

void ComparePage::set_baseline(qint64 run_id) {
  const int i = baseline_->findData(run_id);
  if (i >= 0) baseline_->setCurrentIndex(i);
  rebuild();
}

void ComparePage::set_metric(const QString& name) { metric_->setCurrentText(name); }

void ComparePage::rebuild() {
  if (rebuilding_) return;
  rebuilding_ = true;
  const QList<qint64> ids = checked_runs();
  const qint64 base_id = baseline_->currentData().toLongLong();
  baseline_->clear();
  plot_->remove_all_curves();
  std::vector<CompareSummaryModel::Row> rows;
  std::vector<ConfigDiffModel::RunConfig> configs;
  std::vector<std::pair<QString, mok::RunEnvironment>> environments;  // (run label, environment)
  int base_row = 0;
  QStringList seed_lines;
  try {
    RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
    const std::string metric = metric_->currentText().toStdString();
    const MetricUnit unit = metric_unit(metric_->currentText());
    qint64 base_run = 0;
    for (qint64 id : ids) {
      const mok::RunRecord rec = store.get_run(id);
      const QString name = run_label(QString::fromStdString(rec.summary.name), id);
      baseline_->addItem(name, id);
      const bool is_base = id == base_id || (base_id == 0 && rows.empty());
      if (is_base) {
        base_row = int(rows.size());
        base_run = id;
      }
      CompareSummaryModel::Row row;
      row.name = name;
      const mok::RunSummary& s = rec.summary;
      if (std::isfinite(s.best_val_bpb)) row.values["val/bpb"] = s.best_val_bpb;
      if (std::isfinite(s.best_val_ppl)) row.values["val/ppl"] = s.best_val_ppl;
      if (std::isfinite(s.tokens_per_s)) row.values["perf/tokens_per_s"] = s.tokens_per_s;
      if (std::isfinite(s.peak_bytes)) row.values["mem/peak_bytes"] = s.peak_bytes;
      row.values["wall_s"] = s.wall_s;
      const auto loss = store.metric_series(id, "train/loss");
      if (!loss.empty()) row.values["train/loss"] = loss.back().value;
      double peak_saved = NAN, remote = 0;
      for (const auto& p : store.metric_series(id, "mem/peak_saved_activation_bytes"))
        peak_saved = std::isfinite(peak_saved) ? std::max(peak_saved, p.value) : p.value;
      if (std::isfinite(peak_saved)) row.values["mem/peak_saved_activation_bytes"] = peak_saved;
      const auto rb = store.metric_series(id, "comm/remote_bytes");
      for (const auto& p : rb) remote += p.value;
      if (!rb.empty()) row.values["comm/remote_bytes"] = remote / double(rb.size());
      rows.push_back(std::move(row));

      ConfigDiffModel::RunConfig cfg;
      cfg.name = name;
      try {
        for (const auto& [k, v] : flatten_yaml(rec.config_yaml)) cfg.values[QString::fromStdString(k)] = QString::fromStdString(v);
      } catch (...) {
      }
      if (rec.environment.recorded) {
        for (const EnvironmentTextField& f : environment_text_fields())
          cfg.values[QStringLiteral("environment.") + f.key] = QString::fromStdString(rec.environment.*f.member);
        cfg.values["environment.threads"] = QString::number(rec.environment.threads);
      } else {
        cfg.values["environment"] = tr("not recorded");
      }
      configs.push_back(std::move(cfg));
      environments.emplace_back(name, rec.environment);

      std::vector<MetricPoint> pts;
      for (const auto& p : store.metric_series(id, metric))
        pts.push_back(MetricPoint{p.step, p.tokens, p.wall_s, p.value / unit.divisor});
      const int c = plot_->add_curve(is_base ? name + tr(" (baseline)") : name,
                                     is_base ? QColor(20, 20, 20) : curve_color(int(rows.size())));
      plot_->append(c, pts);
    }
    seed_lines = seeds_note_lines(store, ids, base_run);
  } catch (...) {
  }
  const int bi = baseline_->findData(base_id);
  baseline_->setCurrentIndex(bi >= 0 ? bi : 0);
  summary_->set_rows(rows);
  summary_->set_baseline(base_row);
  diff_->set_runs(configs);
  diff_->set_baseline(base_row);
  plot_->set_title(metric_->currentText());
  plot_->set_y_label(metric_unit(metric_->currentText()).axis_label(metric_->currentText()));
  plot_->reset_view();
  update_hardware_note(environments, base_row);
  show_seeds_note(seed_lines);
  rebuilding_ = false;
}

QStringList ComparePage::seeds_note_lines(mok::RunStore& store, const QList<qint64>& ids, qint64 base_run) const {
  QStringList lines;
  const std::vector<int64_t> runs(ids.begin(), ids.end());
  auto percent = [](double v) { return QString::asprintf("%+.2f %%", v); };
  for (const mok::SettingComparison& s :
       mok::compare_settings_by_seed(store, runs, base_run, metric_->currentText().toStdString())) {
    const mok::PairedComparison& c = s.paired;
    const QString who = tr("the setting of %1 (%n run(s))", "", int(s.runs.size()))
                            .arg(run_label(QString::fromStdString(store.get_run(s.first_run).summary.name), s.first_run));
    if (c.pairs.size() >= 2)
      lines << tr("%1: %2 ± %3 (standard error) over %4 seeds, 95 % interval %5 to %6; higher than the "
                  "baseline's run on %7 of them")
                   .arg(who, percent(c.mean_percent), QString::asprintf("%.2f %%", c.standard_error_percent))
                   .arg(c.pairs.size())
                   .arg(percent(c.low95_percent), percent(c.high95_percent))
                   .arg(c.other_above);
    else
      lines << tr("%1: %2 on one seed (no spread to judge it by)").arg(who, percent(c.mean_percent));
  }
  return lines;
}

void ComparePage::show_seeds_note(const QStringList& lines) {
  const QString metric = metric_->currentText();
  seeds_note_->setVisible(!lines.isEmpty());
  if (lines.isEmpty()) {
    seeds_note_->clear();
    return;
  }
  seeds_note_->setText(tr("%1 against the baseline's setting, paired by seed (runs that differ only by seed are one "
                          "setting):\n")
                           .arg(metric) +
                       lines.join('\n'));
}

void ComparePage::update_hardware_note(const std::vector<std::pair<QString, mok::RunEnvironment>>& runs, int base_row) {
  QStringList lines;
  if (base_row < int(runs.size())) {
    const mok::RunEnvironment& base = runs[size_t(base_row)].second;
    for (int r = 0; r < int(runs.size()); ++r) {
      if (r == base_row) continue;
      const auto differences = environment_differences(base, runs[size_t(r)].second);
      if (!differences.empty())
        lines << QStringLiteral("%1: %2").arg(runs[size_t(r)].first, QString::fromStdString(describe_differences(differences)));
    }
  }
  hardware_note_->setVisible(!lines.isEmpty());
  if (lines.isEmpty()) {
    hardware_note_->clear();
    return;
  }
  hardware_note_->setText(tr("Runs from other (or unknown) hardware than the baseline: their figures agree with "
                             "the baseline's to float precision, not bitwise (docs/training.md, Reproducibility).\n") +
                          lines.join('\n'));
}

}  // namespace mok::gui
