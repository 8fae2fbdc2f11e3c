#pragma once
// DeviceChooser: where a run computes and in which precision. The device combo holds "CPU"
// and one entry per GPU of the DeviceCatalog ("cuda:0 — NVIDIA H200, 139.8 GiB"); choosing
// one asks for parallel.device and parallel.gpus (the GPU's index, when it is not 0), and
// show_config selects the entry a config names. Where no GPU is usable the GPU entry is
// there but disabled, with the reason as its tooltip and in a note under the combo; a config
// naming a GPU this machine lacks shows it as a disabled entry too. The precision is a
// ConfigField of train.precision, kept in step by the ExperimentEditor like every field.
//
// Beside the device, "GPUs" says how many GPUs the run spreads over, one rank each, from the
// chosen GPU on: 2 on cuda:0 stands for parallel.ranks 2 and parallel.comm nccl (rank r on
// cuda:r), 2 on cuda:1 for parallel.gpus "1,2" too. The chooser only asks; what a choice
// sets in the config is device_placement_edits, applied by the ExperimentEditor, so the
// config stays the one source of truth and show_config draws the chooser from it.

#include <QList>
#include <QPair>
#include <QString>
#include <QWidget>

#include "core/config/experiment_config.h"
#include "widgets/config/device_catalog.h"

class QComboBox;
class QLabel;
class QSpinBox;

namespace mok::gui {

class ConfigField;

// The (key, value) edits that place `config` on the CPU (first_gpu < 0) or on `gpu_count`
// GPUs from cuda:`first_gpu` on, one rank each, keeping the keys consistent:
//   CPU: device cpu, no GPU list; ranks kept; comm nccl (GPU only) becomes local.
//   GPUs: device cuda; ranks = gpu_count; the GPU list ("" when it starts at cuda:0, the
//   default rank r on cuda:r; else "1,2"); comm nccl for 2+ GPUs, local for one.
QList<QPair<QString, QString>> device_placement_edits(const ExperimentConfig& config, int first_gpu, int gpu_count);

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
  // How many GPUs, one rank each (enabled while a usable GPU is chosen).
  QSpinBox* gpu_count() const { return gpu_count_; }
  // What the choice amounts to: "2 ranks, one per GPU (cuda:0, cuda:1), exchanging over NCCL".
  QLabel* placement_note() const { return placement_; }
  ConfigField* precision_field() const { return precision_; }
  // The device of entry `i`: "cpu", "cuda:1", or "cuda" for the GPU entry of a machine without one.
  QString device_of(int i) const;
  int find_device(const QString& device) const;  // -1 when no entry has it

 signals:
  // The user chose the CPU (first_gpu -1) or `gpu_count` GPUs from cuda:`first_gpu` on
  // (see device_placement_edits).
  void placement_chosen(int first_gpu, int gpu_count);

 private:
  void on_index_changed(int i);
  void on_gpu_count_changed(int n);
  void emit_choice();
  void select(int i);
  // GPUs the catalog has from cuda:`first` on without a gap (at least 1).
  int gpus_from(int first) const;
  void show_placement(const ExperimentConfig& config);

  QComboBox* combo_ = nullptr;
  QLabel* note_ = nullptr;
  QSpinBox* gpu_count_ = nullptr;
  QLabel* placement_ = nullptr;
  ConfigField* precision_ = nullptr;
  DeviceCatalog catalog_;
  int shown_ = 0;         // the entry of the config last shown
  bool setting_ = false;  // changing the combo from show_config, not the user
};

}  // namespace mok::gui
