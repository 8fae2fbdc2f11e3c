// mok export: write a folder that trains an experiment on a cluster, or a trained model in
// a standard format.
//   mok export CONFIG --slurm --nodes N --gpus-per-node G [--partition P] [--time T]
//              [--account A] [--out DIR] [--force] [--cpu] [--set key=value]... [--json]
//   mok export CHECKPOINT --hf DIR [--dtype float32|bfloat16] [--prompt TEXT]
//              [--greedy-tokens N] [--force] [--json]
// Exit codes: 0 written, 1 the folder could not be written, 2 bad usage, bad config, a
// model the format cannot represent, or an existing folder without --force (then nothing
// is written).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/cluster/cluster_job_config.h"
#include "core/cluster/job_folder.h"
#include "core/cluster/slurm_job.h"
#include "core/config/config_io.h"
#include "core/interop/hf_export.h"
#include "core/plan/memory_plan.h"
#include "core/util/byte_size.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok export CONFIG --slurm --nodes N --gpus-per-node G [options]\n"
    "       mok export CONFIG --slurm --cpu --nodes N --tasks-per-node T [options]\n"
    "       mok export CHECKPOINT --hf DIR [--dtype float32|bfloat16] [--force] [--json]\n"
    "\n"
    "Writes a folder that trains CONFIG on a Slurm cluster: job.sbatch (one task per GPU,\n"
    "srun --mpi=pmix, requeue and resume on the time limit), job.yaml (the config with every\n"
    "key, parallel.ranks = N x G over NCCL) and README.md (how to submit it).\n"
    "\n"
    "  --slurm             the Slurm target (--hf DIR, the other one, is below)\n"
    "  --nodes N           nodes of the job\n"
    "  --gpus-per-node G   GPUs per node, one task (rank) each\n"
    "  --cpu               CPU ranks over MPI instead of GPUs; G (or --tasks-per-node T)\n"
    "                      is then the tasks per node, parallel.threads the CPUs of each\n"
    "  --tasks-per-node T  with --cpu: the same as --gpus-per-node\n"
    "  --partition P       Slurm partition (default: the cluster's)\n"
    "  --account A         Slurm account (default: the user's)\n"
    "  --time T            time limit per start, e.g. 04:00:00 or 2-00:00:00 (default 04:00:00)\n"
    "  --out DIR           the folder (default: <config name>-slurm)\n"
    "  --force             write into an existing folder: replace its three files, keep the rest\n"
    "  --set k=v           override one config key first, e.g. --set train.checkpoint_every=500\n"
    "  --json              print one JSON object (folder, files, ranks, submit) as the last line\n"
    "\n"
    "Submit with:  cd DIR && sbatch job.sbatch\n"
    "\n"
    "--hf DIR writes CHECKPOINT (a checkpoint or run folder) as a Hugging Face model folder in\n"
    "Mixtral layout (MixtralForCausalLM; docs/interop.md): config.json, model.safetensors,\n"
    "tokenizer.json, README.md, mok's tokenizer and config, and mok_reference.json (mok's logits\n"
    "and greedy continuation, for tools/hf/check_hf_export.py). Models Mixtral cannot represent\n"
    "exactly (dense layers, a shared expert) are refused.\n"
    "  --dtype D           float32 (default) or bfloat16 weights\n"
    "  --prompt TEXT       the reference's greedy prompt (default \"The jury said that\")\n"
    "  --greedy-tokens N   the reference's greedy continuation length (default 32)\n"
    "  --force             write into an existing folder (its files of the same names replaced)\n"
    "  --json              print one JSON object (folder, architecture, files, ...) as the last line\n";

struct Args {
  std::string config;
  std::string out;
  std::vector<std::string> overrides;
  bool slurm = false;
  bool cpu = false;
  bool force = false;
  bool json = false;
  int nodes = 0;
  int per_node = 0;
  std::string hf;  // --hf DIR
  HfExportOptions hf_options;
  bool hf_only_options = false;     // --dtype, --prompt or --greedy-tokens given
  bool slurm_only_options = false;  // --partition, --account or --time given
  bool has_nodes = false, has_gpus = false, has_tasks = false;
  SlurmJobOptions job;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "mok export: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

// A whole decimal number, or false ("2x", "", "1e3" are not).
bool parse_count(const char* text, int* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < -1000000000L || v > 1000000000L) return false;
  *out = static_cast<int>(v);
  return true;
}

// --hf: a checkpoint as a Hugging Face folder (core/interop/hf_export.h).
int export_hf(const Args& a) {
  std::error_code ec;
  if (!a.force && std::filesystem::exists(a.hf, ec) && !std::filesystem::is_empty(a.hf, ec)) {
    std::fprintf(stderr, "mok export: %s exists and is not empty; nothing was written (--force writes into it)\n",
                 a.hf.c_str());
    return 2;
  }
  HfExportResult r;
  try {
    r = export_hugging_face(a.config, a.hf, a.hf_options);
  } catch (const HfExportRefused& e) {
    std::fprintf(stderr, "mok export: %s\nnothing was written (docs/interop.md says what Mixtral can hold)\n", e.what());
    return 2;
  } catch (const HfExportWriteError& e) {
    std::fprintf(stderr, "mok export: %s\nthe folder's earlier files were left as they were\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "mok export: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok export: %s\n", e.what());  // an unreadable checkpoint
    return 2;
  }
  std::printf("wrote %s/ as %s (%lld parameters, %s): ", r.folder.c_str(), r.architecture.c_str(),
              static_cast<long long>(r.parameters), a.hf_options.dtype.c_str());
  for (size_t i = 0; i < r.files.size(); ++i) std::printf("%s%s", i ? ", " : "", r.files[i].c_str());
  std::printf("\n");
  if (!r.tokenizer_json) std::printf("note: no tokenizer.json: %s\n", r.tokenizer_note.c_str());
  for (const std::string& n : r.notes) std::printf("not exported: %s\n", n.c_str());
  std::printf("check it against Transformers: python3 tools/hf/check_hf_export.py %s\n", r.folder.c_str());
  if (a.json) {
    JsonWriter j;
    j.begin_object();
    j.key("folder").value(r.folder);
    j.key("checkpoint").value(r.checkpoint);
    j.key("architecture").value(r.architecture);
    j.key("dtype").value(a.hf_options.dtype);
    j.key("parameters").value(r.parameters);
    j.key("files").begin_array();
    for (const std::string& f : r.files) j.value(f);
    j.end_array();
    j.key("tokenizer_json").value(r.tokenizer_json);
    j.key("reference").value("mok_reference.json");
    j.key("notes").begin_array();
    for (const std::string& n : r.notes) j.value(n);
    j.end_array();
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  }
  return 0;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    auto take = [&](std::string* into) {
      if (!next) return false;
      *into = next;
      ++i;
      return true;
    };
    auto take_count = [&](int* into) {
      if (!next) return false;
      ++i;
      return parse_count(next, into);
    };
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--slurm") {
      a.slurm = true;
    } else if (arg == "--hf") {
      if (!take(&a.hf) || a.hf.empty()) return usage_error("--hf needs a folder");
    } else if (arg == "--dtype") {
      if (!take(&a.hf_options.dtype)) return usage_error("--dtype needs float32 or bfloat16");
      if (a.hf_options.dtype != "float32" && a.hf_options.dtype != "bfloat16")
        return usage_error("--dtype: unknown '" + a.hf_options.dtype + "'; use float32 or bfloat16");
      a.hf_only_options = true;
    } else if (arg == "--prompt") {
      if (!take(&a.hf_options.prompt)) return usage_error("--prompt needs text");
      a.hf_only_options = true;
    } else if (arg == "--greedy-tokens") {
      if (!take_count(&a.hf_options.greedy_tokens) || a.hf_options.greedy_tokens < 0)
        return usage_error("--greedy-tokens needs a whole number >= 0");
      a.hf_only_options = true;
    } else if (arg == "--cpu") {
      a.cpu = true;
    } else if (arg == "--force") {
      a.force = true;
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "--nodes") {
      if (!take_count(&a.nodes)) return usage_error("--nodes needs a whole number");
      a.has_nodes = true;
    } else if (arg == "--gpus-per-node" || arg == "--tasks-per-node") {
      int v = 0;
      if (!take_count(&v)) return usage_error(arg + " needs a whole number");
      if ((a.has_gpus || a.has_tasks) && v != a.per_node)
        return usage_error("--gpus-per-node and --tasks-per-node give different counts");
      a.per_node = v;
      (arg == "--gpus-per-node" ? a.has_gpus : a.has_tasks) = true;
    } else if (arg == "--partition") {
      a.slurm_only_options = true;
      if (!take(&a.job.partition)) return usage_error("--partition needs a name");
    } else if (arg == "--account") {
      a.slurm_only_options = true;
      if (!take(&a.job.account)) return usage_error("--account needs a name");
    } else if (arg == "--time") {
      a.slurm_only_options = true;
      if (!take(&a.job.time)) return usage_error("--time needs a time limit");
    } else if (arg == "--out") {
      if (!take(&a.out) || a.out.empty()) return usage_error("--out needs a folder");
    } else if (arg == "--set") {
      std::string v;
      if (!take(&v)) return usage_error("--set needs key=value");
      a.overrides.push_back(v);
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (a.config.empty()) {
      a.config = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (!a.hf.empty()) {
    if (a.slurm) return usage_error("--hf and --slurm are different targets; choose one");
    if (a.config.empty()) return usage_error("missing CHECKPOINT");
    if (a.cpu || a.has_nodes || a.has_gpus || a.has_tasks || !a.out.empty() || !a.overrides.empty() ||
        a.slurm_only_options)
      return usage_error("--hf takes only --dtype, --prompt, --greedy-tokens, --force and --json");
    return export_hf(a);
  }
  if (a.hf_only_options) return usage_error("--dtype, --prompt and --greedy-tokens belong to --hf");
  if (a.config.empty()) return usage_error("missing CONFIG");
  if (!a.slurm) return usage_error("choose the target: --slurm or --hf DIR");
  if (!a.has_nodes) return usage_error("missing --nodes N");
  if (!a.has_gpus && !a.has_tasks) return usage_error(a.cpu ? "missing --tasks-per-node T" : "missing --gpus-per-node G");
  if (a.has_tasks && !a.cpu) return usage_error("--tasks-per-node is for --cpu jobs; GPU jobs run one task per GPU");
  if (a.nodes < 1) return usage_error("--nodes must be at least 1 (it is " + std::to_string(a.nodes) + ")");
  if (a.per_node < 1) {
    return usage_error(std::string(a.has_gpus ? "--gpus-per-node" : "--tasks-per-node") + " must be at least 1 (it is " +
                       std::to_string(a.per_node) + ")");
  }
  a.job.nodes = a.nodes;
  a.job.tasks_per_node = a.per_node;

  // Everything is checked before anything is written.
  ExperimentConfig job;
  try {
    const ExperimentConfig config = load_experiment_config(a.config, a.overrides);
    job = cluster_job_config(config, {a.nodes, a.per_node, a.cpu});
  } catch (const std::exception& e) {  // ConfigError: file:line:column: key: problem
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (const std::string why = cluster_job_problem(job); !why.empty()) {
    std::fprintf(stderr, "%s: %s\n", a.config.c_str(), why.c_str());
    return 2;
  }
  if (const std::string why = slurm_job_problem(job, a.job); !why.empty()) {
    std::fprintf(stderr, "mok export: %s\n", why.c_str());
    return 2;
  }
  // The memory plan of the chosen layout, before anything is written (core/plan).
  const MemoryEstimate plan = estimate_memory(job);
  std::printf("memory plan: %s per rank (parameters %s, saved activations %s)",
              format_byte_size(static_cast<int64_t>(plan.total_bytes())).c_str(),
              format_byte_size(static_cast<int64_t>(plan.bytes_of("parameters"))).c_str(),
              format_byte_size(static_cast<int64_t>(plan.bytes_of("saved_activations"))).c_str());
  if (const auto limit = parse_byte_size(job.parallel.device_memory_limit); limit && *limit > 0) {
    const double cap = static_cast<double>(*limit);
    if (plan.total_bytes() <= cap)
      std::printf(": fits parallel.device_memory_limit %s\n", format_byte_size(*limit).c_str());
    else
      std::printf(": does NOT fit parallel.device_memory_limit %s (the largest batch that fits: %d)\n",
                  format_byte_size(*limit).c_str(), largest_batch_that_fits(job, cap));
  } else {
    std::printf(" (`mok plan %s --device-memory SIZE` checks it against a card)\n", a.config.c_str());
  }
  const std::string folder = a.out.empty() ? slurm_job_name(job.name) + "-slurm" : a.out;
  std::error_code ec;
  if (!a.force && std::filesystem::exists(folder, ec)) {
    std::fprintf(stderr, "mok export: %s exists; nothing was written (--force replaces its job files)\n",
                 folder.c_str());
    return 2;
  }
  try {
    write_job_folder(folder, job, a.job, a.force);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok export: %s\n", e.what());
    return 1;
  }

  const std::string submit = "cd " + folder + " && sbatch " + a.job.script_name;
  if (job.train.checkpoint_every == 0) {
    std::fprintf(stderr,
                 "note: train.checkpoint_every is 0: a job killed without warning (a node failure) starts over; "
                 "--set train.checkpoint_every=N saves every N steps\n");
  }
  std::printf("wrote %s/: %s, %s, README.md (%d rank(s): %d node(s) x %d %s)\nsubmit: %s\n", folder.c_str(),
              a.job.script_name.c_str(), a.job.config_name.c_str(), job.parallel.ranks, a.nodes, a.per_node,
              a.cpu ? "task(s)" : "GPU(s)", submit.c_str());
  if (a.json) {
    JsonWriter j;
    j.begin_object();
    j.key("folder").value(folder);
    j.key("script").value(a.job.script_name);
    j.key("config").value(a.job.config_name);
    j.key("readme").value("README.md");
    j.key("nodes").value(a.nodes);
    j.key("tasks_per_node").value(a.per_node);
    j.key("ranks").value(job.parallel.ranks);
    j.key("device").value(job.parallel.device);
    j.key("comm").value(job.parallel.comm);
    j.key("submit").value(submit);
    j.key("planned_bytes_per_rank").value(plan.total_bytes());
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  }
  return 0;
}

}  // namespace mok::cli
