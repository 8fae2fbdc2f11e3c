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

constexpr double kMiB = 1024.0 * 1024.0;

// A step of a two-rank run, as train_metric_row writes it: bytes sent between ranks summed
// over ranks (dispatch s MiB, combine 2s MiB, gradients 3 MiB, shadow weights 0.25·s MiB,
// control 0.125 MiB; the total their sum), time waiting in communication 1.5 + 0.1·s ms and
// transfers overlapped with compute 0.5 + 0.2·s ms.
static MetricRow two_rank_row(int64_t step) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 512;
  r.wall_s = step * 0.2;
  const double s = double(step);
  r.values = {{"train/loss", 4.0},
              {"comm/remote_bytes", (3.25 * s + 3.125) * kMiB},
              {"comm/dispatch_bytes", s * kMiB},
              {"comm/combine_bytes", 2.0 * s * kMiB},
              {"comm/grad_bytes", 3.0 * kMiB},
              {"comm/weight_bytes", 0.25 * s * kMiB},
              {"comm/control_bytes", 0.125 * kMiB},
              {"comm/local_tokens", 1000.0 + s},
              {"perf/comm_ms", 1.5 + 0.1 * s},
              {"perf/comm_overlapped_ms", 0.5 + 0.2 * s},
              {"perf/compute_ms", 40.0}};
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
    // Rows with only the total (a run stored before weights and control were recorded): the
    // purposes stay empty, nothing is derived from the total.
    for (const char* purpose : {"comm/dispatch_bytes", "comm/weight_bytes", "comm/control_bytes"})
      QCOMPARE(dash.comm_plot()->point_count(dash.comm_plot()->find_curve(purpose)), 0);
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

  void comm_plot_shows_bytes_by_purpose_and_time_in_communication() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    StreamingPlot* comm = dash.comm_plot();
    // Nothing yet: the plot says why it is empty.
    comm->flush();
    QVERIFY(!comm->shown_empty_note().isEmpty());
    std::vector<MetricRow> rows;
    for (int s = 1; s <= 20; ++s) rows.push_back(two_rank_row(s));
    dash.add_rows(rows);
    comm->set_robust_autoscale(false);  // min..max, so the range is known exactly
    comm->flush();
    QVERIFY(comm->shown_empty_note().isEmpty());

    // The total and each purpose in MiB per step on the left axis; the time on the right.
    const QStringList bytes = LiveDashboard::comm_byte_curves();
    QCOMPARE(bytes, (QStringList{"comm/remote_bytes", "comm/dispatch_bytes", "comm/combine_bytes", "comm/grad_bytes",
                                 "comm/weight_bytes", "comm/control_bytes"}));
    for (const QString& name : bytes) {
      const int c = comm->find_curve(name);
      QVERIFY2(c >= 0, qPrintable(name));
      QVERIFY2(comm->curve_visible(c), qPrintable(name));
      QCOMPARE(comm->point_count(c), 20);
      QCOMPARE(comm->value_axis(c), comm->plot()->yAxis);
    }
    const int time = comm->find_curve("perf/comm_ms");
    QVERIFY(time >= 0);
    QVERIFY(comm->curve_visible(time));
    QCOMPARE(comm->point_count(time), 20);
    QCOMPARE(comm->value_axis(time), comm->plot()->yAxis2);
    QVERIFY(comm->plot()->yAxis2->visible());
    const int overlapped = comm->find_curve("perf/comm_overlapped_ms");
    QVERIFY(overlapped >= 0);
    QVERIFY(comm->curve_visible(overlapped));
    QCOMPARE(comm->point_count(overlapped), 20);
    QCOMPARE(comm->value_axis(overlapped), comm->plot()->yAxis2);
    QCOMPARE(comm->curve_count(), int(bytes.size()) + 2);  // comm/local_tokens and perf/compute_ms are not drawn here
    QCOMPARE(comm->find_curve("comm/local_tokens"), -1);
    QCOMPARE(comm->find_curve("perf/compute_ms"), -1);
    QCOMPARE(comm->plot()->yAxis->label(), QStringLiteral("MiB per step (all ranks)"));
    QCOMPARE(comm->plot()->yAxis2->label(), QStringLiteral("ms per step: waited, overlapped"));

    auto value = [&](const QString& curve, int i) { return comm->points(comm->find_curve(curve))[size_t(i)].value; };
    QCOMPARE(value("comm/dispatch_bytes", 4), 5.0);  // step 5
    QCOMPARE(value("comm/combine_bytes", 4), 10.0);
    QCOMPARE(value("comm/grad_bytes", 4), 3.0);
    QCOMPARE(value("comm/remote_bytes", 19), 68.125);  // step 20: 3.25·20 + 3.125
    QCOMPARE(value("comm/weight_bytes", 4), 1.25);      // step 5: 0.25·5, as recorded
    QCOMPARE(value("comm/weight_bytes", 19), 5.0);
    for (int i = 0; i < 20; ++i) QCOMPARE(value("comm/control_bytes", i), 0.125);
    QCOMPARE(value("perf/comm_ms", 0), 1.6);
    QCOMPARE(value("perf/comm_ms", 19), 3.5);
    QCOMPARE(comm->points(time)[19].step, int64_t(20));
    QCOMPARE(value("perf/comm_overlapped_ms", 0), 0.7);  // step 1: 0.5 + 0.2
    QCOMPARE(value("perf/comm_overlapped_ms", 19), 4.5);
    QCOMPARE(comm->points(overlapped)[19].step, int64_t(20));

    // Each axis spans its own values: MiB on the left (not bytes, not ms), ms on the right
    // (both times: exposed 1.6..3.5, overlapped 0.7..4.5).
    const QCPRange left = comm->plot()->yAxis->range(), right = comm->plot()->yAxis2->range();
    QVERIFY2(left.lower <= 0.125 && left.upper >= 68.125 && left.upper < 100.0,
             qPrintable(QString("%1..%2").arg(left.lower).arg(left.upper)));
    QVERIFY2(right.lower <= 0.7 && right.lower > 0.0 && right.upper >= 4.5 && right.upper < 10.0,
             qPrintable(QString("%1..%2").arg(right.lower).arg(right.upper)));
    const QString hover = comm->hover_text_at(5);
    QVERIFY2(hover.contains("comm/weight_bytes") && hover.contains("comm/control_bytes") && hover.contains("perf/comm_ms") &&
                 hover.contains("perf/comm_overlapped_ms: 1.5"),
             qPrintable(hover));
  }

  void comm_plot_is_between_gpus_on_a_gpu_run() {
    LiveDashboard dash;
    dash.resize(1000, 700);
    dash.show();
    QCOMPARE(dash.comm_plot()->title(), QStringLiteral("Between ranks"));
    dash.set_device("cuda:0", "bf16");
    dash.comm_plot()->flush();
    QCOMPARE(dash.comm_plot()->title(), QStringLiteral("Between GPUs"));
    QVERIFY(dash.comm_plot()->shown_empty_note().contains("one GPU"));
    dash.clear();  // the device stays until a run sets its own
    QCOMPARE(dash.comm_plot()->title(), QStringLiteral("Between GPUs"));
    dash.set_device("cpu", "fp32");
    dash.comm_plot()->flush();
    QCOMPARE(dash.comm_plot()->title(), QStringLiteral("Between ranks"));
    QVERIFY(dash.comm_plot()->shown_empty_note().contains("one rank"));
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

  // Over ranks the stacked categories are the rank whose peak was the largest (mem/rank): the
  // title names it, the stack shows that rank's bytes, and a new run starts without it.
  void memory_plot_names_the_rank_it_shows() {
    LiveDashboard dash;
    dash.resize(1000, 700);
    dash.show();
    QCOMPARE(dash.memory_plot()->title(), QStringLiteral("Memory by category"));
    MetricRow r = two_rank_row(1);
    r.values.push_back({"mem/parameters_bytes", 6.0 * kMiB});
    r.values.push_back({"mem/peak_bytes", 9.0 * kMiB});
    r.values.push_back({"mem/rank", 1.0});
    dash.add_rows({r});
    dash.memory_plot()->flush();
    QCOMPARE(dash.memory_plot()->title(), QStringLiteral("Memory by category, rank 1 (the largest peak)"));
    // What the plot draws: the text element above its axes.
    auto* drawn = qobject_cast<QCPTextElement*>(dash.memory_plot()->plot()->plotLayout()->element(0, 0));
    QVERIFY(drawn);
    QCOMPARE(drawn->text(), dash.memory_plot()->title());
    QCOMPARE(dash.memory_plot()->last_category_mib(0), 6.0);  // parameters: rank 1's bytes
    QCOMPARE(dash.memory_plot()->last_peak_mib(), 9.0);
    dash.clear();
    QCOMPARE(dash.memory_plot()->title(), QStringLiteral("Memory by category"));
    dash.add_rows({row(1)});  // one rank: no mem/rank
    QCOMPARE(dash.memory_plot()->title(), QStringLiteral("Memory by category"));
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
