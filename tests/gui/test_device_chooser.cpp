// Choosing the device on the Setup page: the chooser lists the CPU and each GPU of the device
// catalog; where no GPU is usable the GPU entry is disabled with the reason (tooltip and a
// note); a choice reaches the YAML and a YAML edit selects the entry; precision is open only
// for a GPU; the memory estimate's capacity is the chosen GPU's. This machine (no GPU) shows
// the first case; an injected catalog shows the second on any machine.
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QtTest>

#include "core/config/config_io.h"
#include "widgets/config/config_field.h"
#include "widgets/config/device_catalog.h"
#include "widgets/config/device_chooser.h"
#include "widgets/config/experiment_editor.h"
#include "core/plan/memory_plan.h"
#include "widgets/config/memory_estimate_bar.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/setup_page.h"
#if MOK_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

using namespace mok;
using namespace mok::gui;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

// Two GPUs of different sizes, so the capacity shows which one is chosen.
DeviceCatalog two_gpus() {
  return {{{Device::cpu(), "CPU", 0, "cpu", "", "", ""},
           {Device::cuda(0), "NVIDIA H200", 140 * kGiB, "sm_90, 132 SMs", "", "", ""},
           {Device::cuda(1), "NVIDIA H100", 80 * kGiB, "sm_90, 132 SMs", "", "", ""}},
          ""};
}

bool entry_enabled(QComboBox* combo, int i) {
  return qobject_cast<QStandardItemModel*>(combo->model())->item(i)->isEnabled();
}

QString entry_tooltip(QComboBox* combo, int i) { return combo->itemData(i, Qt::ToolTipRole).toString(); }

// The config the YAML view holds, parsed as the CLI would.
ExperimentConfig yaml_config(const ExperimentEditor& editor) {
  return parse_experiment_config(editor.yaml_text().toStdString(), "view.yaml");
}

QString with_parallel(const ExperimentEditor& editor, const QString& device, const QString& gpus = QString()) {
  ExperimentConfig c = editor.config();
  c.parallel.device = device.toStdString();
  c.parallel.gpus = gpus.toStdString();
  return QString::fromStdString(experiment_config_to_yaml(c));
}

QString with_parallel(const ExperimentEditor& editor, const QString& device, int ranks, const QString& comm,
                      const QString& gpus) {
  ExperimentConfig c = editor.config();
  c.parallel.device = device.toStdString();
  c.parallel.ranks = ranks;
  c.parallel.comm = comm.toStdString();
  c.parallel.gpus = gpus.toStdString();
  return QString::fromStdString(experiment_config_to_yaml(c));
}

// (key, value) edits as a map, to read one.
QMap<QString, QString> edit_map(const QList<QPair<QString, QString>>& edits) {
  QMap<QString, QString> m;
  for (const auto& [k, v] : edits) m[k] = v;
  return m;
}

}  // namespace

class TestDeviceChooser : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
#if MOK_HAVE_CUDA
    mok::cuda::register_cuda_backend();  // as mok-workbench does at start
#endif
  }

  void this_machine_without_gpu_disables_the_gpu_entry() {
    const DeviceCatalog machine = DeviceCatalog::of_this_machine();
    if (machine.has_gpu()) QSKIP("this machine has a usable GPU; the injected catalogs cover both cases");
    const QString reason = QString::fromStdString(machine.gpu_unavailable_reason);
    QVERIFY(!reason.isEmpty());
#if MOK_HAVE_CUDA
    // The CUDA backend answered (no driver, no GPU), not the build.
    QVERIFY2(!reason.contains("without nvcc"), qPrintable(reason));
#endif
    QTemporaryDir dir;
    RunManager runs;
    runs.set_db_path(dir.filePath("runs.db"));
    SetupPage page(&runs);
    page.resize(1400, 900);
    page.show();
    ExperimentEditor* editor = page.editor();
    DeviceChooser* chooser = editor->device_chooser();
    QComboBox* combo = chooser->combo();

    QCOMPARE(combo->count(), 2);
    QCOMPARE(combo->itemText(0), QStringLiteral("CPU"));
    QVERIFY(entry_enabled(combo, 0));
    QCOMPARE(combo->currentIndex(), 0);
    const int gpu = chooser->find_device("cuda");
    QCOMPARE(gpu, 1);
    QVERIFY(!entry_enabled(combo, gpu));
    QCOMPARE(entry_tooltip(combo, gpu), reason);
    QVERIFY(chooser->note()->isVisible());
    QCOMPARE(chooser->note()->text(), QStringLiteral("No GPU: ") + reason);
    // The form's parallel.device combo says the same.
    auto* form_combo = qobject_cast<QComboBox*>(editor->field("parallel.device")->editor());
    QVERIFY(form_combo);
    const int form_cuda = form_combo->findText("cuda");
    QVERIFY(!entry_enabled(form_combo, form_cuda));
    QCOMPARE(entry_tooltip(form_combo, form_cuda), reason);
    // The CPU computes in fp32: precision is closed.
    QVERIFY(!chooser->precision_field()->isEnabled());
    QVERIFY(!editor->field("train.precision")->isEnabled());
    QVERIFY(page.launch_button()->isEnabled());

    // A disabled entry cannot be chosen: the config stays on the CPU.
    combo->setCurrentIndex(gpu);
    QCOMPARE(combo->currentIndex(), 0);
    QCOMPARE(editor->config().parallel.device, std::string("cpu"));

    // cuda in the YAML: the GPU entry shows, the trainer's refusal is a problem at the field.
    QString error;
    QVERIFY2(editor->apply_yaml_text(with_parallel(*editor, "cuda"), &error), qPrintable(error));  // it parses
    QCOMPARE(editor->config().parallel.device, std::string("cuda"));
    QCOMPARE(combo->currentIndex(), gpu);
    const QString issue = editor->field("parallel.device")->issue();
    QVERIFY2(issue.contains(reason), qPrintable(issue));
    QVERIFY2(editor->issues().join("\n").contains("parallel.device: cuda: " + reason), qPrintable(editor->issues().join("\n")));
    QVERIFY(!editor->is_valid());
    QVERIFY(!page.launch_button()->isEnabled());
    QVERIFY(chooser->precision_field()->isEnabled());
    // No GPU here, so no capacity to draw against.
    QCOMPARE(editor->memory_bar()->capacity_bytes(), 0.0);

    // Back to the CPU from the chooser: the YAML follows and the problem is gone.
    combo->setCurrentIndex(0);
    QCOMPARE(editor->config().parallel.device, std::string("cpu"));
    QCOMPARE(yaml_config(*editor).parallel.device, std::string("cpu"));
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));
    QVERIFY(editor->field("parallel.device")->issue().isEmpty());
    QVERIFY(page.launch_button()->isEnabled());
    QCOMPARE(editor->memory_bar()->capacity_bytes(), host_memory_bytes());
  }

  void gpu_present_entries_are_enabled_and_reach_the_yaml() {
    ExperimentEditor editor;
    editor.set_device_catalog(two_gpus());
    editor.resize(1400, 900);
    editor.show();
    DeviceChooser* chooser = editor.device_chooser();
    QComboBox* combo = chooser->combo();

    QCOMPARE(combo->count(), 3);
    QCOMPARE(combo->itemText(0), QStringLiteral("CPU"));
    QCOMPARE(combo->itemText(1), QStringLiteral("cuda:0 — NVIDIA H200, 140.0 GiB"));
    QCOMPARE(combo->itemText(2), QStringLiteral("cuda:1 — NVIDIA H100, 80.0 GiB"));
    for (int i = 0; i < 3; ++i) QVERIFY(entry_enabled(combo, i));
    QCOMPARE(entry_tooltip(combo, 1), QStringLiteral("sm_90, 132 SMs"));
    QVERIFY(!chooser->note()->isVisible());
    auto* form_combo = qobject_cast<QComboBox*>(editor.field("parallel.device")->editor());
    QVERIFY(entry_enabled(form_combo, form_combo->findText("cuda")));

    // cuda:1: device cuda and its index in parallel.gpus, in the config, the form and the YAML.
    QSignalSpy changed(&editor, &ExperimentEditor::config_changed);
    combo->setCurrentIndex(2);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(editor.config().parallel.device, std::string("cuda"));
    QCOMPARE(editor.config().parallel.gpus, std::string("1"));
    QCOMPARE(editor.field("parallel.device")->value_text(), QStringLiteral("cuda"));
    QCOMPARE(editor.field("parallel.gpus")->value_text(), QStringLiteral("1"));
    QCOMPARE(yaml_config(editor).parallel.device, std::string("cuda"));
    QCOMPARE(yaml_config(editor).parallel.gpus, std::string("1"));
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));
    QCOMPARE(editor.memory_bar()->capacity_bytes(), double(80 * kGiB));
    QVERIFY(chooser->precision_field()->isEnabled());
    QVERIFY(editor.field("train.precision")->isEnabled());

    // cuda:0 needs no index: parallel.gpus is cleared.
    combo->setCurrentIndex(1);
    QCOMPARE(editor.config().parallel.gpus, std::string());
    QCOMPARE(yaml_config(editor).parallel.gpus, std::string());
    QCOMPARE(editor.memory_bar()->capacity_bytes(), double(140 * kGiB));

    // The YAML selects the entry.
    QString error;
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", "1"), &error), qPrintable(error));
    QCOMPARE(combo->currentIndex(), 2);
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cpu"), &error), qPrintable(error));
    QCOMPARE(combo->currentIndex(), 0);
    QVERIFY(!chooser->precision_field()->isEnabled());
    QCOMPARE(editor.memory_bar()->capacity_bytes(), host_memory_bytes());

    // A GPU this machine lacks: shown as a disabled entry and as a problem; no capacity.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", "3"), &error), qPrintable(error));
    QVERIFY(!editor.is_valid());
    QCOMPARE(chooser->device_of(combo->currentIndex()), QStringLiteral("cuda:3"));
    QVERIFY(!entry_enabled(combo, combo->currentIndex()));
    QVERIFY2(editor.field("parallel.gpus")->issue().contains("cuda:3"), qPrintable(editor.issues().join("; ")));
    QCOMPARE(editor.memory_bar()->capacity_bytes(), 0.0);
    combo->setCurrentIndex(1);
    QCOMPARE(editor.config().parallel.gpus, std::string());
    QCOMPARE(chooser->find_device("cuda:3"), -1);  // the placeholder went with the config
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));

    // The trainer's refusals show too: GPU ranks exchange over NCCL, not host memory.
    QVERIFY(editor.edit_field("parallel.ranks", "2"));
    QVERIFY2(editor.field("parallel.comm")->issue().contains("nccl"), qPrintable(editor.issues().join("; ")));
    QVERIFY(!editor.is_valid());
  }

  void placement_edits_keep_device_ranks_and_comm_consistent() {
    ExperimentConfig c;
    c.parallel.ranks = 4;
    c.parallel.comm = "nccl";
    // Two GPUs from cuda:0: rank r on cuda:r, over NCCL.
    QMap<QString, QString> e = edit_map(device_placement_edits(c, 0, 2));
    QCOMPARE(e.value("parallel.device"), QStringLiteral("cuda"));
    QCOMPARE(e.value("parallel.ranks"), QStringLiteral("2"));
    QCOMPARE(e.value("parallel.comm"), QStringLiteral("nccl"));
    QVERIFY(e.contains("parallel.gpus") && e.value("parallel.gpus").isEmpty());
    // From cuda:1 on, the list names them.
    e = edit_map(device_placement_edits(c, 1, 3));
    QCOMPARE(e.value("parallel.gpus"), QStringLiteral("1,2,3"));
    QCOMPARE(e.value("parallel.ranks"), QStringLiteral("3"));
    // One GPU: one rank, nothing to exchange over NCCL.
    e = edit_map(device_placement_edits(c, 1, 1));
    QCOMPARE(e.value("parallel.gpus"), QStringLiteral("1"));
    QCOMPARE(e.value("parallel.ranks"), QStringLiteral("1"));
    QCOMPARE(e.value("parallel.comm"), QStringLiteral("local"));
    // The CPU: ranks stay (CPU ranks), nccl becomes local, an mpi choice stays.
    e = edit_map(device_placement_edits(c, -1, 0));
    QCOMPARE(e.value("parallel.device"), QStringLiteral("cpu"));
    QVERIFY(!e.contains("parallel.ranks"));
    QCOMPARE(e.value("parallel.comm"), QStringLiteral("local"));
    c.parallel.comm = "mpi";
    QCOMPARE(edit_map(device_placement_edits(c, -1, 0)).value("parallel.comm"), QStringLiteral("mpi"));
    // Peer copies, where the config chose them, stay for several GPUs; the CPU has none.
    c.parallel.comm = "peer";
    QCOMPARE(edit_map(device_placement_edits(c, 0, 2)).value("parallel.comm"), QStringLiteral("peer"));
    QCOMPARE(edit_map(device_placement_edits(c, 0, 1)).value("parallel.comm"), QStringLiteral("local"));
    QCOMPARE(edit_map(device_placement_edits(c, -1, 0)).value("parallel.comm"), QStringLiteral("local"));
  }

  void two_gpus_chosen_on_the_setup_page_make_a_two_rank_nccl_run() {
    QTemporaryDir dir;
    RunManager runs;
    runs.set_db_path(dir.filePath("runs.db"));
    SetupPage page(&runs);
    ExperimentEditor* editor = page.editor();
    editor->set_device_catalog(two_gpus());
    page.resize(1400, 900);
    page.show();
    DeviceChooser* chooser = editor->device_chooser();
    QComboBox* combo = chooser->combo();
    QSpinBox* gpus = chooser->gpu_count();
    QVERIFY(!gpus->isEnabled());  // the CPU
    QVERIFY(!chooser->placement_note()->isVisible());

    combo->setCurrentIndex(1);  // cuda:0
    QVERIFY(gpus->isEnabled());
    QCOMPARE(gpus->value(), 1);
    QCOMPARE(gpus->maximum(), 2);
    QCOMPARE(editor->config().parallel.ranks, 1);
    QCOMPARE(editor->config().parallel.comm, std::string("local"));

    gpus->setValue(2);
    const ExperimentConfig& c = editor->config();
    QCOMPARE(c.parallel.device, std::string("cuda"));
    QCOMPARE(c.parallel.ranks, 2);
    QCOMPARE(c.parallel.comm, std::string("nccl"));
    QCOMPARE(c.parallel.gpus, std::string());  // rank r on cuda:r
    const ExperimentConfig back = yaml_config(*editor);
    QCOMPARE(back.parallel.device, std::string("cuda"));
    QCOMPARE(back.parallel.ranks, 2);
    QCOMPARE(back.parallel.comm, std::string("nccl"));
    QCOMPARE(editor->field("parallel.ranks")->value_text(), QStringLiteral("2"));
    QCOMPARE(editor->field("parallel.comm")->value_text(), QStringLiteral("nccl"));
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));
    QVERIFY(page.launch_button()->isEnabled());
    QVERIFY(chooser->placement_note()->isVisible());
    QCOMPARE(chooser->placement_note()->text(), QStringLiteral("2 ranks, one per GPU (cuda:0, cuda:1), exchanging over NCCL"));

    // From cuda:1 there is one GPU left: one rank, cuda:1.
    combo->setCurrentIndex(2);
    QCOMPARE(editor->config().parallel.ranks, 1);
    QCOMPARE(editor->config().parallel.gpus, std::string("1"));
    QCOMPARE(editor->config().parallel.comm, std::string("local"));
    QCOMPARE(gpus->maximum(), 1);
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));

    // Back to two GPUs, then the CPU: two CPU ranks, over local (NCCL is GPU only).
    combo->setCurrentIndex(1);
    gpus->setValue(2);
    QCOMPARE(editor->config().parallel.comm, std::string("nccl"));
    combo->setCurrentIndex(0);
    QCOMPARE(editor->config().parallel.device, std::string("cpu"));
    QCOMPARE(editor->config().parallel.ranks, 2);
    QCOMPARE(editor->config().parallel.comm, std::string("local"));
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));
    QVERIFY(!gpus->isEnabled());
    QCOMPARE(chooser->placement_note()->text(), QStringLiteral("2 ranks on the CPU, exchanging over local"));

    // A YAML naming two GPUs selects cuda:0 and shows 2 GPUs.
    QString error;
    QVERIFY2(editor->apply_yaml_text(with_parallel(*editor, "cuda", 2, "nccl", ""), &error), qPrintable(error));
    QCOMPARE(combo->currentIndex(), 1);
    QCOMPARE(gpus->value(), 2);
    QVERIFY2(editor->is_valid(), qPrintable(editor->issues().join("; ")));
  }

  void multi_gpu_config_problems_say_what_is_wrong() {
    ExperimentEditor editor;
    editor.set_device_catalog(two_gpus());
    QString error;
    auto issue_at = [&](const QString& key) { return editor.field(key)->issue(); };
    auto all = [&] { return editor.issues().join("; "); };

    // More GPU ranks than this machine has GPUs.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", 4, "nccl", ""), &error), qPrintable(error));
    QVERIFY(!editor.is_valid());
    QCOMPARE(issue_at("parallel.ranks"),
             QStringLiteral("4 GPU ranks need 4 GPUs, one each; cuda:2, cuda:3 are not on this machine (it has cuda:0, cuda:1)"));
    QCOMPARE(editor.device_chooser()->gpu_count()->value(), 4);  // shown as the config has it

    // NCCL on the CPU: the config check refuses the YAML, and the form field says why.
    QVERIFY(!editor.apply_yaml_text(with_parallel(editor, "cpu", 2, "nccl", ""), &error));
    QVERIFY2(error.contains("parallel.comm: nccl moves data between GPUs and needs parallel.device cuda (device is cpu)"),
             qPrintable(error));
    QVERIFY2(issue_at("parallel.comm").contains("nccl moves data between GPUs"), qPrintable(all()));
    QVERIFY(!editor.is_valid());
    // GPU ranks over host memory.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "local", ""), &error), qPrintable(error));
    QVERIFY2(issue_at("parallel.comm").contains("set parallel.comm: nccl"), qPrintable(all()));
    // A GPU list that does not name one GPU per rank, or names one twice.
    QVERIFY(!editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "nccl", "1"), &error));
    QVERIFY2(issue_at("parallel.gpus").contains("names 1 GPU(s) ('1') for parallel.ranks 2: name one GPU per rank"),
             qPrintable(all()));
    QVERIFY(!editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "nccl", "0,0"), &error));
    QVERIFY2(issue_at("parallel.gpus").contains("names GPU 0 twice ('0,0'): over NCCL each rank needs a GPU of its "
                                                "own; parallel.comm: peer lets ranks share one"),
             qPrintable(all()));
    // Over peer copies two ranks may share a GPU, and the note says so.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "peer", "0,0"), &error), qPrintable(error));
    QVERIFY2(editor.is_valid(), qPrintable(all()));
    QCOMPARE(editor.device_chooser()->placement_note()->text(),
             QStringLiteral("2 ranks sharing cuda:0, exchanging over peer copies"));
    // The same from the form: a GPU list typed into its field.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "nccl", ""), &error), qPrintable(error));
    QVERIFY(editor.is_valid());
    editor.edit_field("parallel.gpus", "1,1");
    QVERIFY(!editor.is_valid());
    QVERIFY2(issue_at("parallel.gpus").contains("names GPU 1 twice"), qPrintable(all()));
    // The list that fits.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cuda", 2, "nccl", "1,0"), &error), qPrintable(error));
    QVERIFY2(editor.is_valid(), qPrintable(all()));
    QCOMPARE(editor.device_chooser()->placement_note()->text(),
             QStringLiteral("2 ranks, one per GPU (cuda:1, cuda:0), exchanging over NCCL"));
    // A GPU list on the CPU is ignored: a warning, not a problem.
    QVERIFY2(editor.apply_yaml_text(with_parallel(editor, "cpu", 2, "local", "0,1"), &error), qPrintable(error));
    QVERIFY2(editor.is_valid(), qPrintable(all()));
    QVERIFY2(editor.warnings().join("; ").contains("parallel.gpus: GPU list '0,1' is ignored"),
             qPrintable(editor.warnings().join("; ")));
  }

  void precision_follows_the_device() {
    ExperimentEditor editor;
    editor.set_device_catalog(two_gpus());
    ConfigField* precision = editor.device_chooser()->precision_field();
    QCOMPARE(precision->value_text(), QStringLiteral("auto"));
    QVERIFY(!precision->isEnabled());
    editor.device_chooser()->combo()->setCurrentIndex(1);
    QVERIFY(precision->isEnabled());
    // Choosing a precision reaches the config, the YAML and the form's own field.
    auto* combo = qobject_cast<QComboBox*>(precision->editor());
    combo->setCurrentText("fp32");
    QCOMPARE(editor.config().train.precision, std::string("fp32"));
    QCOMPARE(yaml_config(editor).train.precision, std::string("fp32"));
    QCOMPARE(editor.field("train.precision")->value_text(), QStringLiteral("fp32"));
    combo->setCurrentText("bf16");
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));
    // bf16 back on the CPU: refused, and the field stays open so it can be fixed.
    editor.device_chooser()->combo()->setCurrentIndex(0);
    QVERIFY(!editor.is_valid());
    QVERIFY(!editor.field("train.precision")->issue().isEmpty());
    QVERIFY(precision->isEnabled());
    combo->setCurrentText("fp32");
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));
    QVERIFY(!precision->isEnabled());
  }

  void estimate_follows_the_precision() {
    ExperimentConfig fp32;
    fp32.parallel.device = "cuda";
    fp32.train.precision = "fp32";
    ExperimentConfig bf16 = fp32;
    bf16.train.precision = "bf16";
    ExperimentConfig automatic = fp32;
    automatic.train.precision = "auto";  // bf16 on a GPU
    const MemoryEstimate a = estimate_memory(fp32), b = estimate_memory(bf16);
    // Activations halve; the f32 norm/softmax statistics and i32 ids they keep beside them do not.
    QVERIFY(b.bytes_of("saved_activations") > 0.5 * a.bytes_of("saved_activations"));
    QVERIFY(b.bytes_of("saved_activations") < 0.52 * a.bytes_of("saved_activations"));
    QCOMPARE(b.bytes_of("parameters"), 1.5 * a.bytes_of("parameters"));  // + a 2-byte compute copy
    QCOMPARE(b.bytes_of("optimizer_state"), a.bytes_of("optimizer_state"));
    QCOMPARE(estimate_memory(automatic).total_bytes(), b.total_bytes());
    ExperimentConfig cpu = fp32;
    cpu.parallel.device = "cpu";
    cpu.train.precision = "auto";  // fp32 on the CPU
    QCOMPARE(estimate_memory(cpu).total_bytes(), a.total_bytes());
  }
};

QTEST_MAIN(TestDeviceChooser)
#include "test_device_chooser.moc"
