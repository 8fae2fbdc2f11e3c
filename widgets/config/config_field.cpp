#include "widgets/config/config_field.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QStandardItemModel>
#include <QTimer>
#include <QVBoxLayout>

namespace mok::gui {

ConfigField::ConfigField(const ConfigKeySpec& spec, QWidget* parent)
    : QWidget(parent), path_(QString::fromStdString(spec.path)), type_(spec.type) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(1);
  const QString tip = QStringLiteral("<b>%1</b> (%2, default %3)<br>%4")
                          .arg(path_, config_type_name(spec.type), QString::fromStdString(spec.default_text),
                               QString::fromStdString(spec.meaning).toHtmlEscaped());
  if (spec.type == ConfigType::Bool) {
    check_ = new QCheckBox;
    editor_ = check_;
    connect(check_, &QCheckBox::toggled, this, &ConfigField::emit_edit);
  } else if (!spec.choices.empty()) {
    combo_ = new QComboBox;
    for (const std::string& c : spec.choices) combo_->addItem(QString::fromStdString(c));
    editor_ = combo_;
    connect(combo_, &QComboBox::currentIndexChanged, this, &ConfigField::emit_edit);
  } else {
    line_ = new QLineEdit;
    editor_ = line_;
    if (spec.type == ConfigType::Real || spec.type == ConfigType::UInt || spec.type == ConfigType::Int)
      line_->setAlignment(Qt::AlignRight);
    auto apply_typed = [this] {
      typing_->stop();
      if (line_->isModified()) {
        line_->setModified(false);
        emit_edit();
      }
    };
    // Typing applies after a pause (the YAML follows without Tab); Return or leaving the
    // field applies at once.
    typing_ = new QTimer(this);
    typing_->setSingleShot(true);
    typing_->setInterval(kTypingPauseMs);
    connect(typing_, &QTimer::timeout, this, apply_typed);
    connect(line_, &QLineEdit::textEdited, typing_, qOverload<>(&QTimer::start));
    connect(line_, &QLineEdit::editingFinished, this, apply_typed);
  }
  editor_->setToolTip(tip);
  editor_->setObjectName(path_);
  layout->addWidget(editor_);
  message_ = new QLabel;
  message_->setWordWrap(true);
  message_->setStyleSheet("color: #c62828; font-size: small;");
  message_->setVisible(false);
  layout->addWidget(message_);
}

QString ConfigField::text_of(const ConfigKeySpec& spec, const ExperimentConfig& config) {
  std::optional<ConfigValue> v = spec.get(config, std::string());
  if (!v) return {};
  if (auto* s = std::get_if<std::string>(&*v)) return QString::fromStdString(*s);
  return QString::fromStdString(format_config_value(*v));
}

QString ConfigField::value_text() const {
  if (check_) return check_->isChecked() ? QStringLiteral("true") : QStringLiteral("false");
  if (combo_) return combo_->currentText();
  return line_->text();
}

void ConfigField::set_value_text(const QString& text) {
  setting_ = true;
  if (check_) check_->setChecked(text == "true");
  else if (combo_) {
    int i = combo_->findText(text);
    if (i < 0) {
      combo_->addItem(text);  // a value the schema does not list: show it, validation says why
      i = combo_->count() - 1;
    }
    combo_->setCurrentIndex(i);
  } else if (line_->text() != text) {
    line_->setText(text);
    line_->setModified(false);
  }
  setting_ = false;
}

void ConfigField::emit_edit() {
  if (!setting_) emit edited(path_, value_text());
}

void ConfigField::set_issue(const QString& message) {
  if (message == issue_) return;
  issue_ = message;
  show_message();
}

void ConfigField::set_warning(const QString& message) {
  if (message == warning_) return;
  warning_ = message;
  show_message();
}

void ConfigField::show_message() {
  const bool issue = !issue_.isEmpty();
  const bool warning = !issue && !warning_.isEmpty();
  message_->setText(issue ? issue_ : warning_);
  message_->setVisible(issue || warning);
  message_->setStyleSheet(issue ? QStringLiteral("color: #c62828; font-size: small;")
                                : QStringLiteral("color: #a15c00; font-size: small;"));
  editor_->setStyleSheet(issue     ? QStringLiteral("border: 1px solid #c62828; background: #fdecea;")
                         : warning ? QStringLiteral("border: 1px solid #e0a030; background: #fff6e0;")
                                   : QString());
}

void ConfigField::set_choice_enabled(const QString& choice, bool enabled, const QString& why) {
  if (!combo_) return;
  auto* model = qobject_cast<QStandardItemModel*>(combo_->model());
  const int i = combo_->findText(choice);
  if (!model || i < 0) return;
  model->item(i)->setEnabled(enabled);
  model->item(i)->setToolTip(enabled ? QString() : why);
}

}  // namespace mok::gui
