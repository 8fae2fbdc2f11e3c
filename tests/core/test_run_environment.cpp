// RunEnvironment: what this process reports about its CPU and BLAS (checked against
// /proc/cpuinfo and OpenBLAS itself), which differences count as other hardware, and that
// the run store keeps one environment per run: this process's by default, a given one when
// passed, read back with the run, deleted with it, and a warning event when a run resumes
// on other hardware.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <cblas.h>

#include <fstream>
#include <thread>

#include "core/config/experiment_config.h"
#include "core/store/run_environment.h"
#include "core/store/run_store.h"
#include "core/store/run_store_sink.h"

using mok::RunEnvironment;
using mok::RunStore;

namespace {

// The first "model name" line of /proc/cpuinfo, read here without the probe's code.
QString cpuinfo_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const QString l = QString::fromStdString(line);
    if (l.section(':', 0, 0).trimmed() == "model name") return l.section(':', 1).trimmed();
  }
  return {};
}

RunEnvironment cpu_environment(const char* cpu, const char* kernel) {
  RunEnvironment e;
  e.recorded = true;
  e.cpu_model = cpu;
  e.cpu_count = 64;
  e.threads = 2;
  e.blas_library = "OpenBLAS 0.3.21";
  e.blas_kernel = kernel;
  e.blas_config = std::string("OpenBLAS 0.3.21 DYNAMIC_ARCH ") + kernel + " MAX_THREADS=64";
  return e;
}

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

class TestRunEnvironment : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string db_path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

 private slots:
  void probeReportsThisCpuAndTheLoadedKernel() {
    const RunEnvironment env = mok::probe_run_environment();
    QVERIFY(env.recorded);
    const QString model = cpuinfo_model_name();
    QCOMPARE(q(env.cpu_model), model.isEmpty() ? QString("unknown") : model);
    QCOMPARE(env.cpu_count, int(std::thread::hardware_concurrency()));
    // This build computes its GEMMs with OpenBLAS: the probe names the kernel family that
    // OpenBLAS loaded (OPENBLAS_CORETYPE picks it when set), as OpenBLAS reports it.
    QVERIFY(!env.blas_kernel.empty());
    QCOMPARE(q(env.blas_kernel), QString(openblas_get_corename()).trimmed());
    QCOMPARE(q(env.blas_config), QString(openblas_get_config()).trimmed());
    QVERIFY2(q(env.blas_library).startsWith("OpenBLAS "), env.blas_library.c_str());
    QVERIFY2(q(env.blas_config).contains(q(env.blas_kernel)), env.blas_config.c_str());
    QCOMPARE(env.threads, 0);  // the run's setting, filled by the store from the config
    QVERIFY(env.gpu_model.empty() && env.gpu_driver.empty() && env.cuda_version.empty() &&
            env.cublas_version.empty() && env.nccl_version.empty());
  }

  void onlyHardwareDifferencesCount() {
    const RunEnvironment a = cpu_environment("AMD EPYC 9654", "Cooperlake");
    QVERIFY(mok::environment_differences(a, a).empty());
    RunEnvironment more_threads = a;  // results are bitwise the same for any thread count
    more_threads.threads = 16;
    more_threads.cpu_count = 8;
    QVERIFY(mok::environment_differences(a, more_threads).empty());

    // Another kernel family: one difference (the build line that names it is not counted twice).
    const RunEnvironment haswell = cpu_environment("AMD EPYC 9654", "Haswell");
    const auto d = mok::environment_differences(a, haswell);
    QCOMPARE(d.size(), size_t(1));
    QCOMPARE(q(d[0].key), QString("blas_kernel"));
    QCOMPARE(q(d[0].base), QString("Cooperlake"));
    QCOMPARE(q(d[0].other), QString("Haswell"));
    QCOMPARE(q(mok::describe_differences(d)), QString("BLAS kernel Haswell vs Cooperlake"));

    RunEnvironment intel = cpu_environment("Intel(R) Xeon(R) Gold 6338", "SkylakeX");
    intel.blas_library = "OpenBLAS 0.3.26";
    QCOMPARE(q(mok::describe_differences(mok::environment_differences(a, intel))),
             QString("CPU Intel(R) Xeon(R) Gold 6338 vs AMD EPYC 9654; BLAS OpenBLAS 0.3.26 vs OpenBLAS 0.3.21; "
                     "BLAS kernel SkylakeX vs Cooperlake"));

    RunEnvironment gpu = a;
    gpu.gpu_model = "NVIDIA H200";
    gpu.cuda_version = "13.0";
    const auto g = mok::environment_differences(a, gpu);
    QCOMPARE(g.size(), size_t(2));
    QCOMPARE(q(g[0].key), QString("gpu_model"));
    QCOMPARE(q(g[0].base), QString("-"));  // empty shows as "-"
    QCOMPARE(q(g[1].key), QString("cuda_version"));

    // Without a recorded environment nothing can be told: one entry saying so.
    const RunEnvironment unknown;
    const auto u = mok::environment_differences(a, unknown);
    QCOMPARE(u.size(), size_t(1));
    QCOMPARE(q(u[0].key), QString("environment"));
    QCOMPARE(q(u[0].other), QString("not recorded"));
    QCOMPARE(mok::environment_differences(unknown, unknown).size(), size_t(1));
  }

  void summaryLine() {
    RunEnvironment a = cpu_environment("AMD EPYC 9654", "Cooperlake");
    QCOMPARE(q(mok::environment_summary(a)), QString("AMD EPYC 9654 · 64 CPUs · 2 threads · OpenBLAS 0.3.21, kernel Cooperlake"));
    a.threads = 1;
    a.gpu_model = "NVIDIA H200";
    a.gpu_driver = "570.86";
    a.cuda_version = "13.0";
    QCOMPARE(q(mok::environment_summary(a)),
             QString("AMD EPYC 9654 · 64 CPUs · 1 thread · OpenBLAS 0.3.21, kernel Cooperlake · NVIDIA H200, driver 570.86, CUDA 13.0"));
    QCOMPARE(q(mok::environment_summary(RunEnvironment{})), QString("not recorded"));
  }

  void storeKeepsOneEnvironmentPerRun() {
    RunStore store = RunStore::open(db_path("env.db"));
    // Default: this process's environment, with the thread count of the run's config.
    const int64_t here = store.create_run({.name = "here", .config_yaml = "parallel: {threads: 3}\n"});
    const RunEnvironment probed = mok::probe_run_environment();
    const RunEnvironment got = store.get_run(here).environment;
    QVERIFY(got.recorded);
    QCOMPARE(got.threads, 3);
    for (const mok::EnvironmentTextField& f : mok::environment_text_fields()) QCOMPARE(q(got.*f.member), q(probed.*f.member));
    QCOMPARE(got.cpu_count, probed.cpu_count);
    // Without parallel.threads in the config: its default.
    QCOMPARE(store.get_run(store.create_run({.name = "default threads", .config_yaml = "name: x\n"})).environment.threads,
             mok::ParallelConfig{}.threads);

    // Given: kept field by field (GPU fields too).
    RunEnvironment given = cpu_environment("Intel(R) Xeon(R) Platinum 8480+", "SapphireRapids");
    given.gpu_model = "NVIDIA H200";
    given.gpu_driver = "570.86.15";
    given.cuda_version = "13.0";
    given.cublas_version = "13.0.0";
    given.nccl_version = "2.27.3";
    const int64_t there = store.create_run({.name = "there", .environment = given});
    const RunEnvironment back = RunStore::open_readonly(db_path("env.db")).get_run(there).environment;
    QVERIFY(back.recorded);
    for (const mok::EnvironmentTextField& f : mok::environment_text_fields()) QCOMPARE(q(back.*f.member), q(given.*f.member));
    QCOMPARE(back.cpu_count, 64);
    QCOMPARE(back.threads, 2);

    // Deleted with its run.
    store.delete_run(there);
    QVERIFY(!store.find_run(there).has_value());
    const int64_t again = store.create_run({.name = "again", .environment = given});
    QCOMPARE(store.get_run(again).environment.gpu_model, std::string("NVIDIA H200"));
  }

  void resumeOnOtherHardwareIsAWarning() {
    RunStore store = RunStore::open(db_path("resume.db"));
    // Same hardware: no warning.
    const int64_t same = store.create_run({.name = "same"});
    {
      mok::RunStoreSink sink(store);
      sink.on_run_started({.run_id = same, .name = "same", .start_step = 10});
    }
    for (const auto& e : store.events(same)) QVERIFY2(e.level != "warning", e.text.c_str());

    // Created on another machine: resuming here is recorded, and the stored environment (of
    // the run's start) is kept. (Names no CPU or OpenBLAS reports, so they differ from this
    // machine's whatever it is.)
    const RunEnvironment elsewhere = cpu_environment("Elsewhere CPU", "ElsewhereKernel");
    const int64_t moved = store.create_run({.name = "moved", .environment = elsewhere});
    {
      mok::RunStoreSink sink(store);
      sink.on_run_started({.run_id = moved, .name = "moved", .start_step = 10});
      QCOMPARE(sink.error_count(), 0);
    }
    const auto events = store.events(moved);
    QCOMPARE(q(events.back().level), QString("warning"));
    const QString text = q(events.back().text);
    QVERIFY2(text.contains("resumed at step 10 on other hardware"), qPrintable(text));
    QVERIFY2(text.contains("vs Elsewhere CPU") && text.contains("vs ElsewhereKernel"), qPrintable(text));
    QCOMPARE(store.get_run(moved).environment.cpu_model, std::string("Elsewhere CPU"));
  }
};

QTEST_GUILESS_MAIN(TestRunEnvironment)
#include "test_run_environment.moc"
