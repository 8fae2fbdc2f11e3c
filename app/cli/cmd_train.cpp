// mok train: train a model from an experiment config, headless.
//   mok train CONFIG [--db PATH] [--set key=value]... [--json] [--resume CHECKPOINT_DIR] [--quiet]
//   mok train --resume CHECKPOINT_DIR [--branch | --overwrite-later] [...]
//                                                  (the config stored in the checkpoint)
// Exit codes: 0 finished, 1 failed while running, 2 bad usage, bad config, or a resume that
// is refused (then nothing is written: no run store, no checkpoint folder), 130 stopped by
// SIGINT/SIGTERM (the unfinished step abandoned, a checkpoint of the last whole one saved).

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/progress_bar.h"
#include "core/config/config_io.h"
#include "core/parallel/mpi_communicator.h"
#include "core/store/run_store.h"
#include "core/train/checkpoint.h"
#include "core/train/rank_launch.h"
#include "core/train/resume_plan.h"
#include "core/train/trainer.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok train CONFIG [--db PATH] [--set key=value]... [--json] [--resume DIR] [--quiet]\n"
    "                 [--no-checkpoints]\n"
    "       mok train --resume DIR [--db PATH] [--set key=value]... [--json] [--quiet]\n"
    "\n"
    "  CONFIG          experiment YAML (see 'mok config schema')\n"
    "  --db PATH       run store (default: logging.db of the config, runs/mok.db)\n"
    "  --set k=v       override one config key, e.g. --set train.steps=50\n"
    "  --resume DIR    continue from a checkpoint folder (or a run folder: its newest);\n"
    "                  without CONFIG the checkpoint's own config is used. The same run\n"
    "                  continues when no setting that changes the results differs;\n"
    "                  otherwise the resume starts a new run, a branch of the original,\n"
    "                  with its own folder (docs/training.md, \"Resume\")\n"
    "  --branch        with --resume: always start a branch (new run, own folder)\n"
    "  --overwrite-later  with --resume: allow replacing the run's checkpoints after the\n"
    "                  resumed step (refused otherwise)\n"
    "  --json          print one JSON object with the results as the last stdout line\n"
    "  --quiet         no progress output (errors are still printed)\n"
    "  --no-checkpoints  write no checkpoint, not even the final one (benchmarks and\n"
    "                  throwaway runs: such a run cannot be resumed)\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM stops: the step in progress is abandoned at its next check\n"
    "point and a checkpoint of the last whole step is saved. A second one quits at once.\n"
    "\n"
    "Several ranks: --set parallel.ranks=R (threads of this process, parallel.comm=local), or\n"
    "one process per rank:  mpirun -np R mok train CONFIG --set parallel.comm=mpi\n"
    "(srun -n R ... on Slurm). Rank 0 writes the store, checkpoints, progress and --json.\n";

struct Args {
  std::string config;
  std::string db;
  std::string resume;
  std::vector<std::string> overrides;
  bool json = false;
  bool quiet = false;
  bool no_checkpoints = false;
  bool branch = false;
  bool overwrite_later = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "mok train: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

// Prints "error:"/"warning:" events only (for --quiet).
class ErrorPrinter : public MetricSink {
 public:
  void on_event(const std::string& text) override {
    if (text.rfind("error:", 0) == 0 || text.rfind("warning:", 0) == 0) std::fprintf(stderr, "%s\n", text.c_str());
  }
};

Trainer* volatile g_trainer = nullptr;
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  if (Trainer* t = g_trainer) t->request_stop();
  std::signal(sig, SIG_DFL);  // a second signal ends the process at once
  static const char kNote[] = "mok train: stopping (again to quit at once)\n";
  const ssize_t n = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);  // async-signal-safe
  (void)n;
}

void print_json(const TrainResult& r, const std::string& error) {
  JsonWriter j;
  j.begin_object();
  j.key("run_id").value(r.run_id);
  j.key("status").value(run_status_name(r.status));
  j.key("steps").value(r.steps);
  j.key("train_loss").value(r.train_loss);
  j.key("val_loss").value(r.val_loss);
  j.key("val_bpb").value(r.val_bpb);
  j.key("val_ppl").value(r.val_ppl);
  j.key("tokens_per_s").value(r.tokens_per_s);
  j.key("peak_saved_activation_bytes").value(r.peak_saved_activation_bytes);
  j.key("peak_bytes").value(r.peak_bytes);
  j.key("peak_device_bytes").value(r.peak_device_bytes);
  j.key("peak_reserved_bytes").value(r.peak_reserved_bytes);
  j.key("peak_block_bytes").value(r.peak_block_bytes);
  j.key("device").value(r.device);
  j.key("precision").value(r.precision);
  j.key("comm_bytes_remote").value(r.comm_bytes_remote);
  j.key("wall_s").value(r.wall_s);
  j.key("tokens").value(r.tokens);
  j.key("parameters").value(r.parameter_count);
  j.key("checkpoint").value(r.checkpoint_dir);
  j.key("ranks").value(static_cast<int64_t>(r.ranks));
  j.key("replayed_steps").value(r.replayed_steps);
  if (!error.empty()) j.key("error").value(error);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
  std::fflush(stdout);
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)what;
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--set") {
      const char* v = value("--set");
      if (!v) return usage_error("--set needs key=value");
      a.overrides.push_back(v);
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (arg == "--db") {
      const char* v = value("--db");
      if (!v) return usage_error("--db needs a path");
      a.db = v;
    } else if (arg == "--resume") {
      const char* v = value("--resume");
      if (!v) return usage_error("--resume needs a checkpoint folder");
      a.resume = v;
    } else if (arg == "--branch") {
      a.branch = true;
    } else if (arg == "--overwrite-later") {
      a.overwrite_later = true;
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "--quiet" || arg == "-q") {
      a.quiet = true;
    } else if (arg == "--no-checkpoints") {
      a.no_checkpoints = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (a.config.empty()) {
      a.config = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (a.config.empty() && a.resume.empty()) return usage_error("missing CONFIG");
  if ((a.branch || a.overwrite_later) && a.resume.empty()) {
    return usage_error(std::string(a.branch ? "--branch" : "--overwrite-later") + " needs --resume");
  }
  if (a.branch && a.overwrite_later) return usage_error("--branch and --overwrite-later exclude each other");

  // Everything is checked before anything is written.
  ExperimentConfig config;
  std::string resume_dir;
  TrainerOptions options;
  try {
    if (!a.resume.empty()) resume_dir = resolve_checkpoint_dir(a.resume);
    if (!a.config.empty()) {
      config = load_experiment_config(a.config, a.overrides);
    } else {
      const std::string stored = (std::filesystem::path(resume_dir) / CheckpointFiles::config).string();
      config = parse_experiment_config(read_checkpoint_config(resume_dir), stored, a.overrides);
    }
    if (const std::string why = Trainer::unsupported_reason(config); !why.empty()) {
      throw std::runtime_error((a.config.empty() ? resume_dir : a.config) + ": " + why);
    }
    options.db_path = a.db.empty() ? config.logging.db : a.db;
    options.resume_path = resume_dir;
    options.branch = a.branch;
    options.overwrite_later = a.overwrite_later;
    options.write_checkpoints = !a.no_checkpoints;
    if (!resume_dir.empty()) {
      // The resume's plan, read-only (the trainer decides again once it holds the store):
      // a refused resume exits here with nothing written.
      std::optional<RunStore> store;
      bool readable = true;
      std::error_code ec;
      if (std::filesystem::exists(options.db_path, ec)) {
        try {
          store.emplace(RunStore::open_readonly(options.db_path));
        } catch (const StoreError&) {
          readable = false;  // e.g. an older schema: the trainer upgrades it, then decides
        }
      }
      if (readable) {
        const ResumePlan plan = plan_resume(config, options, store ? &*store : nullptr);
        const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");  // once per MPI job
        if (plan.branch && !a.quiet && (!world_rank || std::atoi(world_rank) == 0)) {
          std::fprintf(stderr, "mok train: resuming as a new run, a branch of run %lld at step %lld: %s\n",
                       static_cast<long long>(plan.state.run_id), static_cast<long long>(plan.state.step),
                       plan.why_branch.c_str());
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    if (a.json) {
      TrainResult none;
      print_json(none, e.what());
    }
    return 2;
  }

  // MPI launch: one process per rank. MPI is initialised only for parallel.comm: mpi, or nccl
  // under a launcher (the Trainer checked above that a launcher started us); a multi-process
  // launch of a single-process config would train R independent copies into one store, so
  // refuse it.
  std::unique_ptr<MpiSession> mpi;
  if (runs_as_mpi_processes(config)) {
    try {
      mpi = std::make_unique<MpiSession>(&argc, &argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mok train: %s\n", e.what());
      return 1;
    }
  } else if (const int n = launched_task_count(); n > 1) {
    // Several processes, but the config is not one rank of them: each would train alone
    // into the same store and checkpoint folder.
    const std::string msg = "launched as " + std::to_string(n) + " processes (mpirun or srun) but parallel.comm is '" +
                            config.parallel.comm +
                            (mpi_launch_detected() ? "'" : "' and no MPI launcher is seen (srun without --mpi=pmix?)") +
                            "; add --set parallel.comm=mpi (CPU) or nccl (GPUs) under an MPI launcher, or run one process";
    std::fprintf(stderr, "mok train: %s\n", msg.c_str());
    if (a.json && launched_task_index() == 0) {
      TrainResult none;
      print_json(none, msg);
    }
    return 2;
  }
  const bool leader = !mpi || mpi->world_rank() == 0;
  const bool multi_process = mpi && mpi->world_size() > 1;

  Trainer trainer(config, options);

  ProgressBar progress(stderr, ProgressBar::stderr_is_terminal() && config.logging.progress);
  ErrorPrinter errors;
  std::vector<MetricSink*> sinks;
  if (a.quiet || !leader) sinks.push_back(&errors);  // progress from rank 0 only
  else sinks.push_back(&progress);

  g_trainer = &trainer;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const TrainResult r = trainer.run(sinks);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  g_trainer = nullptr;

  if (r.status == RunStatus::failed && multi_process) {
    // The other ranks may be waiting in a collective for this one: end the whole job.
    std::fprintf(stderr, "mok train: rank %d: %s\n", mpi->world_rank(), r.message.c_str());
    if (a.json && leader) print_json(r, r.message);
    std::fflush(stderr);
    mpi_abort(1);
  }
  if (!leader) return r.status == RunStatus::stopped ? 130 : 0;
  if (a.json) {
    print_json(r, r.status == RunStatus::failed ? r.message : std::string());
  } else {
    std::printf("run %lld %s: %lld steps, train loss %.4f, val loss %.4f, val %.4f bpb, ppl %.2f, "
                "%.0f tokens/s, %.1f s%s%s\n",
                static_cast<long long>(r.run_id), run_status_name(r.status),
                static_cast<long long>(r.steps), r.train_loss, r.val_loss, r.val_bpb, r.val_ppl,
                r.tokens_per_s, r.wall_s, r.checkpoint_dir.empty() ? "" : ", checkpoint ",
                r.checkpoint_dir.c_str());
  }
  if (r.status == RunStatus::failed) {
    if (a.quiet || a.json) std::fprintf(stderr, "mok train: %s\n", r.message.c_str());
    return 1;
  }
  if (r.status == RunStatus::stopped) return 130;
  return 0;
}

}  // namespace mok::cli
