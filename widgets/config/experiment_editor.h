#pragma once
// ExperimentEditor: the experiment config as a form generated from the schema (one page per
// section), a YAML text view kept in step with it (edit either; YAML edits apply after a
// short pause), the device chooser, the rank-schedule and routing-policy editors and the
// memory estimate, and every validation problem shown at its field and in a list — the
// config checks' and what the trainer would refuse on this machine (a GPU run where no GPU
// is usable). Presets are the YAML files in experiments/. The devices offered are this
// machine's (DeviceCatalog::of_this_machine at construction) unless set_device_catalog says
// otherwise. Settings that are valid but make little sense together are warnings: shown
// with the reason, never blocking a launch. The preset box shows a preset only while the
// editor holds exactly that preset; choosing another loads it (asking first when that
// would replace edits).

#include <map>

#include <QMultiMap>
#include <QStringList>
#include <QWidget>

#include "core/config/experiment_config.h"
#include "widgets/config/device_catalog.h"

class QComboBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QTimer;

namespace mok::gui {

class ConfigField;
class DeviceChooser;
class MemoryEstimateBar;
class RankScheduleEditor;
class RoutingPolicyEditor;
class SectionPages;

class ExperimentEditor : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kYamlDebounceMs = 400;

  explicit ExperimentEditor(QWidget* parent = nullptr);

  void set_config(const ExperimentConfig& config);
  const ExperimentConfig& config() const { return config_; }
  QString yaml_text() const;
  // Replaces the YAML text as a user would and applies it now; false (and `error`) when it
  // does not parse or check — the form then keeps the last good config.
  bool apply_yaml_text(const QString& text, QString* error = nullptr);
  // Applies an edit as if typed into the form field `path`.
  bool edit_field(const QString& path, const QString& text);

  ConfigField* field(const QString& path) const;  // the form's field for a key
  QStringList issues() const;                     // "key: message", all current problems
  bool is_valid() const { return issues_.isEmpty(); }
  QStringList warnings() const { return warnings_; }  // "key: message", never blocking

  void set_presets_dir(const QString& dir);
  QStringList preset_names() const;
  bool load_preset(const QString& name_or_path, QString* error = nullptr);
  QComboBox* preset_box() const { return presets_; }
  QLabel* yaml_status() const { return yaml_status_; }
  QListWidget* issue_list() const { return issue_list_; }
  // The config came from the last session, not from a preset: the preset box says so.
  void mark_restored_config();
  void set_device_catalog(const DeviceCatalog& catalog);
  const DeviceCatalog& device_catalog() const { return catalog_; }

  QPlainTextEdit* yaml_view() const { return yaml_; }
  DeviceChooser* device_chooser() const { return device_; }
  RankScheduleEditor* schedule_editor() const { return schedule_; }
  RoutingPolicyEditor* routing_editor() const { return routing_; }
  MemoryEstimateBar* memory_bar() const { return memory_; }

  static QString default_presets_dir();

 signals:
  void config_changed();
  void validity_changed(bool valid);

 private:
  void register_field(ConfigField* f);
  void on_field_edited(const QString& path, const QString& text);
  // Applies (key, text) edits as one change: the config, then the fields, YAML and checks once.
  void apply_edits(const QList<QPair<QString, QString>>& edits, ConfigField* source = nullptr);
  void show_device_catalog(const DeviceCatalog& catalog);
  void on_yaml_timer();
  void refresh_fields(const QString& except_path = QString(), ConfigField* except = nullptr);
  void write_yaml();
  void validate();
  void show_yaml_error(int line, const QString& message);
  void update_preset_box();
  void on_preset_chosen(int index);

  ExperimentConfig config_;
  DeviceCatalog catalog_;
  QMultiMap<QString, ConfigField*> fields_;   // every editor of a key
  std::map<QString, ConfigField*> form_fields_;
  std::map<QString, QString> edit_errors_;    // key → message from a rejected edit
  QString yaml_error_key_, yaml_error_;
  QStringList issues_;
  QStringList warnings_;
  QString preset_path_;           // the preset loaded last ("" when none)
  std::string preset_yaml_;       // its config as YAML: the editor holds it while equal
  QString origin_;                // what the config came from when not a preset
  bool was_valid_ = true;
  bool writing_yaml_ = false;

  QComboBox* presets_ = nullptr;
  QString presets_dir_;
  SectionPages* sections_ = nullptr;
  QPlainTextEdit* yaml_ = nullptr;
  QLabel* yaml_status_ = nullptr;
  QTimer* yaml_timer_ = nullptr;
  QListWidget* issue_list_ = nullptr;
  DeviceChooser* device_ = nullptr;
  RankScheduleEditor* schedule_ = nullptr;
  RoutingPolicyEditor* routing_ = nullptr;
  MemoryEstimateBar* memory_ = nullptr;
};

}  // namespace mok::gui
