#pragma once
// ComparePage: runs side by side. Pick runs (one pinned as baseline); see one metric's
// curves overlaid (the baseline drawn black), a summary table with ratios to the baseline,
// and a config diff (with each run's machine under environment.*) that can hide the keys on
// which every run agrees. A note above the plot names the runs that computed on other
// hardware than the baseline (CPU, BLAS kernel family, GPU): their figures agree with the
// baseline's to float precision, not bitwise.

#include <utility>
#include <vector>

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "core/store/run_environment.h"

namespace mok {
class RunStore;
}

class QCheckBox;
class QComboBox;
class QLabel;
class QListWidget;
class QTableView;

namespace mok::gui {

class CompareSummaryModel;
class ConfigDiffModel;
class PlotGroup;
class RunManager;
class StreamingPlot;

class ComparePage : public QWidget {
  Q_OBJECT

 public:
  ComparePage(RunManager* runs, QWidget* parent = nullptr);

  void refresh_run_list();
  void set_runs(const QList<qint64>& run_ids);  // checks these runs, first is the baseline
  QList<qint64> checked_runs() const;
  void set_baseline(qint64 run_id);
  void set_metric(const QString& name);

  StreamingPlot* plot() const { return plot_; }
  CompareSummaryModel* summary() const { return summary_; }
  QTableView* summary_view() const { return summary_view_; }
  ConfigDiffModel* diff() const { return diff_; }
  QLabel* hardware_note() const { return hardware_note_; }  // shown only when hardware differs
  // Shown when checked runs of another setting share seeds with the baseline's setting: the
  // metric's difference paired by seed (core/store/paired_comparison.h).
  QLabel* seeds_note() const { return seeds_note_; }

 private:
  void rebuild();
  // Shows the note when any run's environment differs from the baseline's (runs[base_row]).
  void update_hardware_note(const std::vector<std::pair<QString, mok::RunEnvironment>>& runs, int base_row);
  // The seeds note's lines for the checked runs against the baseline run's setting (empty:
  // no setting shares a seed with it), and the note showing them.
  QStringList seeds_note_lines(mok::RunStore& store, const QList<qint64>& ids, qint64 base_run) const;
  void show_seeds_note(const QStringList& lines);

  RunManager* runs_;
  QListWidget* list_ = nullptr;
  QComboBox* baseline_ = nullptr;
  QComboBox* metric_ = nullptr;
  QCheckBox* only_diff_ = nullptr;
  QLabel* hardware_note_ = nullptr;
  QLabel* seeds_note_ = nullptr;
  PlotGroup* group_ = nullptr;
  StreamingPlot* plot_ = nullptr;
  CompareSummaryModel* summary_ = nullptr;
  ConfigDiffModel* diff_ = nullptr;
  QTableView* summary_view_ = nullptr;
  QTableView* diff_view_ = nullptr;
  bool rebuilding_ = false;
};

}  // namespace mok::gui
