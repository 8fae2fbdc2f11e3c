#pragma once
// RoutingPolicyEditor: dispatcher, policy, capacity and locality margin, with a line that
// says what the cost model will prefer for these settings: a rank sends ~n tokens to each
// remote expert per step; fetching the expert ("shadowing") pays above ~1.5·expert_hidden.

#include <QList>
#include <QWidget>

#include "core/config/experiment_config.h"

class QLabel;

namespace mok::gui {

class ConfigField;

class RoutingPolicyEditor : public QWidget {
  Q_OBJECT

 public:
  explicit RoutingPolicyEditor(QWidget* parent = nullptr);
  QList<ConfigField*> fields() const { return fields_; }
  void show_config(const ExperimentConfig& config);
  QString advice() const;

 private:
  QList<ConfigField*> fields_;
  QLabel* advice_ = nullptr;
};

}  // namespace mok::gui
