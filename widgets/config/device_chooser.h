#pragma once
// DeviceChooser: where a run computes and in which precision. The device combo holds "CPU"
// and one entry per GPU of the DeviceCatalog ("cuda:0 — NVIDIA H200, 139.8 GiB"); choosing
// one asks for parallel.device and parallel.gpus (the GPU's index, when it is not 0), and
// show_config selects the entry a config names. Where no GPU is usable the GPU entry is
// there but disabled, with the reason as its tooltip and in a note under the combo; a config
// naming a GPU this machine lacks shows it as a disabled entry too. The precision is a
// ConfigField of train.precision, kept in step by the ExperimentEditor like every field.

#include <QList>
#include <QWidget>

#include "core/config/experiment_config.h"
#include "widgets/config/device_catalog.h"

class QComboBox;
class QLabel;

namespace mok::gui {

class ConfigField;

class DeviceChooser : public QWidget {
  Q_OBJECT

 public:
  explicit DeviceChooser(QWidget* parent = nullptr);

  void set_catalog(const DeviceCatalog& catalog);
  // Selects the entry of rank 0's device in `config`, without emitting device_chosen.
  void show_config(const ExperimentConfig& config);
  QList<ConfigField*> fields() const { return {precision_}; }

  QComboBox* combo() const { return combo_; }
  QLabel* note() const { return note_; }
  ConfigField* precision_field() const { return precision_; }
  // The device of entry `i`: "cpu", "cuda:1", or "cuda" for the GPU entry of a machine without one.
  QString device_of(int i) const;
  int find_device(const QString& device) const;  // -1 when no entry has it

 signals:
  // The user chose an entry: the values of parallel.device and parallel.gpus it stands for.
  void device_chosen(const QString& device, const QString& gpus);

 private:
  void on_index_changed(int i);
  void select(int i);

  QComboBox* combo_ = nullptr;
  QLabel* note_ = nullptr;
  ConfigField* precision_ = nullptr;
  DeviceCatalog catalog_;
  int shown_ = 0;         // the entry of the config last shown
  bool setting_ = false;  // changing the combo from show_config, not the user
};

}  // namespace mok::gui
