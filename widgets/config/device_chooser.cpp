#include "widgets/config/device_chooser.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QStandardItemModel>

#include "widgets/config/config_field.h"
#include "widgets/models/run_record.h"

namespace mok::gui {

namespace {

constexpr int kDeviceRole = Qt::UserRole;       // "cpu", "cuda:N", or "cuda" (no GPU here)
constexpr int kMissingRole = Qt::UserRole + 1;  // an entry for a GPU a config names but this machine lacks

// Shown, not choosable; the tooltip says why.
void disable_entry(QComboBox* combo, int i, const QString& why) {
  qobject_cast<QStandardItemModel*>(combo->model())->item(i)->setEnabled(false);
  combo->setItemData(i, why, Qt::ToolTipRole);
}

bool entry_enabled(QComboBox* combo, int i) {
  return qobject_cast<QStandardItemModel*>(combo->model())->item(i)->isEnabled();
}

}  // namespace

DeviceChooser::DeviceChooser(QWidget* parent) : QWidget(parent) {
  auto* form = new QFormLayout(this);
  form->setContentsMargins(4, 4, 4, 4);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  combo_ = new QComboBox;
  combo_->setObjectName("device");
  combo_->setToolTip(tr("<b>parallel.device</b> and <b>parallel.gpus</b>: where the run computes"));
  form->addRow(tr("Device"), combo_);
  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setStyleSheet("color: #8d6e63;");
  note_->setVisible(false);
  form->addRow(note_);
  precision_ = new ConfigField(*find_config_key("train.precision"));
  form->addRow(tr("Precision"), precision_);
  connect(combo_, &QComboBox::currentIndexChanged, this, &DeviceChooser::on_index_changed);
  set_catalog(DeviceCatalog{});
}

void DeviceChooser::set_catalog(const DeviceCatalog& catalog) {
  catalog_ = catalog;
  setting_ = true;
  combo_->clear();
  combo_->addItem(tr("CPU"), QStringLiteral("cpu"));
  for (const DeviceDescription& d : catalog.devices) {
    const QString detail = QString::fromStdString(d.detail);
    if (d.device.is_cpu()) {
      combo_->setItemData(0, detail, Qt::ToolTipRole);
      continue;
    }
    const QString id = QString::fromStdString(d.device.str());
    combo_->addItem(QStringLiteral("%1 — %2, %3").arg(id, QString::fromStdString(d.name), format_bytes(double(d.memory_bytes))), id);
    combo_->setItemData(combo_->count() - 1, detail, Qt::ToolTipRole);
  }
  const QString why = QString::fromStdString(catalog.gpu_unavailable_reason);
  if (!catalog.has_gpu()) {
    combo_->addItem(tr("GPU (cuda) — none usable here"), QStringLiteral("cuda"));
    disable_entry(combo_, combo_->count() - 1, why);
  }
  note_->setText(catalog.has_gpu() ? QString() : tr("No GPU: %1").arg(why));
  note_->setVisible(!catalog.has_gpu());
  shown_ = 0;
  setting_ = false;
}

QString DeviceChooser::device_of(int i) const { return combo_->itemData(i, kDeviceRole).toString(); }

int DeviceChooser::find_device(const QString& device) const { return combo_->findData(device, kDeviceRole); }

void DeviceChooser::show_config(const ExperimentConfig& config) {
  const RankDevice device = rank0_device(config);
  const QString want = device.kind == "cpu" ? QStringLiteral("cpu")
                       : catalog_.has_gpu() ? QString::fromStdString(device.label())
                                            : QStringLiteral("cuda");
  setting_ = true;
  for (int i = combo_->count() - 1; i >= 0; --i)
    if (combo_->itemData(i, kMissingRole).toBool()) combo_->removeItem(i);
  int i = find_device(want);
  if (i < 0) {
    combo_->addItem(tr("%1 — not on this machine").arg(want), want);
    i = combo_->count() - 1;
    combo_->setItemData(i, true, kMissingRole);
    disable_entry(combo_, i, tr("This machine has no GPU %1").arg(want));
  }
  select(i);
  setting_ = false;
}

void DeviceChooser::select(int i) {
  const bool was = setting_;
  setting_ = true;
  combo_->setCurrentIndex(i);
  shown_ = i;
  setting_ = was;
}

void DeviceChooser::on_index_changed(int i) {
  if (setting_ || i < 0) return;
  // A disabled entry is shown, never chosen (only code can pick one): go back to the config's.
  if (!entry_enabled(combo_, i)) {
    select(shown_);
    return;
  }
  const QString device = device_of(i);
  if (device == "cpu") {
    emit device_chosen(device, QString());
    return;
  }
  const int index = device.section(':', 1).toInt();
  emit device_chosen(QStringLiteral("cuda"), index == 0 ? QString() : QString::number(index));
}

}  // namespace mok::gui
