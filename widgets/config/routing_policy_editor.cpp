#include "widgets/config/routing_policy_editor.h"

#include <algorithm>

#include <QFormLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "widgets/config/config_field.h"

namespace mok::gui {

RoutingPolicyEditor::RoutingPolicyEditor(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  for (const ConfigKeySpec& spec : experiment_config_schema()) {
    if (spec.in_map() || spec.path.rfind("routing.", 0) != 0) continue;
    auto* field = new ConfigField(spec);
    form->addRow(QString::fromStdString(spec.field_name()), field);
    fields_ << field;
  }
  layout->addLayout(form);
  advice_ = new QLabel;
  advice_->setWordWrap(true);
  advice_->setTextFormat(Qt::RichText);
  layout->addWidget(advice_);
  layout->addStretch(1);
}

QString RoutingPolicyEditor::advice() const { return advice_->text(); }

void RoutingPolicyEditor::show_config(const ExperimentConfig& c) {
  const int ranks = std::max(1, c.parallel.ranks);
  const int experts = std::max(0, c.model.experts);
  if (experts == 0) {
    advice_->setText(tr("<i>Dense model: no routing.</i>"));
    return;
  }
  // Tokens one rank routes to one expert per step (uniform routing).
  const double tokens_per_rank = double(c.train.batch) / ranks * c.data.seq_len;
  const double per_expert = tokens_per_rank * std::min(c.model.top_k, experts) / experts;
  const double break_even = 1.5 * c.model.expert_hidden;
  QString text = tr("Each rank sends ≈ <b>%1</b> token copies per step to each expert; "
                    "fetching an expert pays above ≈ <b>%2</b> (1.5·expert_hidden).")
                     .arg(per_expert, 0, 'f', 0)
                     .arg(break_even, 0, 'f', 0);
  if (ranks == 1)
    text += tr("<br><i>One rank: every expert is local, the dispatcher moves nothing.</i>");
  else if (c.routing.dispatcher == "mok")
    text += per_expert > break_even ? tr("<br>MoK will mostly <b>shadow</b> remote experts (compute locally).")
                                    : tr("<br>MoK will mostly <b>ship tokens</b>, once per destination rank.");
  else
    text += tr("<br>Classic dispatch ships every (token, expert) pair.");
  advice_->setText(text);
}

}  // namespace mok::gui
