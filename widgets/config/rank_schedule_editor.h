#pragma once
// RankScheduleEditor: the kitten schedule keys next to a plot of rank over the run's steps,
// redrawn as the keys change. The exact warm-up is shaded; the adaptive schedule shows the
// band [min_rank, max_rank] its controller may move in.

#include <QList>
#include <QWidget>

#include "core/config/experiment_config.h"

class QCustomPlot;
class QLabel;

namespace mok::gui {

class ConfigField;

class RankScheduleEditor : public QWidget {
  Q_OBJECT

 public:
  explicit RankScheduleEditor(QWidget* parent = nullptr);
  QList<ConfigField*> fields() const { return fields_; }
  void show_config(const ExperimentConfig& config);
  QCustomPlot* plot() const { return plot_; }
  // Points of the last drawn curve (step, rank) for tests.
  int drawn_points() const { return drawn_; }
  int drawn_rank_at_end() const { return rank_end_; }

 private:
  QList<ConfigField*> fields_;
  QCustomPlot* plot_ = nullptr;
  QLabel* note_ = nullptr;
  int drawn_ = 0;
  int rank_end_ = 0;
};

}  // namespace mok::gui
