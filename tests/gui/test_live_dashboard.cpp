// The live dashboard routes each metric name to its plot and names the run's device; job
// scripts are filled and written with the config beside them.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <qcustomplot.h>

#include "core/config/config_io.h"
#include "core/plan/memory_plan.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/plot/expert_load_heat_map.h"
#include "widgets/plot/layer_bar_plot.h"
#include "widgets/plot/stacked_memory_plot.h"
#include "widgets/plot/streaming_plot.h"
#include "widgets/workbench/job_script.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/run_manager.h"

using namespace mok;
using namespace mok::gui;

static MetricRow row(int64_t step) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 256;
  r.wall_s = step * 0.1;
  r.values = {{"train/loss", 5.0 - 0.01 * step},
              {"perf/tokens_per_s", 1000.0 + step},
              {"mem/parameters_bytes", 1 << 20},
              {"mem/saved_activations_bytes", 2 << 20},
              {"mem/peak_bytes", 4 << 20},
              {"mem/saved/layer0/attn.qkv.input", 1 << 20},
              {"mem/saved/layer0/mlp.input", 1 << 20},
              {"mem/saved/layer1/attn.qkv.input", 3 << 20},
              {"kittens/rank/layer0", 8},
              {"kittens/rank/layer1", 16},
              {"comm/remote_bytes", 512.0},
              {"moe/load/layer1/expert0", 0.25},
              {"moe/load/layer1/expert1", 0.75},
              {"moe/load/layer0/expert0", 0.5},
              {"moe/load/layer0/expert1", 0.5}};
  if (step % 10 == 0) r.values.push_back({"val/bpb", 2.0});
  return r;
}

class TestLiveDashboard : public QObject {
  Q_OBJECT

 private slots:
  void routes_metrics_to_plots() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    std::vector<MetricRow> rows;
    for (int s = 1; s <= 50; ++s) rows.push_back(row(s));
    dash.add_rows(rows);
    for (CoalescedPlot* p : dash.plots()) p->flush();
    QCOMPARE(dash.rows_seen(), 50);
    QCOMPARE(dash.last_step(), int64_t(50));
    QCOMPARE(dash.loss_plot()->point_count(dash.loss_plot()->find_curve("train/loss")), 50);
    QCOMPARE(dash.loss_plot()->point_count(dash.loss_plot()->find_curve("val/loss")), 0);
    QCOMPARE(dash.validation_plot()->point_count(dash.validation_plot()->find_curve("val/bpb")), 5);
    QCOMPARE(dash.throughput_plot()->point_count(0), 50);
    QCOMPARE(dash.comm_plot()->point_count(dash.comm_plot()->find_curve("comm/remote_bytes")), 50);
    QCOMPARE(dash.memory_plot()->row_count(), 50);
    QCOMPARE(dash.memory_plot()->last_total_mib(), 3.0);  // peak is not a category
    const std::vector<double> bars = dash.layer_plot()->bar_values();
    QCOMPARE(int(bars.size()), 2);
    QCOMPARE(bars[0], 2.0);  // MiB summed over kinds
    QCOMPARE(bars[1], 3.0);
    QCOMPARE(dash.heat_map()->expert_count(), 2);  // layer 0 first
    QCOMPARE(dash.heat_map()->row_count(), 50);
    QCOMPARE(dash.heat_map()->cell(0, 0), 0.5);

    dash.clear();
    for (CoalescedPlot* p : dash.plots()) p->flush();
    QCOMPARE(dash.rows_seen(), 0);
    QCOMPARE(dash.loss_plot()->point_count(0), 0);
    QCOMPARE(dash.heat_map()->row_count(), 0);
  }

  void memory_axis_and_header_name_the_device() {
    LiveDashboard dash;
    QCOMPARE(dash.memory_plot()->y_label(), QStringLiteral("peak in step, MiB"));
    QCOMPARE(dash.device_text(), QString());
    dash.set_device("cuda:0", "bf16");
    QCOMPARE(dash.device_text(), QStringLiteral("cuda:0 · bf16"));
    QCOMPARE(dash.memory_plot()->y_label(), QStringLiteral("GPU memory (cuda:0), peak in step, MiB"));
    dash.set_device("cpu", "fp32");
    QCOMPARE(dash.device_text(), QStringLiteral("cpu · fp32"));
    QCOMPARE(dash.memory_plot()->y_label(), QStringLiteral("memory (cpu), peak in step, MiB"));
    dash.clear();  // a new run sets its own; clearing the data keeps it
    QCOMPARE(dash.memory_plot()->y_label(), QStringLiteral("memory (cpu), peak in step, MiB"));
  }

  void memory_plot_draws_the_plan_beside_the_measurement() {
    LiveDashboard dash;
    dash.resize(1000, 700);
    dash.show();
    std::vector<MetricRow> rows;
    for (int s = 1; s <= 20; ++s) rows.push_back(row(s));
    dash.add_rows(rows);
    dash.memory_plot()->flush();
    QVERIFY(!dash.memory_plot()->planned_line_visible());
    // A plan above every measured figure: the line shows at its value and the axis reaches it.
    dash.set_planned_bytes(40.0 * 1024 * 1024);
    QVERIFY(dash.memory_plot()->planned_line_visible());
    QCOMPARE(dash.memory_plot()->planned_mib(), 40.0);
    QVERIFY(dash.memory_plot()->plot()->yAxis->range().upper >= 40.0);
    // A new run starts without the old run's plan.
    dash.clear();
    QVERIFY(!dash.memory_plot()->planned_line_visible());
  }

  void live_page_shows_the_plan_of_a_job() {
    QTemporaryDir dir;
    RunManager runs;
    runs.set_db_path(dir.filePath("runs.db"));
    LivePage page(&runs);
    const ExperimentConfig cfg = parse_experiment_config("name: planned\nparallel: {comm: mpi}\n", "plan.yaml");
    QSignalSpy finished(&runs, &RunManager::job_finished);
    const int job = runs.launch(cfg);
    const double planned = estimate_memory(cfg).total_bytes();
    QCOMPARE(runs.job(job).planned_bytes, planned);
    page.show_job(job);
    QVERIFY(page.dashboard()->memory_plot()->planned_line_visible());
    QCOMPARE(page.dashboard()->memory_plot()->planned_mib(), planned / (1024.0 * 1024.0));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
  }

  void live_page_names_the_device_of_a_job() {
    // Two runs the trainer refuses at once (no GPU backend in this suite; MPI outside mpirun),
    // so nothing trains: the page shows each one's device and precision from its config.
    QTemporaryDir dir;
    RunManager runs;
    runs.set_db_path(dir.filePath("runs.db"));
    LivePage page(&runs);
    // train.precision auto: bf16 on a GPU, fp32 on the CPU.
    const ExperimentConfig gpu = parse_experiment_config("name: on-gpu\nparallel: {device: cuda, gpus: '1'}\n", "gpu.yaml");
    const ExperimentConfig cpu = parse_experiment_config("name: on-cpu\nparallel: {comm: mpi}\n", "cpu.yaml");
    QSignalSpy finished(&runs, &RunManager::job_finished);
    const int gpu_job = runs.launch(gpu);
    const int cpu_job = runs.launch(cpu);
    QCOMPARE(runs.job(gpu_job).device, QStringLiteral("cuda:1"));
    QCOMPARE(runs.job(gpu_job).precision, QStringLiteral("bf16"));
    page.show_job(gpu_job);
    QCOMPARE(page.dashboard()->device_text(), QStringLiteral("cuda:1 · bf16"));
    QCOMPARE(page.dashboard()->memory_plot()->y_label(), QStringLiteral("GPU memory (cuda:1), peak in step, MiB"));
    page.show_job(cpu_job);
    QCOMPARE(page.dashboard()->device_text(), QStringLiteral("cpu · fp32"));
    QCOMPARE(page.dashboard()->memory_plot()->y_label(), QStringLiteral("memory (cpu), peak in step, MiB"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 20000);
    QCOMPARE(runs.job(gpu_job).status, RunStatus::failed);
    QVERIFY2(runs.job(gpu_job).message.contains("parallel.device: cuda"), qPrintable(runs.job(gpu_job).message));
  }

  void job_script_written_with_config() {
    QTemporaryDir dir;
    ExperimentConfig c;
    c.name = "my run/1";
    c.parallel.device = "cuda";
    c.parallel.ranks = 2;
    const QString text = job_script_text(c, "job.sbatch", "job.yaml");
    QVERIFY(text.contains("#SBATCH --job-name=my_run_1"));
    QVERIFY(text.contains("#SBATCH --gpus=2"));
    QVERIFY(text.contains("train \"job.yaml\""));
    QVERIFY(!text.contains("{{"));
    QString error;
    QVERIFY2(write_job_script(c, dir.filePath("job.sbatch"), &error), qPrintable(error));
    QVERIFY(QFileInfo(dir.filePath("job.sbatch")).isExecutable());
    const ExperimentConfig back = load_experiment_config(dir.filePath("job.yaml").toStdString());
    QCOMPARE(back.name, c.name);
    QCOMPARE(back.parallel.ranks, 2);
    QVERIFY(!write_job_script(c, "/nonexistent-dir/x/job.sbatch", &error));
    QVERIFY(!error.isEmpty());
  }
};

QTEST_MAIN(TestLiveDashboard)
#include "test_live_dashboard.moc"
