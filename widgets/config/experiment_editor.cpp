#include "widgets/config/experiment_editor.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTextBlock>
#include <QTimer>
#include <QVBoxLayout>

#include "core/config/config_io.h"
#include "core/train/trainer.h"
#include "widgets/config/config_field.h"
#include "widgets/config/config_warnings.h"
#include "widgets/config/device_chooser.h"
#include "widgets/config/memory_estimate_bar.h"
#include "widgets/config/rank_schedule_editor.h"
#include "widgets/config/routing_policy_editor.h"
#include "widgets/config/section_pages.h"

namespace mok::gui {

namespace {

QString section_of(const std::string& path) {
  const auto dot = path.find('.');
  return dot == std::string::npos ? QStringLiteral("general") : QString::fromStdString(path.substr(0, dot));
}

// The config key a message starts with ("parallel.device: cuda: …", "train.batch (8) …"),
// or "" when it starts with none.
QString leading_key(const std::string& message) {
  size_t n = 0;
  while (n < message.size() && (std::islower(static_cast<unsigned char>(message[n])) ||
                                std::isdigit(static_cast<unsigned char>(message[n])) || message[n] == '.' ||
                                message[n] == '_'))
    ++n;
  const std::string key = message.substr(0, n);
  return find_config_key(key) ? QString::fromStdString(key) : QString();
}

QWidget* scrolled(QWidget* inner) {
  auto* area = new QScrollArea;
  area->setWidget(inner);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  return area;
}

}  // namespace

QString ExperimentEditor::default_presets_dir() {
  const QByteArray env = qgetenv("MOK_EXPERIMENTS_DIR");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  const QString beside = QCoreApplication::applicationDirPath() + "/../experiments";
  if (QFileInfo(beside + "/quickstart.yaml").exists()) return QDir::cleanPath(beside);
  return QStringLiteral(MOK_SOURCE_DIR "/experiments");
}

ExperimentEditor::ExperimentEditor(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Preset")));
  presets_ = new QComboBox;
  presets_->setMinimumWidth(220);
  presets_->setToolTip(tr("Choosing a preset loads it into the editor"));
  top->addWidget(presets_);
  top->addStretch(1);
  layout->addLayout(top);
  connect(presets_, &QComboBox::activated, this, &ExperimentEditor::on_preset_chosen);

  auto* split = new QSplitter(Qt::Horizontal);
  layout->addWidget(split, 1);

  // Form: one page per section, generated from the schema rows (per-layer rows stay in YAML).
  sections_ = new SectionPages;
  std::map<QString, QFormLayout*> forms;
  for (const ConfigKeySpec& spec : experiment_config_schema()) {
    if (spec.in_map()) continue;
    const QString section = section_of(spec.path);
    QFormLayout*& form = forms[section];
    if (!form) {
      auto* page = new QWidget;
      form = new QFormLayout(page);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      sections_->add_page(section, scrolled(page));
    }
    auto* field = new ConfigField(spec);
    auto* label = new QLabel(QString::fromStdString(spec.field_name()));
    label->setToolTip(QString::fromStdString(spec.meaning));
    form->addRow(label, field);
    form_fields_[field->path()] = field;
    register_field(field);
  }
  split->addWidget(sections_);

  auto* yaml_box = new QWidget;
  auto* yaml_layout = new QVBoxLayout(yaml_box);
  yaml_layout->setContentsMargins(0, 0, 0, 0);
  yaml_ = new QPlainTextEdit;
  yaml_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  yaml_->setLineWrapMode(QPlainTextEdit::NoWrap);
  yaml_->setTabChangesFocus(false);
  yaml_layout->addWidget(new QLabel(tr("YAML (edit either side)")));
  yaml_layout->addWidget(yaml_, 1);
  yaml_status_ = new QLabel;
  yaml_status_->setWordWrap(true);
  yaml_layout->addWidget(yaml_status_);
  split->addWidget(yaml_box);

  auto* side = new QWidget;
  auto* side_layout = new QVBoxLayout(side);
  side_layout->setContentsMargins(0, 0, 0, 0);
  auto* device_box = new QGroupBox(tr("Device"));
  (new QVBoxLayout(device_box))->addWidget(device_ = new DeviceChooser);
  auto* schedule_box = new QGroupBox(tr("Rank schedule"));
  (new QVBoxLayout(schedule_box))->addWidget(schedule_ = new RankScheduleEditor);
  auto* routing_box = new QGroupBox(tr("Routing policy"));
  (new QVBoxLayout(routing_box))->addWidget(routing_ = new RoutingPolicyEditor);
  auto* memory_box = new QGroupBox(tr("Memory per device (estimate)"));
  (new QVBoxLayout(memory_box))->addWidget(memory_ = new MemoryEstimateBar);
  // Where the run computes, then whether it fits there.
  side_layout->addWidget(device_box, 0);
  side_layout->addWidget(memory_box, 3);
  side_layout->addWidget(schedule_box, 3);
  side_layout->addWidget(routing_box, 2);
  split->addWidget(scrolled(side));
  for (ConfigField* f : device_->fields()) register_field(f);
  connect(device_, &DeviceChooser::placement_chosen, this, [this](int first_gpu, int gpu_count) {
    apply_edits(device_placement_edits(config_, first_gpu, gpu_count));
  });
  for (ConfigField* f : schedule_->fields()) register_field(f);
  for (ConfigField* f : routing_->fields()) register_field(f);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 4);

  issue_list_ = new QListWidget;
  issue_list_->setMaximumHeight(72);
  layout->addWidget(issue_list_);
  connect(issue_list_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    if (ConfigField* f = field(item->data(Qt::UserRole).toString())) {
      sections_->show_page_of(f);
      f->editor()->setFocus();
    }
  });

  yaml_timer_ = new QTimer(this);
  yaml_timer_->setSingleShot(true);
  yaml_timer_->setInterval(kYamlDebounceMs);
  connect(yaml_timer_, &QTimer::timeout, this, &ExperimentEditor::on_yaml_timer);
  connect(yaml_, &QPlainTextEdit::textChanged, this, [this] {
    if (!writing_yaml_) yaml_timer_->start();
  });

  set_presets_dir(default_presets_dir());
  show_device_catalog(DeviceCatalog::of_this_machine());
  origin_ = tr("defaults (no preset)");
  set_config(ExperimentConfig{});
  connect(this, &ExperimentEditor::config_changed, this, &ExperimentEditor::update_preset_box);
  update_preset_box();
}

void ExperimentEditor::mark_restored_config() {
  preset_path_.clear();
  preset_yaml_.clear();
  origin_ = tr("last session's config");
  update_preset_box();
}

void ExperimentEditor::update_preset_box() {
  const bool holds_preset = !preset_path_.isEmpty() && experiment_config_to_yaml(config_) == preset_yaml_;
  const int i = presets_->findData(preset_path_);
  if (holds_preset && i >= 0) {
    presets_->setCurrentIndex(i);
    return;
  }
  presets_->setCurrentIndex(-1);
  if (holds_preset) {
    presets_->setPlaceholderText(QFileInfo(preset_path_).completeBaseName());
    return;
  }
  presets_->setPlaceholderText(preset_path_.isEmpty() ? origin_
                                                      : tr("%1, edited").arg(i >= 0 ? presets_->itemText(i) : preset_path_));
}

void ExperimentEditor::on_preset_chosen(int index) {
  const QString path = presets_->itemData(index).toString();
  const bool edited = preset_path_.isEmpty() ? experiment_config_to_yaml(config_) != experiment_config_to_yaml(ExperimentConfig{})
                                             : experiment_config_to_yaml(config_) != preset_yaml_;
  if (edited && path != preset_path_ &&
      QMessageBox::question(this, tr("Load preset"),
                            tr("Load %1? It replaces the config in the editor (%2).")
                                .arg(presets_->itemText(index), presets_->placeholderText()),
                            QMessageBox::Yes | QMessageBox::No, QMessageBox::Yes) != QMessageBox::Yes) {
    update_preset_box();
    return;
  }
  load_preset(path);
}

void ExperimentEditor::set_device_catalog(const DeviceCatalog& catalog) {
  show_device_catalog(catalog);
  refresh_fields();
  validate();
}

void ExperimentEditor::show_device_catalog(const DeviceCatalog& catalog) {
  catalog_ = catalog;
  device_->set_catalog(catalog);
  for (ConfigField* f : fields_.values("parallel.device"))
    f->set_choice_enabled("cuda", catalog.has_gpu(), QString::fromStdString(catalog.gpu_unavailable_reason));
}

void ExperimentEditor::register_field(ConfigField* f) {
  fields_.insert(f->path(), f);
  connect(f, &ConfigField::edited, this, &ExperimentEditor::on_field_edited);
}

ConfigField* ExperimentEditor::field(const QString& path) const {
  auto it = form_fields_.find(path);
  return it == form_fields_.end() ? nullptr : it->second;
}

void ExperimentEditor::set_config(const ExperimentConfig& config) {
  config_ = config;
  edit_errors_.clear();
  yaml_error_key_.clear();
  yaml_error_.clear();
  refresh_fields();
  write_yaml();
  validate();
  emit config_changed();
}

QString ExperimentEditor::yaml_text() const { return yaml_->toPlainText(); }

void ExperimentEditor::refresh_fields(const QString& except_path, ConfigField* except) {
  for (const ConfigKeySpec& spec : experiment_config_schema()) {
    if (spec.in_map()) continue;
    const QString path = QString::fromStdString(spec.path);
    const QString text = ConfigField::text_of(spec, config_);
    for (ConfigField* f : fields_.values(path)) {
      if (f == except) continue;
      if (path == except_path && edit_errors_.count(path)) continue;
      f->set_value_text(text);
    }
  }
  // Precision is a GPU choice (the CPU computes in fp32): open with device cuda, and while a
  // value the CPU refuses (bf16) is there to be fixed.
  const bool precision_open = config_.parallel.device == "cuda" || config_.train.precision == "bf16";
  for (ConfigField* f : fields_.values("train.precision")) f->setEnabled(precision_open);
  device_->show_config(config_);
  schedule_->show_config(config_);
  routing_->show_config(config_);
  memory_->show_config(config_, catalog_.capacity_bytes(config_));
}

void ExperimentEditor::write_yaml() {
  writing_yaml_ = true;
  const QString text = QString::fromStdString(experiment_config_to_yaml(config_));
  if (yaml_->toPlainText() != text) {
    // Keep the scroll position: the user may be looking at one section.
    const int scroll = yaml_->verticalScrollBar() ? yaml_->verticalScrollBar()->value() : 0;
    yaml_->setPlainText(text);
    yaml_->verticalScrollBar()->setValue(scroll);
  }
  yaml_->setExtraSelections({});
  if (edit_errors_.empty()) {
    yaml_status_->setText(tr("<span style='color:gray'>in step with the form</span>"));
  } else {
    // The form holds text the config cannot take; the YAML shows the last value it took.
    QStringList keys;
    for (const auto& [key, message] : edit_errors_) keys << key;
    yaml_status_->setText(tr("<span style='color:#c62828'>Not in step with the form: %1 not applied (see the "
                             "field); the YAML keeps the last valid value</span>")
                              .arg(keys.join(", ").toHtmlEscaped()));
  }
  writing_yaml_ = false;
}

bool ExperimentEditor::edit_field(const QString& path, const QString& text) {
  on_field_edited(path, text);
  if (ConfigField* f = field(path)) f->set_value_text(text);
  return !edit_errors_.count(path);
}

void ExperimentEditor::on_field_edited(const QString& path, const QString& text) {
  if (!find_config_key(path.toStdString())) return;
  apply_edits({{path, text}}, qobject_cast<ConfigField*>(sender()));
}

void ExperimentEditor::apply_edits(const QList<QPair<QString, QString>>& edits, ConfigField* source) {
  // A form edit supersedes a YAML text that did not parse.
  yaml_timer_->stop();
  yaml_error_key_.clear();
  yaml_error_.clear();
  for (const auto& [path, text] : edits) {
    const ConfigKeySpec* spec = find_config_key(path.toStdString());
    if (!spec) continue;
    try {
      if (spec->type == ConfigType::String) spec->set(config_, std::string(), ConfigValue(text.toStdString()));
      else apply_override(config_, spec->path + "=" + text.trimmed().toStdString());
      edit_errors_.erase(path);
    } catch (const ConfigError& e) {
      edit_errors_[path] = QString::fromStdString(e.message);
    } catch (const std::exception& e) {
      edit_errors_[path] = QString::fromUtf8(e.what());
    }
  }
  refresh_fields(edits.size() == 1 ? edits.front().first : QString(), source);
  write_yaml();
  validate();
  emit config_changed();
}

bool ExperimentEditor::apply_yaml_text(const QString& text, QString* error) {
  writing_yaml_ = true;
  if (yaml_->toPlainText() != text) yaml_->setPlainText(text);
  writing_yaml_ = false;
  yaml_timer_->stop();
  on_yaml_timer();
  if (error) *error = yaml_error_;
  return yaml_error_.isEmpty();
}

void ExperimentEditor::on_yaml_timer() {
  try {
    ExperimentConfig parsed = parse_experiment_config(yaml_->toPlainText().toStdString(), "editor.yaml");
    config_ = parsed;
    edit_errors_.clear();
    yaml_error_key_.clear();
    yaml_error_.clear();
    yaml_->setExtraSelections({});
    yaml_status_->setText(tr("<span style='color:gray'>applied to the form</span>"));
    refresh_fields();
    validate();
    emit config_changed();
  } catch (const ConfigError& e) {
    yaml_error_key_ = QString::fromStdString(e.key_path);
    yaml_error_ = QString::fromUtf8(e.what());
    show_yaml_error(e.line, yaml_error_);
    validate();
  }
}

void ExperimentEditor::show_yaml_error(int line, const QString& message) {
  QList<QTextEdit::ExtraSelection> marks;
  if (line > 0) {
    QTextEdit::ExtraSelection sel;
    sel.cursor = QTextCursor(yaml_->document()->findBlockByNumber(line - 1));
    sel.format.setBackground(QColor(253, 236, 234));
    sel.format.setProperty(QTextFormat::FullWidthSelection, true);
    marks << sel;
  }
  yaml_->setExtraSelections(marks);
  yaml_status_->setText(QStringLiteral("<span style='color:#c62828'>%1</span>").arg(message.toHtmlEscaped()));
}

void ExperimentEditor::validate() {
  std::map<QString, QString> by_key;
  QStringList list;
  QStringList list_keys;
  auto add = [&](const QString& key, const QString& message) {
    if (!by_key.count(key)) by_key[key] = message;
    // A message that names its key already ("editor.yaml:3:1: bogus_key: …") is not prefixed again.
    const bool names_key = !key.isEmpty() && (message.startsWith(key + ":") || message.contains(": " + key + ":"));
    list << (key.isEmpty() || names_key ? message : key + ": " + message);
    list_keys << key;
  };
  for (const auto& [key, message] : edit_errors_) add(key, message);
  if (!yaml_error_.isEmpty()) add(yaml_error_key_, yaml_error_);
  for (const ConfigIssue& issue : check_experiment_config(config_)) {
    const QString key = QString::fromStdString(issue.key_path);
    if (!edit_errors_.count(key)) add(key, QString::fromStdString(issue.message));
  }
  // GPUs the catalog lacks (the trainer would find out only when it opens them): rank 0's,
  // and with more ranks than GPUs, those of the ranks beyond.
  if (config_.parallel.device == "cuda" && catalog_.has_gpu()) {
    const int ranks = std::max(1, config_.parallel.ranks);
    QStringList missing;
    bool rank0_missing = false;
    try {
      for (int r = 0; r < ranks; ++r) {
        const RankDevice device = plan_rank_device(config_, r, ranks, r);
        const QString label = QString::fromStdString(device.label());
        if (catalog_.gpu(device.index) || missing.contains(label)) continue;
        missing << label;
        rank0_missing = rank0_missing || r == 0;
      }
    } catch (const std::runtime_error&) {
      // parallel.gpus does not name one GPU per rank (a config check says so): rank 0's GPU only.
      const RankDevice device = rank0_device(config_);
      if (!catalog_.gpu(device.index)) {
        missing << QString::fromStdString(device.label());
        rank0_missing = true;
      }
    }
    if (!missing.isEmpty()) {
      QStringList here;
      for (const DeviceDescription& d : catalog_.devices)
        if (!d.device.is_cpu()) here << QString::fromStdString(d.device.str());
      const QString key = !config_.parallel.gpus.empty() ? QStringLiteral("parallel.gpus")
                          : rank0_missing           ? QStringLiteral("parallel.device")
                                                    : QStringLiteral("parallel.ranks");
      QString message = missing.size() == 1 ? tr("%1 is not on this machine (it has %2)").arg(missing.front(), here.join(", "))
                                            : tr("%1 are not on this machine (it has %2)").arg(missing.join(", "), here.join(", "));
      if (key == "parallel.ranks")
        message = tr("%1 GPU ranks need %1 GPUs, one each; %2").arg(ranks).arg(message);
      add(key, message);
    }
  }
  // What the trainer would refuse on this machine (e.g. cuda where no GPU is usable), unless
  // its key already shows a problem.
  const std::string refusal = Trainer::unsupported_reason(config_, catalog_.gpu_unavailable_reason);
  if (!refusal.empty()) {
    const QString key = leading_key(refusal);
    QString message = QString::fromStdString(refusal);
    if (message.startsWith(key + ": ")) message = message.mid(key.size() + 2);
    if (key.isEmpty() ? !list.contains(message) : !by_key.count(key)) add(key, message);
  }
  std::map<QString, QString> warning_by_key;
  QStringList warnings;
  for (const ConfigIssue& w : config_warnings(config_)) {
    const QString key = QString::fromStdString(w.key_path);
    warning_by_key.emplace(key, QString::fromStdString(w.message));
    warnings << key + ": " + QString::fromStdString(w.message);
  }
  for (auto it = fields_.cbegin(); it != fields_.cend(); ++it) {
    auto found = by_key.find(it.key());
    it.value()->set_issue(found == by_key.end() ? QString() : found->second);
    auto warned = warning_by_key.find(it.key());
    it.value()->set_warning(warned == warning_by_key.end() ? QString() : warned->second);
  }
  issues_ = list;
  warnings_ = warnings;
  issue_list_->clear();
  if (list.isEmpty()) {
    auto* ok = new QListWidgetItem(warnings.isEmpty() ? tr("✓ No problems: ready to launch")
                                                      : tr("✓ Ready to launch, with %n warning(s) below", nullptr,
                                                           int(warnings.size())));
    ok->setForeground(QColor(40, 140, 60));
    issue_list_->addItem(ok);
  }
  for (int i = 0; i < list.size(); ++i) {
    auto* item = new QListWidgetItem(list[i]);
    item->setForeground(QColor(198, 40, 40));
    item->setData(Qt::UserRole, list_keys[i]);
    issue_list_->addItem(item);
  }
  for (const QString& text : warnings) {
    auto* item = new QListWidgetItem(QStringLiteral("⚠ ") + text);
    item->setForeground(QColor(161, 92, 0));
    item->setData(Qt::UserRole, text.section(": ", 0, 0));
    issue_list_->addItem(item);
  }
  const bool valid = list.isEmpty();
  if (valid != was_valid_) {
    was_valid_ = valid;
    emit validity_changed(valid);
  }
}

QStringList ExperimentEditor::issues() const { return issues_; }

void ExperimentEditor::set_presets_dir(const QString& dir) {
  presets_dir_ = dir;
  presets_->clear();
  QDir d(dir);
  for (const QFileInfo& fi : d.entryInfoList({"*.yaml", "*.yml"}, QDir::Files, QDir::Name))
    presets_->addItem(fi.completeBaseName(), fi.absoluteFilePath());
  // Nested suites (experiments/bench/*.yaml) appear as "bench/name".
  for (const QFileInfo& sub : d.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
    for (const QFileInfo& fi : QDir(sub.absoluteFilePath()).entryInfoList({"*.yaml", "*.yml"}, QDir::Files, QDir::Name))
      presets_->addItem(sub.fileName() + "/" + fi.completeBaseName(), fi.absoluteFilePath());
}

QStringList ExperimentEditor::preset_names() const {
  QStringList out;
  for (int i = 0; i < presets_->count(); ++i) out << presets_->itemText(i);
  return out;
}

bool ExperimentEditor::load_preset(const QString& name_or_path, QString* error) {
  QString path = name_or_path;
  const int i = presets_->findText(name_or_path);
  if (i >= 0) path = presets_->itemData(i).toString();
  try {
    const ExperimentConfig loaded = load_experiment_config(path.toStdString());
    preset_path_ = path;  // before set_config, so the box shows the preset at once
    preset_yaml_ = experiment_config_to_yaml(loaded);
    set_config(loaded);
    return true;
  } catch (const std::exception& e) {
    yaml_status_->setText(QStringLiteral("<span style='color:#c62828'>%1</span>").arg(QString::fromUtf8(e.what()).toHtmlEscaped()));
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
}

}  // namespace mok::gui
