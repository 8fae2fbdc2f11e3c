// mok generate: sample text from a checkpoint.
//   mok generate CHECKPOINT_DIR [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
//                               [--top-p P] [--seed S] [--json]
//                               [--batch B] [--ranks R] [--comm local|mpi] [--dispatcher classic|mok]
//                               [--link-gbps G] [--link-latency-us U] [--prompts-from-data [N]]
//                               [--decode-layout auto|fixed|counted] [--resident-experts auto|off|all|N]
//                               [--threads T] [--set KEY=VALUE]... [--quiet]
//   mok generate --untrained CONFIG.yaml [the same options]
// With one sequence on one rank the text streams to stdout as it is produced; with --json
// the last stdout line is one JSON object {"text", "prompt", "new_tokens", "tokens_per_s",
// "checkpoint"} instead. With --batch B > 1 or --ranks R > 1 (or under mpirun with --comm
// mpi) B sequences are decoded together over R expert-parallel ranks
// (core/train/parallel_generation.h); each sequence's text is printed (not with --quiet),
// then a summary line, or with --json one JSON object with the texts and figures.
// --untrained decodes with a config's initial weights instead of a checkpoint's (noise for
// text; the memory and speed of that model, before one was trained).
// Exit codes: 0 ok, 1 failure while generating, 2 bad usage, unreadable checkpoint or config.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "app/cli/commands.h"
#include "core/config/config_io.h"
#include "core/parallel/mpi_communicator.h"
#include "core/train/checkpoint.h"
#include "core/train/parallel_generation.h"
#include "core/train/text_generator.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok generate CHECKPOINT_DIR [--prompt TEXT] [--tokens N] [--temperature T]\n"
    "                                   [--top-k K] [--top-p P] [--seed S] [--json]\n"
    "       mok generate --untrained CONFIG.yaml [the same options]\n"
    "\n"
    "  CHECKPOINT_DIR   a checkpoint folder (or a run folder: its latest checkpoint)\n"
    "  --prompt TEXT    text to continue (default: empty)\n"
    "  --tokens N       tokens to generate (default 200)\n"
    "  --temperature T  0 = greedy (default 0.8)\n"
    "  --top-k K        sample among the K most likely tokens (default 0 = all)\n"
    "  --top-p P        sample within probability mass P (default 1)\n"
    "  --seed S         the same seed gives the same text (default 0)\n"
    "  --json           one JSON object as the last stdout line\n"
    "\n"
    "batched and expert-parallel decoding:\n"
    "  --batch B        decode B sequences together (default 1)\n"
    "  --ranks R        split them over R expert-parallel ranks, rank r taking sequences\n"
    "                   [r*B/R, (r+1)*B/R); B must divide by R (default 1)\n"
    "  --comm local|mpi local: R threads of this process (default); mpi: one process per\n"
    "                   rank, launched with 'mpirun -np R mok generate ... --comm mpi'\n"
    "  --dispatcher classic|mok   expert dispatch (default: the checkpoint's)\n"
    "  --link-gbps G    emulated link bandwidth in GB/s, 0 = none (default: the checkpoint's)\n"
    "  --link-latency-us U        emulated per-message latency (default: the checkpoint's)\n"
    "  --decode-layout auto|fixed|counted   how ranks exchange a decode step's rows: fixed\n"
    "                   sends every row to every rank and counts nothing (no wait for a GPU),\n"
    "                   counted sends only rows with experts there; auto: fixed on GPUs,\n"
    "                   counted on CPUs (default). The same tokens either way\n"
    "  --resident-experts auto|off|all|N   MoK: MoE layers every rank holds whole for\n"
    "                   the generation (the first N; read from the checkpoint, never sent):\n"
    "                   their tokens never leave the rank, and with all of them a decode\n"
    "                   step makes no exchange. auto: as many as the GPU's memory allows\n"
    "                   on GPU ranks, none on CPU ranks and with classic (default)\n"
    "  --prompts-from-data [N]    prompts: N-token windows of the validation split\n"
    "                   (default N 32), one per sequence, instead of --prompt\n"
    "  --threads T      CPU threads per rank (default: the checkpoint's parallel.threads)\n"
    "  --set KEY=VALUE  override a key of the checkpoint's config (e.g. routing.shadow=always,\n"
    "                   parallel.expert_placement=round_robin); repeatable\n"
    "  --quiet          print only the summary, not the texts\n"
    "\n"
    "sizing before training:\n"
    "  --untrained      the argument is an experiment config (YAML), not a checkpoint: decode\n"
    "                   with the initial weights its seed draws. The text is noise; peak memory\n"
    "                   and tokens/s are the trained model's (what 'mok plan --generate' plans)\n"
    "\n"
    "examples: mok generate runs/checkpoints/quickstart --batch 16 --ranks 2 --dispatcher mok \\\n"
    "              --tokens 32 --prompts-from-data --json\n"
    "          mok generate --untrained experiments/mok_7b.yaml --batch 8 --prompts-from-data \\\n"
    "              --set parallel.device_memory_limit=16GiB --json\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "mok generate: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

bool parse_number(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end && end != text && *end == '\0';
}

// Texts may end inside a character (a byte-level model splits them); JsonWriter writes
// such bytes as U+FFFD.
void print_batched_json(const ParallelGenerateResult& r, const std::string& prompt) {
  JsonWriter j;
  j.begin_object();
  j.key("text").value(r.texts.empty() ? std::string() : r.texts.front());
  j.key("texts").begin_array();
  for (const std::string& t : r.texts) j.value(t);
  j.end_array();
  j.key("prompt").value(prompt);
  j.key("prompt_tokens").value(r.prompt_tokens);
  j.key("new_tokens").value(r.new_tokens);
  j.key("tokens_per_s").value(r.tokens_per_s);
  j.key("prefill_s").value(r.prefill_s);
  j.key("decode_s").value(r.decode_s);
  j.key("ranks").value(r.ranks);
  j.key("batch").value(r.batch);
  j.key("dispatcher").value(r.dispatcher);
  j.key("decode_layout").value(r.decode_layout);
  j.key("resident_layers").value(r.resident_layers);
  j.key("resident_bytes").value(r.resident_bytes);
  j.key("replayed_steps").value(r.replayed_steps);
  j.key("device").value(r.device);
  j.key("precision").value(r.precision);
  j.key("remote_bytes").value(r.remote_bytes);
  j.key("dispatch_bytes").value(r.dispatch_bytes);
  j.key("combine_bytes").value(r.combine_bytes);
  j.key("weight_bytes").value(r.weight_bytes);
  j.key("control_bytes").value(r.control_bytes);
  j.key("modeled_ms").value(r.modeled_ms);
  j.key("shadowed_experts").value(r.shadowed_experts);
  j.key("bytes_saved").value(r.bytes_saved);
  j.key("peak_bytes").value(r.peak_bytes);
  j.key("peak_device_bytes").value(r.peak_device_bytes);
  j.key("peak_block_bytes").value(r.peak_block_bytes);
  j.key("peak_reserved_bytes").value(r.peak_reserved_bytes);
  j.key("parameter_bytes").value(r.parameter_bytes);
  j.key("kv_cache_bytes").value(r.kv_cache_bytes);
  j.key("checkpoint").value(r.checkpoint);
  j.key("untrained").value(!r.untrained_config.empty());
  if (!r.untrained_config.empty()) j.key("config").value(r.untrained_config);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

// This process's rank from the launcher's environment (before MPI is initialised); 0 when
// not launched by mpirun / srun.
int launched_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::atoi(r);
  return 0;
}

// B sequences over R ranks (local threads, or this process's rank of an MPI job).
int generate_batched(const std::string& dir, ParallelGenerateOptions po, const std::string& comm_kind,
                     bool ranks_given, bool json, bool quiet, int argc, char** argv) {
  // Checks that need only the config: before any MPI or heavy work.
  std::string resolved;
  ExperimentConfig cfg;
  try {
    resolved = po.untrained ? dir : resolve_checkpoint_dir(dir);
    cfg = generation_config(resolved, po);
  } catch (const std::exception& e) {
    if (launched_rank() == 0) std::fprintf(stderr, "mok generate: %s\n", e.what());  // once per job
    return 2;
  }
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<Communicator> comm;
  if (comm_kind == "mpi") {
    if (!mpi_available()) return usage_error("--comm mpi: this build has no MPI support");
    if (!mpi_launch_detected())
      return usage_error("--comm mpi needs one process per rank: launch with 'mpirun -np R mok generate ... --comm mpi'");
    try {
      mpi = std::make_unique<MpiSession>(&argc, &argv);
      comm = std::make_unique<MpiCommunicator>();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mok generate: %s\n", e.what());
      return 1;
    }
    if (ranks_given && po.ranks != comm->size()) {
      if (comm->rank() == 0)
        usage_error("--ranks " + std::to_string(po.ranks) + " but the MPI job has " + std::to_string(comm->size()) +
                    " processes (leave --ranks out under mpirun)");
      return 2;
    }
  } else if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    return usage_error(std::string("launched as ") + n + " MPI processes without --comm mpi; add --comm mpi (or run one process)");
  }
  const int ranks = comm ? comm->size() : po.ranks;
  const bool leader = !comm || comm->rank() == 0;
  if (const std::string why = parallel_generate_problem(cfg, po, ranks); !why.empty()) {
    if (leader) usage_error(why);
    return 2;
  }
  if (po.untrained && leader && !quiet && !json)
    std::fprintf(stderr, "mok generate: untrained weights drawn from %s's seed: the texts are noise; memory and "
                 "speed are the trained model's\n", resolved.c_str());
  ParallelGenerateResult r;
  try {
    r = generate_parallel(resolved, po, comm.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok generate: %s\n", e.what());
    if (comm && comm->size() > 1) {
      std::fflush(stderr);
      mpi_abort(1);  // the other ranks may wait in a collective for this one
    }
    return 1;
  }
  if (!leader) return 0;
  if (json) {
    print_batched_json(r, po.prompts_from_data > 0 ? std::string() : po.prompt);
    return 0;
  }
  if (!quiet) {
    for (size_t b = 0; b < r.texts.size(); ++b) std::printf("--- sequence %zu ---\n%s\n", b, r.texts[b].c_str());
  }
  std::printf("%d sequences x %d new tokens on %d rank%s%s: %.1f tokens/s (decode %.3f s, prefill %.3f s), "
              "remote %lld bytes (dispatch %lld, combine %lld, weights %lld), modeled link %.3f ms",
              r.batch, r.batch ? static_cast<int>(r.new_tokens / r.batch) : 0, r.ranks, r.ranks == 1 ? "" : "s",
              (" (" + r.dispatcher + " dispatch" + (r.decode_layout.empty() ? "" : ", " + r.decode_layout + " layout") +
               ")").c_str(),
              r.tokens_per_s, r.decode_s, r.prefill_s,
              static_cast<long long>(r.remote_bytes), static_cast<long long>(r.dispatch_bytes),
              static_cast<long long>(r.combine_bytes), static_cast<long long>(r.weight_bytes), r.modeled_ms);
  if (r.dispatcher == "mok")
    std::printf(", %lld experts shadowed, %lld bytes saved", static_cast<long long>(r.shadowed_experts),
                static_cast<long long>(r.bytes_saved));
  if (r.resident_layers > 0)
    std::printf(", %d MoE layer%s resident (%.1f MiB of copies a rank)", r.resident_layers,
                r.resident_layers == 1 ? "" : "s", static_cast<double>(r.resident_bytes) / (1024.0 * 1024.0));
  std::printf("\n");
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  std::string dir, prompt;
  GenerateOptions o;
  ParallelGenerateOptions po;
  std::string comm = "local";
  bool json = false, quiet = false, ranks_given = false, prompt_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](double lo, double hi, double* out) -> bool {
      if (i + 1 >= argc) return false;
      return parse_number(argv[++i], out) && *out >= lo && *out <= hi;
    };
    double v = 0;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--prompt") {
      if (i + 1 >= argc) return usage_error("--prompt needs text");
      prompt = argv[++i];
      prompt_given = true;
    } else if (arg == "--tokens") {
      if (!number(0, 1e7, &v) || v != static_cast<int>(v)) return usage_error("--tokens needs a whole number >= 0");
      o.max_new_tokens = static_cast<int>(v);
    } else if (arg == "--temperature") {
      if (!number(0, 100, &v)) return usage_error("--temperature needs a number in [0, 100]");
      o.sampling.temperature = v;
    } else if (arg == "--top-k") {
      if (!number(0, 1e9, &v) || v != static_cast<int>(v)) return usage_error("--top-k needs a whole number >= 0");
      o.sampling.top_k = static_cast<int>(v);
    } else if (arg == "--top-p") {
      if (!number(1e-9, 1, &v)) return usage_error("--top-p needs a number in (0, 1]");
      o.sampling.top_p = v;
    } else if (arg == "--seed") {
      if (!number(0, 1.8e19, &v) || v != static_cast<double>(static_cast<uint64_t>(v))) {
        return usage_error("--seed needs a whole number >= 0");
      }
      o.seed = static_cast<uint64_t>(v);
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--untrained") {
      po.untrained = true;
    } else if (arg == "--batch") {
      if (!number(1, 1e6, &v) || v != static_cast<int>(v)) return usage_error("--batch needs a whole number >= 1");
      po.batch = static_cast<int>(v);
    } else if (arg == "--ranks") {
      if (!number(1, 1024, &v) || v != static_cast<int>(v)) return usage_error("--ranks needs a whole number in [1, 1024]");
      po.ranks = static_cast<int>(v);
      ranks_given = true;
    } else if (arg == "--comm") {
      if (i + 1 >= argc) return usage_error("--comm needs local or mpi");
      comm = argv[++i];
      if (comm != "local" && comm != "mpi") return usage_error("--comm: unknown '" + comm + "'; use local or mpi");
    } else if (arg == "--dispatcher") {
      if (i + 1 >= argc) return usage_error("--dispatcher needs classic or mok");
      po.dispatcher = argv[++i];
      if (po.dispatcher != "classic" && po.dispatcher != "mok")
        return usage_error("--dispatcher: unknown '" + po.dispatcher + "'; use classic or mok");
    } else if (arg == "--decode-layout") {
      if (i + 1 >= argc) return usage_error("--decode-layout needs auto, fixed or counted");
      po.decode_layout = argv[++i];
      if (po.decode_layout != "auto" && po.decode_layout != "fixed" && po.decode_layout != "counted")
        return usage_error("--decode-layout: unknown '" + po.decode_layout + "'; use auto, fixed or counted");
    } else if (arg == "--resident-experts") {
      if (i + 1 >= argc) return usage_error("--resident-experts needs auto, off, all or a number of MoE layers");
      po.resident_experts = argv[++i];
    } else if (arg == "--link-gbps") {
      if (!number(0, 1e6, &v)) return usage_error("--link-gbps needs a number >= 0 (GB/s; 0 = no emulated link)");
      po.link_gbps = v;
    } else if (arg == "--link-latency-us") {
      if (!number(0, 1e9, &v)) return usage_error("--link-latency-us needs a number >= 0");
      po.link_latency_us = v;
    } else if (arg == "--set") {
      if (i + 1 >= argc || std::string(argv[i + 1]).find('=') == std::string::npos)
        return usage_error("--set needs dotted.key=value");
      po.overrides.push_back(argv[++i]);
    } else if (arg == "--threads") {
      if (!number(1, 1024, &v) || v != static_cast<int>(v)) return usage_error("--threads needs a whole number >= 1");
      po.threads = static_cast<int>(v);
    } else if (arg == "--prompts-from-data") {
      po.prompts_from_data = 32;
      double n = 0;
      if (i + 1 < argc && parse_number(argv[i + 1], &n)) {
        if (n < 1 || n != static_cast<int>(n)) return usage_error("--prompts-from-data needs a whole number >= 1");
        po.prompts_from_data = static_cast<int>(n);
        ++i;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (dir.empty()) {
      dir = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (dir.empty()) return usage_error(po.untrained ? "missing CONFIG (--untrained takes an experiment config)"
                                                   : "missing CHECKPOINT_DIR");
  if (po.untrained && std::filesystem::is_directory(dir))
    return usage_error("--untrained takes an experiment config (a YAML file); " + dir +
                       " is a folder (for a checkpoint's weights, leave --untrained out)");
  if (prompt_given && po.prompts_from_data > 0) return usage_error("--prompt and --prompts-from-data exclude each other");
  if (po.batch > 1 || po.ranks > 1 || comm == "mpi" || po.prompts_from_data > 0 || !po.dispatcher.empty() ||
      po.link_gbps >= 0 || po.link_latency_us >= 0 || po.threads > 0 || !po.overrides.empty() ||
      po.decode_layout != "auto" || po.resident_experts != "auto" || po.untrained) {
    po.max_new_tokens = o.max_new_tokens;
    po.sampling = o.sampling;
    po.seed = o.seed;
    po.prompt = prompt;
    return generate_batched(dir, po, comm, ranks_given, json, quiet, argc, argv);
  }

  std::unique_ptr<TextGenerator> gen;
  try {
    gen = std::make_unique<TextGenerator>(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok generate: %s\n", e.what());
    return 2;
  }
  try {
    if (!json) {
      std::fputs(prompt.c_str(), stdout);
      std::fflush(stdout);
    }
    const GenerateResult r = gen->generate(prompt, o, [&](const std::string& piece) {
      if (json) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    if (json) {
      JsonWriter j;
      j.begin_object();
      j.key("text").value(r.text);
      j.key("prompt").value(prompt);
      j.key("new_tokens").value(r.new_tokens);
      j.key("tokens_per_s").value(r.tokens_per_s);
      j.key("checkpoint").value(gen->checkpoint_dir());
      j.end_object();
      std::printf("%s\n", j.str().c_str());
    } else {
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok generate: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace mok::cli
