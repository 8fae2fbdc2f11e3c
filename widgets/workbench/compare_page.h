#pragma once
// ComparePage: runs side by side. Pick runs (one pinned as baseline); see one metric's
// curves overlaid (the baseline drawn black), a summary table with ratios to the baseline,
// and a config diff that can hide the keys on which every run agrees.

#include <QList>
#include <QWidget>

class QCheckBox;
class QComboBox;
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
  ConfigDiffModel* diff() const { return diff_; }

 private:
  void rebuild();

  RunManager* runs_;
  QListWidget* list_ = nullptr;
  QComboBox* baseline_ = nullptr;
  QComboBox* metric_ = nullptr;
  QCheckBox* only_diff_ = nullptr;
  PlotGroup* group_ = nullptr;
  StreamingPlot* plot_ = nullptr;
  CompareSummaryModel* summary_ = nullptr;
  ConfigDiffModel* diff_ = nullptr;
  QTableView* summary_view_ = nullptr;
  QTableView* diff_view_ = nullptr;
  bool rebuilding_ = false;
};

}  // namespace mok::gui
