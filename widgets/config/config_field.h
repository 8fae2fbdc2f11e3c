#pragma once
// ConfigField: the editor of one config key, built from its schema row: a check box for
// bools, a combo for keys with choices, a line edit otherwise (numbers too: what is typed
// stays as typed, "-5" included, and the checks flag it; nothing is clamped or dropped).
// A typed edit applies after a short pause or at Return/leaving the field, whichever comes
// first. It shows a validation message in place (red frame and the text under the editor),
// or a warning (amber). Several fields may edit the same key (the form, the rank-schedule
// and routing editors); the ExperimentEditor keeps them in step.

#include <QWidget>

#include "core/config/config_schema.h"

class QLabel;
class QCheckBox;
class QComboBox;
class QLineEdit;
class QTimer;

namespace mok::gui {

class ConfigField : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kTypingPauseMs = 300;

  ConfigField(const ConfigKeySpec& spec, QWidget* parent = nullptr);

  QString path() const { return path_; }
  ConfigType type() const { return type_; }
  // The value as text: YAML scalar for numbers and bools, the raw string for strings.
  QString value_text() const;
  // Sets the editor without emitting edited().
  void set_value_text(const QString& text);
  void set_issue(const QString& message);  // empty clears
  QString issue() const { return issue_; }
  void set_warning(const QString& message);  // shown when there is no issue; empty clears
  QString warning() const { return warning_; }
  QWidget* editor() const { return editor_; }
  // Disables one choice of a combo (e.g. "cuda" where no GPU is present).
  void set_choice_enabled(const QString& choice, bool enabled, const QString& why = QString());

  // Text of `spec` in `config`, as value_text() would show it.
  static QString text_of(const ConfigKeySpec& spec, const ExperimentConfig& config);

 signals:
  void edited(const QString& path, const QString& text);

 private:
  void emit_edit();
  void show_message();

  QString path_;
  ConfigType type_;
  QWidget* editor_ = nullptr;
  QCheckBox* check_ = nullptr;
  QComboBox* combo_ = nullptr;
  QLineEdit* line_ = nullptr;
  QTimer* typing_ = nullptr;
  QLabel* message_ = nullptr;
  QString issue_;
  QString warning_;
  bool setting_ = false;
};

}  // namespace mok::gui
