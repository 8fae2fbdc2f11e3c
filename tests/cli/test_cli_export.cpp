// `mok export --slurm` as a user runs it, and the job it writes run as Slurm would run it:
//   - a GPU export (2 nodes x 4 GPUs) writes job.sbatch (executable, bash -n clean, one task
//     per GPU through srun --mpi=pmix, an mpirun line in a comment, NCCL_NVLS_ENABLE=0, the
//     requeue on USR1), job.yaml (the config with every key, as `mok config print` writes it,
//     with the layout in `parallel` and the files under runs/) and README.md (the submit line);
//   - bad counts, a missing or broken config, a bad --time or partition, a layout the model
//     cannot split, and an existing folder without --force exit 2 and write nothing; --force
//     replaces the three files and keeps the rest of the folder;
//   - a CPU export (--cpu, 1 node x 2 tasks) runs through its own script with srun standing
//     in as `mpirun -np 2 --oversubscribe`: the run lands in the store finished, over 2 ranks;
//   - USR1 (the time limit) stops that job with a checkpoint (the script signals its step with
//     `scancel --signal=TERM`, here passed on to mpirun) and calls `scontrol requeue` with the
//     job id; the next start resumes the same run and finishes it with the uninterrupted
//     run's final loss, bit for bit;
//   - where a Slurm controller answers, `sbatch --test-only` accepts the script (elsewhere the
//     check says so and passes on bash -n alone; cluster.slurm_loopback_test runs the job
//     under a Slurm of its own).
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <QDir>
#include <QJsonObject>
#include <QTemporaryDir>

#include "core/config/config_io.h"
#include "core/store/run_store.h"
#include "support/cli_process.h"
#include "support/file_contents.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using mok::test::read_all;

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) { return mok::test::run_command(MOK_CLI_PATH, args, cwd); }

// Every entry under `dir`, hidden ones too, as relative paths.
QStringList entries(const QString& dir) {
  QStringList out;
  for (const auto& e : fs::recursive_directory_iterator(dir.toStdString()))
    out << QString::fromStdString(fs::relative(e.path(), dir.toStdString()).string());
  out.sort();
  return out;
}

void write_file(const QString& path, const std::string& text, bool executable = false) {
  std::ofstream(path.toStdString()) << text;
  if (executable)
    fs::permissions(path.toStdString(), fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
}

}  // namespace

class TestCliExport : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString cfg_;       // tiny, on the CPU, one rank: what a user exports
  QString bin_;       // stand-ins for srun, scancel and scontrol
  QString scontrol_log_;  // what the stand-ins of scancel and scontrol were asked
  QString srun_pid_;      // the srun stand-in's pid (mpirun's, after exec)
  double uninterrupted_loss_ = 0;  // the CPU job's final train loss

  // Runs the job script as Slurm's batch step would: from its folder, with the job's
  // variables, `mok` as MOK and the stand-ins first on the PATH.
  QProcessEnvironment job_env(const QString& folder) const {
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    e.insert("PATH", bin_ + ":" + e.value("PATH"));
    e.insert("MOK", MOK_CLI_PATH);
    e.insert("SLURM_SUBMIT_DIR", folder);
    e.insert("SLURM_JOB_ID", "4242");
    e.insert("SLURM_NTASKS", "2");
    e.insert("SCONTROL_LOG", scontrol_log_);
    e.insert("SRUN_PID_FILE", srun_pid_);
    return e;
  }

  Result run_job(const QString& folder) {
    QProcess p;
    p.setWorkingDirectory(folder);
    p.setProcessEnvironment(job_env(folder));
    p.start("bash", {folder + "/job.sbatch"});
    Result r;
    if (!p.waitForFinished(180000)) {
      p.kill();
      p.waitForFinished();
      r.err = "timed out";
      return r;
    }
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    r.json = QJsonDocument::fromJson(r.out.trimmed().split('\n').last().toUtf8()).object();
    return r;
  }

  QString export_cpu_job(const QString& name) {
    const Result r =
        run_mok({"export", cfg_, "--slurm", "--cpu", "--nodes", "1", "--gpus-per-node", "2", "--out", name}, tmp_.path());
    if (r.exit_code != 0) qWarning("%s", qPrintable(r.err));
    return r.exit_code == 0 ? tmp_.path() + "/" + name : QString();
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path corpus = tmp_.path().toStdString() + "/corpus";
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    cfg_ = tmp_.path() + "/tiny.yaml";
    write_file(cfg_, "name: tiny\nseed: 7\n"
                     "data:     {corpus: " + corpus.string() + ", tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
                     "model:    {layers: 2, d_model: 32, heads: 2, experts: 8, top_k: 2, expert_hidden: 32, "
                     "dense_hidden: 64}\n"
                     "train:    {steps: 400, batch: 8, lr: 3.0e-3, warmup_steps: 5, eval_every: 100, "
                     "eval_batches: 1, checkpoint_every: 10}\n"
                     // A slow emulated link (slept, results unchanged) keeps each step a few
                     // milliseconds long, so Slurm's USR1 lands well before the last step even on
                     // a fast, idle machine.
                     "parallel: {device: cpu, ranks: 1, comm: local, threads: 1, link_gbps: 0.02, link_sleep: true}\n"
                     "logging:  {progress: false, checkpoint_dir: /elsewhere/checkpoints}\n");
    // srun's options dropped, its tasks started by Open MPI, as the script's comment offers.
    bin_ = tmp_.path() + "/bin";
    QVERIFY(QDir().mkpath(bin_));
    const std::string root = geteuid() == 0 ? " --allow-run-as-root" : "";
    srun_pid_ = tmp_.path() + "/srun.pid";
    write_file(bin_ + "/srun",
               "#!/bin/bash\n"
               "echo $$ > \"$SRUN_PID_FILE\"\n"
               "while [[ $# -gt 0 && $1 == --* ]]; do shift; done\n"
               "exec mpirun -np \"$SLURM_NTASKS\" --oversubscribe" + root + " \"$@\"\n",
               true);
    scontrol_log_ = tmp_.path() + "/scontrol.log";
    // Slurm signals the job's one step: here mpirun, which passes SIGTERM on to its ranks.
    write_file(bin_ + "/scancel",
               "#!/bin/bash\necho scancel \"$@\" >> \"$SCONTROL_LOG\"\nkill -TERM \"$(cat \"$SRUN_PID_FILE\")\"\n",
               true);
    write_file(bin_ + "/scontrol", "#!/bin/bash\necho scontrol \"$@\" >> \"$SCONTROL_LOG\"\n", true);
    QVERIFY2(!QStandardPaths::findExecutable("mpirun").isEmpty(), "mpirun not found on PATH: install openmpi-bin");
  }

  void helpNamesTheOptions() {
    const Result r = run_mok({"export", "--help"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    for (const char* option : {"--slurm", "--nodes", "--gpus-per-node", "--cpu", "--tasks-per-node", "--partition",
                               "--time", "--account", "--out", "--force"})
      QVERIFY2(r.out.contains(option), option);
    QVERIFY(run_mok({"--help"}, tmp_.path()).out.contains("export"));
  }

  void gpuExportWritesTheFolder() {
    // Head width 32: what the GPU path takes.
    const Result r = run_mok({"export", cfg_, "--slurm", "--nodes", "2", "--gpus-per-node", "4", "--partition", "gpu",
                              "--account", "proj-7", "--time", "1-12:00:00", "--set", "model.heads=1", "--out", "gpu",
                              "--json"},
                             tmp_.path());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QString dir = tmp_.path() + "/gpu";
    QCOMPARE(entries(dir), (QStringList{"README.md", "job.sbatch", "job.yaml"}));
    QVERIFY(QFileInfo(dir + "/job.sbatch").isExecutable());
    QCOMPARE(r.json["ranks"].toInt(), 8);
    QCOMPARE(r.json["comm"].toString(), QString("nccl"));
    QCOMPARE(r.json["submit"].toString(), QString("cd gpu && sbatch job.sbatch"));
    // The memory plan of the layout is said before the folder is written.
    QVERIFY(r.json["planned_bytes_per_rank"].toDouble() > 0);
    QVERIFY2(r.out.indexOf("memory plan: ") >= 0 && r.out.indexOf("memory plan: ") < r.out.indexOf("wrote "),
             qPrintable(r.out));

    const QString script = QString::fromStdString(read_all((dir + "/job.sbatch").toStdString()));
    for (const char* line : {"#SBATCH --job-name=tiny\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n",
                             "#SBATCH --gpus-per-node=4\n", "#SBATCH --cpus-per-task=1\n",
                             "#SBATCH --time=1-12:00:00\n", "#SBATCH --partition=gpu\n", "#SBATCH --account=proj-7\n",
                             "#SBATCH --requeue\n", "#SBATCH --signal=B:USR1@120\n", "export NCCL_NVLS_ENABLE=0",
                             "trap on_time_limit USR1\n", "scontrol requeue \"$SLURM_JOB_ID\"",
                             "stop_training() { scancel --signal=TERM \"$SLURM_JOB_ID\" || true; }\n",
                             "CHECKPOINTS=\"runs/checkpoints\"\n", "DB=\"runs/mok.db\"\n",
                             "\"$CHECKPOINTS\"/tiny-run*/",
                             "srun --mpi=pmix --kill-on-bad-exit=1 \"$MOK\" train \"job.yaml\" --db \"$DB\" --json",
                             "#   mpirun -np \"$SLURM_NTASKS\" --map-by ppr:4:node"})
      QVERIFY2(script.contains(line), line);
    QVERIFY(!script.contains("{{"));
    QCOMPARE(run_mok({"config", "validate", dir + "/job.yaml"}, tmp_.path()).exit_code, 0);
    QCOMPARE(mok::test::run_command("bash", {"-n", dir + "/job.sbatch"}, tmp_.path()).exit_code, 0);

    // The config as `mok config print` writes it, with the layout and the job's folders.
    const mok::ExperimentConfig job = mok::load_experiment_config((dir + "/job.yaml").toStdString());
    mok::ExperimentConfig expected = mok::load_experiment_config(cfg_.toStdString(), {"model.heads=1"});
    QCOMPARE(job.parallel.ranks, 8);
    QCOMPARE(job.parallel.device, std::string("cuda"));
    QCOMPARE(job.parallel.comm, std::string("nccl"));
    QCOMPARE(job.logging.checkpoint_dir, std::string("runs/checkpoints"));
    expected.parallel.ranks = 8;
    expected.parallel.device = "cuda";
    expected.parallel.comm = "nccl";
    expected.logging.db = "runs/mok.db";
    expected.logging.checkpoint_dir = "runs/checkpoints";
    QVERIFY(job == expected);
    QCOMPARE(read_all((dir + "/job.yaml").toStdString()), mok::experiment_config_to_yaml(expected));
    const Result printed = run_mok({"config", "print", dir + "/job.yaml"}, tmp_.path());
    QCOMPARE(printed.out.toStdString(), read_all((dir + "/job.yaml").toStdString()));

    const QString readme = QString::fromStdString(read_all((dir + "/README.md").toStdString()));
    QVERIFY2(readme.contains("\n    sbatch job.sbatch\n"), qPrintable(readme));
    QVERIFY(readme.contains("2 node(s) with 4 task(s) each (8 rank(s), one per GPU, over NCCL)"));
    QVERIFY(readme.contains("runs/mok.db"));
  }

  void badInputExitsTwoAndWritesNothing() {
    QTemporaryDir work;
    write_file(work.path() + "/broken.yaml", "name: b\nmodel:\n  layers: 2\n  d_modl: 32\n");
    const QStringList ok = {"--slurm", "--nodes", "1", "--gpus-per-node", "2", "--out", "x", "--set", "model.heads=1"};
    struct Case {
      QStringList args;
      const char* says;
    };
    const QList<Case> cases = {
        {QStringList{cfg_, "--slurm", "--nodes", "0", "--gpus-per-node", "2", "--out", "x"}, "--nodes must be at least 1"},
        {QStringList{cfg_, "--slurm", "--nodes", "two", "--gpus-per-node", "2", "--out", "x"}, "--nodes needs a whole number"},
        {QStringList{cfg_, "--slurm", "--nodes", "1", "--gpus-per-node", "-1", "--out", "x"}, "--gpus-per-node must be at least 1"},
        {QStringList{cfg_, "--slurm", "--nodes", "1", "--out", "x"}, "missing --gpus-per-node"},
        {QStringList{cfg_, "--nodes", "1", "--gpus-per-node", "2", "--out", "x"}, "--slurm"},
        {QStringList{cfg_, "--slurm", "--nodes", "1", "--tasks-per-node", "2", "--out", "x"}, "--tasks-per-node is for --cpu"},
        {QStringList{work.path() + "/none.yaml"} + ok, "none.yaml"},
        {QStringList{work.path() + "/broken.yaml"} + ok, "broken.yaml:4:3: model.d_modl"},
        {QStringList{cfg_} + ok + QStringList{"--time", "4h"}, "time '4h' is not a Slurm time limit"},
        {QStringList{cfg_} + ok + QStringList{"--partition", "a b"}, "partition 'a b'"},
        {QStringList{cfg_} + ok + QStringList{"--account", "x\ny"}, "account"},
        // Eight rows per micro-batch do not split over 3 ranks.
        {QStringList{cfg_, "--slurm", "--cpu", "--nodes", "3", "--tasks-per-node", "1", "--out", "x"}, "parallel.ranks (3)"},
    };
    for (const Case& c : cases) {
      const Result r = run_mok(QStringList{"export"} + c.args, work.path());
      const QString what = c.args.join(' ') + "\n" + r.err;
      QVERIFY2(r.exit_code == 2, qPrintable(what));
      QVERIFY2(r.err.contains(c.says), qPrintable(what));
      QVERIFY2(!QFileInfo::exists(work.path() + "/x"), qPrintable(what));
    }
    QCOMPARE(entries(work.path()), (QStringList{"broken.yaml"}));

    // An existing folder: refused untouched, then --force replaces the job files only.
    const QString out = work.path() + "/x";
    QVERIFY(QDir().mkpath(out + "/runs"));
    write_file(out + "/job.yaml", "my notes\n");
    write_file(out + "/runs/keep.txt", "results\n");
    Result r = run_mok(QStringList{"export", cfg_} + ok, work.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("x exists") && r.err.contains("--force"), qPrintable(r.err));
    QCOMPARE(entries(out), (QStringList{"job.yaml", "runs", "runs/keep.txt"}));
    QCOMPARE(read_all((out + "/job.yaml").toStdString()), std::string("my notes\n"));
    r = run_mok(QStringList{"export", cfg_} + ok + QStringList{"--force"}, work.path());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(entries(out), (QStringList{"README.md", "job.sbatch", "job.yaml", "runs", "runs/keep.txt"}));
    QCOMPARE(mok::load_experiment_config((out + "/job.yaml").toStdString()).parallel.ranks, 2);
    QCOMPARE(read_all((out + "/runs/keep.txt").toStdString()), std::string("results\n"));
  }

  void cpuJobTrainsOverTwoMpiRanks() {
    const QString dir = export_cpu_job("cpu");
    QVERIFY(!dir.isEmpty());
    const QString script = QString::fromStdString(read_all((dir + "/job.sbatch").toStdString()));
    QVERIFY(script.contains("#SBATCH --ntasks-per-node=2\n"));
    QVERIFY(!script.contains("--gpus"));
    QCOMPARE(mok::test::run_command("bash", {"-n", dir + "/job.sbatch"}, dir).exit_code, 0);
    const mok::ExperimentConfig job = mok::load_experiment_config((dir + "/job.yaml").toStdString());
    QCOMPARE(job.parallel.comm, std::string("mpi"));
    QCOMPARE(job.parallel.device, std::string("cpu"));
    QCOMPARE(job.parallel.ranks, 2);

    const Result r = run_job(dir);
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + "\n" + r.err));
    QCOMPARE(r.out.count("\"run_id\""), 1);  // rank 0's line only
    QCOMPARE(r.json["status"].toString(), QString("finished"));
    QCOMPARE(r.json["ranks"].toInt(), 2);
    QVERIFY(!r.err.contains("resuming"));
    uninterrupted_loss_ = r.json["train_loss"].toDouble();

    mok::RunStore store = mok::RunStore::open_readonly((dir + "/runs/mok.db").toStdString());
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(1));
    QCOMPARE(runs[0].status, mok::RunStatus::finished);
    QCOMPARE(runs[0].last_step, int64_t(400));
    const mok::RunRecord rec = store.get_run(runs[0].id);
    const mok::ExperimentConfig stored = mok::parse_experiment_config(rec.config_yaml, "stored");
    QCOMPARE(stored.parallel.ranks, 2);
    QCOMPARE(stored.parallel.comm, std::string("mpi"));
    // Tokens crossed between the two ranks: two processes trained one run.
    const auto dispatched = store.metric_series(runs[0].id, "comm/dispatch_bytes");
    QVERIFY(!dispatched.empty());
    QVERIFY(dispatched.back().value > 0);
    QVERIFY(fs::exists((dir + "/runs/checkpoints/tiny-run1/step_000400/model.safetensors").toStdString()));
  }

  void timeLimitRequeuesAndResumes() {
    QVERIFY2(uninterrupted_loss_ != 0, "needs cpuJobTrainsOverTwoMpiRanks first");
    const QString dir = export_cpu_job("requeue");
    QVERIFY(!dir.isEmpty());
    QProcess job;
    job.setWorkingDirectory(dir);
    job.setProcessEnvironment(job_env(dir));
    job.start("bash", {dir + "/job.sbatch"});
    QVERIFY(job.waitForStarted());
    // Slurm's USR1 once the run has its first checkpoint, well before its 400th step.
    const fs::path first = (dir + "/runs/checkpoints/tiny-run1/step_000010").toStdString();
    QTRY_VERIFY_WITH_TIMEOUT(fs::exists(first), 60000);
    QCOMPARE(::kill(static_cast<pid_t>(job.processId()), SIGUSR1), 0);
    QVERIFY(job.waitForFinished(60000));
    const QString err = QString::fromUtf8(job.readAllStandardError());
    QVERIFY2(job.exitCode() == 0, qPrintable(err));
    QVERIFY2(err.contains("requeueing job 4242"), qPrintable(err));
    QCOMPARE(QString::fromStdString(read_all(scontrol_log_.toStdString())),
             QString("scancel --signal=TERM 4242\nscontrol requeue 4242\n"));

    int64_t stopped_at = 0;
    {
      mok::RunStore store = mok::RunStore::open_readonly((dir + "/runs/mok.db").toStdString());
      const auto runs = store.list_runs();
      QCOMPARE(runs.size(), size_t(1));
      QCOMPARE(runs[0].status, mok::RunStatus::stopped);
      stopped_at = runs[0].last_step;
      QVERIFY2(stopped_at >= 10 && stopped_at < 400, qPrintable(QString::number(stopped_at)));
      QCOMPARE(store.checkpoints(runs[0].id).back().step, stopped_at);  // saved on the way out
    }

    // The requeued start: the same run continues from that checkpoint to the end.
    const Result again = run_job(dir);
    QVERIFY2(again.exit_code == 0, qPrintable(again.err));
    QVERIFY2(again.err.contains("mok job: resuming from runs/checkpoints/tiny-run1"), qPrintable(again.err));
    QVERIFY2(again.err.contains(QString("at step %1").arg(stopped_at)), qPrintable(again.err));
    QCOMPARE(again.json["status"].toString(), QString("finished"));
    QCOMPARE(again.json["ranks"].toInt(), 2);
    // Exact equality: QCOMPARE on doubles would forgive the last bits.
    QVERIFY2(again.json["train_loss"].toDouble() == uninterrupted_loss_,
             qPrintable(QString::number(again.json["train_loss"].toDouble(), 'g', 17) + " vs " +
                        QString::number(uninterrupted_loss_, 'g', 17)));
    mok::RunStore store = mok::RunStore::open_readonly((dir + "/runs/mok.db").toStdString());
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(1));
    QCOMPARE(runs[0].status, mok::RunStatus::finished);
    QCOMPARE(runs[0].last_step, int64_t(400));
  }

  void slurmAcceptsTheScriptWhereInstalled() {
    const QString dir = tmp_.path() + "/cpu";
    QVERIFY(QFileInfo::exists(dir + "/job.sbatch"));
    const QString sbatch = QStandardPaths::findExecutable("sbatch");
    if (sbatch.isEmpty()) {
      qInfo("sbatch is not installed: the script was checked with bash -n only");
      return;
    }
    // Installed is not configured: without a controller sbatch cannot judge the script.
    if (mok::test::run_command("scontrol", {"ping"}, dir).exit_code != 0) {
      qInfo("no Slurm controller answers here: the script was checked with bash -n only "
            "(cluster.slurm_loopback_test checks it under a Slurm of its own)");
      return;
    }
    const Result r = mok::test::run_command(sbatch, {"--test-only", "job.sbatch"}, dir);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  }
};

QTEST_MAIN(TestCliExport)
#include "test_cli_export.moc"
