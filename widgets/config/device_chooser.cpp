#include "widgets/config/device_chooser.h"

#include <algorithm>
#include <stdexcept>

#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
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

QList<QPair<QString, QString>> device_placement_edits(const ExperimentConfig& config, int first_gpu, int gpu_count) {
  if (first_gpu < 0) {
    // CPU ranks exchange host memory (local threads or MPI processes); NCCL is GPU only.
    const std::string& comm = config.parallel.comm;
    return {{"parallel.device", "cpu"},
            {"parallel.gpus", QString()},
            {"parallel.comm", comm == "nccl" || comm == "peer" ? QStringLiteral("local") : QString::fromStdString(comm)}};
  }
  const int n = std::max(1, gpu_count);
  QStringList ids;
  for (int i = 0; i < n; ++i) ids << QString::number(first_gpu + i);
  return {{"parallel.device", "cuda"},
          {"parallel.gpus", first_gpu == 0 ? QString() : ids.join(',')},
          {"parallel.ranks", QString::number(n)},
          // Several GPUs exchange over NCCL, or over peer copies where the config chose them.
          {"parallel.comm", n == 1                           ? QStringLiteral("local")
                            : config.parallel.comm == "peer" ? QStringLiteral("peer")
                                                             : QStringLiteral("nccl")}};
}

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
  gpu_count_ = new QSpinBox;
  gpu_count_->setObjectName("gpu_count");
  gpu_count_->setRange(1, 1);
  gpu_count_->setKeyboardTracking(false);
  gpu_count_->setSuffix(tr(" (one rank each)"));
  gpu_count_->setToolTip(tr("<b>parallel.ranks</b> on the GPU: how many GPUs the run spreads its experts over, "
                            "from the chosen one on; 2 or more exchange over NCCL (<b>parallel.comm</b>: nccl)"));
  gpu_count_->setEnabled(false);
  form->addRow(tr("GPUs"), gpu_count_);
  placement_ = new QLabel;
  placement_->setObjectName("placement");
  placement_->setWordWrap(true);
  placement_->setStyleSheet("color: #455a64;");
  placement_->setVisible(false);
  form->addRow(placement_);
  precision_ = new ConfigField(*find_config_key("train.precision"));
  form->addRow(tr("Precision"), precision_);
  connect(combo_, &QComboBox::currentIndexChanged, this, &DeviceChooser::on_index_changed);
  connect(gpu_count_, &QSpinBox::valueChanged, this, &DeviceChooser::on_gpu_count_changed);
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
  gpu_count_->setRange(1, 1);
  gpu_count_->setEnabled(false);
  placement_->setVisible(false);
  setting_ = false;
}

int DeviceChooser::gpus_from(int first) const {
  int n = 0;
  while (catalog_.gpu(first + n)) ++n;
  return std::max(1, n);
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
  show_placement(config);
  setting_ = false;
}

void DeviceChooser::show_placement(const ExperimentConfig& config) {
  const bool gpu = config.parallel.device == "cuda";
  const int ranks = std::max(1, config.parallel.ranks);
  const int first = rank0_device(config).index;
  // A config may ask for more GPUs than this machine has: shown as it is (the editor says
  // what is wrong), while a user's choice goes up to the GPUs there are.
  gpu_count_->setRange(1, gpu ? std::max(gpus_from(first), ranks) : 1);
  gpu_count_->setValue(gpu ? ranks : 1);
  gpu_count_->setEnabled(gpu && catalog_.has_gpu() && entry_enabled(combo_, combo_->currentIndex()));
  QString text;
  const QString comm = config.parallel.comm == "nccl"   ? QStringLiteral("NCCL")
                       : config.parallel.comm == "peer" ? tr("peer copies")
                                                        : QString::fromStdString(config.parallel.comm);
  if (gpu && ranks > 1) {
    QStringList where;
    try {
      for (int r = 0; r < ranks; ++r) where << QString::fromStdString(plan_rank_device(config, r, ranks, r).label());
    } catch (const std::runtime_error&) {
      where.clear();  // parallel.gpus does not name one GPU per rank: the editor says so
    }
    const bool shared = where.removeDuplicates() > 0;  // peer copies let ranks share a GPU
    text = where.isEmpty() ? tr("%1 ranks on GPUs, exchanging over %2").arg(ranks).arg(comm)
           : shared        ? tr("%1 ranks sharing %2, exchanging over %3").arg(ranks).arg(where.join(", "), comm)
                           : tr("%1 ranks, one per GPU (%2), exchanging over %3").arg(ranks).arg(where.join(", "), comm);
  } else if (!gpu && ranks > 1) {
    text = tr("%1 ranks on the CPU, exchanging over %2").arg(ranks).arg(comm);
  }
  placement_->setText(text);
  placement_->setVisible(!text.isEmpty());
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
  emit_choice();
}

void DeviceChooser::on_gpu_count_changed(int) {
  if (setting_) return;
  emit_choice();
}

void DeviceChooser::emit_choice() {
  const QString device = device_of(combo_->currentIndex());
  if (device == "cpu") {
    emit placement_chosen(-1, 0);
    return;
  }
  const int first = device.section(':', 1).toInt();
  emit placement_chosen(first, std::clamp(gpu_count_->value(), 1, gpus_from(first)));
}

}  // namespace mok::gui
