#pragma once
// Batched text generation from a checkpoint (or, untrained, a config's initial weights),
// optionally over R expert-parallel ranks.
//
//   B sequences, split over R ranks: rank r decodes sequences [r·B/R, (r+1)·B/R) (B must
//   divide by R). Every rank builds the model with only its own experts
//   (ModelOptions::local_experts), loads the dense parameters and its own experts from the
//   checkpoint by name, and gets one dispatcher per MoE layer from install_expert_parallel
//   (routing.dispatcher classic | mok, the emulated link of parallel.link_gbps /
//   link_latency_us, the checkpoint's values unless overridden). Decoding runs a
//   BatchedInferenceSession per rank: each MoE layer dispatches the rank's B/R rows per step.
//   Every rank decodes the same fixed number of steps (no early stop), so the collectives
//   match. R = 1 runs the plain single-process path (no communicator).
//
// Sampling: sequence i draws from CounterRng(seed, 0x67656e + i·2³²), a function of
// (seed, i) only, so its text does not depend on B or R (sequence 0 uses the stream of
// TextGenerator). Temperature 0 is greedy.
//
// Prompts: the same `prompt` for every sequence, or with prompts_from_data = N the N-token
// validation windows 0, 1, …, B−1 (val_window_start with seq_len N) of the checkpoint's data
// config, so routing sees real text. When a cache fills (prompt + tokens > data.seq_len),
// every sequence restarts its cache from its last seq_len/2 tokens, at the same step on
// every rank.
//
// Memory: parallel.device_memory_limit caps each rank's tracked bytes as in training (an
// allocation past it fails with MemoryLimitExceeded), and the result carries the ranks' peak.

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/real.h"
#include "core/train/sampling.h"

MOK_NN_BEGIN
class Communicator;
MOK_NN_END

namespace mok {

struct ParallelGenerateOptions {
  int batch = 1;                  // sequences B
  int ranks = 1;                  // local ranks R (with a given communicator: its size)
  std::string dispatcher;         // classic | mok; "" → the checkpoint's routing.dispatcher
  double link_gbps = -1.0;        // emulated link; < 0 → the checkpoint's parallel.link_gbps
  double link_latency_us = -1.0;  // < 0 → the checkpoint's parallel.link_latency_us
  bool link_sleep = true;         // sleep the modeled link time, so wall-clock includes it
  int threads = 0;                // CPU threads per rank; 0 → the checkpoint's parallel.threads
  int max_new_tokens = 200;       // per sequence
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::string prompt;             // every sequence's prompt (when prompts_from_data is 0)
  int prompts_from_data = 0;      // N > 0: validation windows of N tokens as prompts
  // "dotted.key=value" overrides of the checkpoint's config, applied before the fields
  // above (e.g. routing.shadow=always, parallel.expert_placement=round_robin).
  std::vector<std::string> overrides;
  bool keep_logits = false;       // fill ParallelGenerateResult::logits
  // How R > 1 ranks exchange a decode step's rows (core/parallel/fixed_row_exchange.h):
  // "fixed": every row to every rank, nothing counted, no wait for the device in a MoE layer;
  // "counted": only the rows that have experts there, counts on the host first; "auto" (or
  // ""): fixed on GPU ranks, counted on CPU ranks (where counting costs no wait). Prefill
  // steps of more than one token per sequence are always counted. Both give the same tokens
  // and logits, bit for bit.
  std::string decode_layout = "auto";
  // MoE layers every rank holds whole for the generation (core/train/resident_experts.h):
  // "auto" (MoK on GPU ranks: as many as fit), "off", "all" or a count N (the first N). A
  // resident layer's tokens never leave the rank; with every MoE layer resident, decode steps
  // are replayed from a recorded one as on one GPU.
  std::string resident_experts = "auto";
  // The source is an experiment config (YAML), not a checkpoint: the model keeps the initial
  // weights its seed draws, and the tokenizer is the one its data config builds. The texts are
  // noise; the memory and the speed are those of the trained model, for sizing generation
  // before a model of that size was ever trained (the measured side of `mok plan --generate`).
  bool untrained = false;
};

struct ParallelGenerateResult {
  std::vector<std::string> texts;            // per sequence: prompt + continuation (decoded)
  std::vector<std::vector<int32_t>> tokens;  // per sequence: prompt + new tokens
  // keep_logits: per sequence, (max_new_tokens, vocab) row-major, the logits each new token
  // was drawn from.
  std::vector<std::vector<float>> logits;
  int prompt_tokens = 0;         // per sequence
  int64_t new_tokens = 0;        // all sequences
  int batch = 1, ranks = 1;
  std::string dispatcher;        // classic | mok; local with R = 1; none without experts
  std::string device;            // rank 0's device, e.g. "cpu", "cuda:0 NVIDIA H200"
  std::string precision;         // its compute type: "fp32" | "bf16"
  double prefill_s = 0.0;        // wall time of the prefill (rank 0)
  double decode_s = 0.0;         // wall time of sampling and decoding (rank 0)
  double tokens_per_s = 0.0;     // new_tokens / decode_s
  // Bytes sent to other ranks during prefill and decode, summed over ranks.
  int64_t remote_bytes = 0, dispatch_bytes = 0, combine_bytes = 0, weight_bytes = 0, control_bytes = 0;
  double modeled_ms = 0.0;       // emulated link time per rank (mean over ranks)
  // MoK: Σ over steps, MoE layers and ranks of the experts shadowed, and of the bytes saved
  // against what classic dispatch would have sent for the same routing.
  int64_t shadowed_experts = 0;
  int64_t bytes_saved = 0;
  std::string decode_layout;     // fixed | counted with R > 1 and experts; "" otherwise
  int resident_layers = 0;       // MoE layers every rank held whole
  int64_t resident_bytes = 0;    // the largest rank's copies of experts it does not own
  int64_t replayed_steps = 0;    // rank 0's decode steps replayed from a recorded one
  // The memory tracker's peak of one rank while it built its model, loaded the weights and
  // decoded (the largest over ranks), in bytes: everything, and of it on the GPU (0 on the
  // CPU). `mok plan --generate` predicts it (core/plan/generation_plan.h).
  int64_t peak_bytes = 0, peak_device_bytes = 0;
  // The largest rank's allocator's live blocks at their peak (tensors at their size class, no
  // cache): what parallel.device_memory_limit binds. On the CPU the process's block cache.
  int64_t peak_block_bytes = 0;
  // The largest rank's allocator's reserved peak (its cache included): what the device held.
  int64_t peak_reserved_bytes = 0;
  // The largest rank's parameter tensors (the tracker's "parameters"): on a bf16 GPU the
  // compute copies alone, 2 bytes a weight (core/model/init.h); else the masters, 4.
  int64_t parameter_bytes = 0;
  // The largest rank's KV caches (the tracker's "kv_cache"): keys and values, (context, d)
  // each, per layer and sequence, in the compute dtype.
  int64_t kv_cache_bytes = 0;
  std::string checkpoint;        // the checkpoint folder used ("" when untrained)
  std::string untrained_config;  // the config whose initial weights were used ("" from a checkpoint)
};

// Why these options cannot run from a checkpoint of `config` on `ranks` ranks (batch split,
// placement, dispatcher, prompt length, decode layout, resident experts), or "" when they can.
std::string parallel_generate_problem(const ExperimentConfig& config, const ParallelGenerateOptions& options,
                                      int ranks);

// The config generation runs with: the checkpoint's (a folder, or a run folder: its latest
// checkpoint), or with options.untrained the YAML file `source`, with options.overrides
// applied (not yet the dispatcher and link options). Throws CheckpointError / ConfigError.
ExperimentConfig generation_config(const std::string& source, const ParallelGenerateOptions& options);

// Generates B sequences from `source`: a checkpoint folder (or a run folder: its latest
// checkpoint), or with options.untrained an experiment config file. With `comm` (an MPI
// communicator: one process per rank) this process is comm->rank() of comm->size() ranks and
// options.ranks is ignored; otherwise options.ranks local ranks run as threads (R = 1: no
// communicator). Every rank gets the complete result. Throws std::invalid_argument
// (parallel_generate_problem), CheckpointError, ConfigError and the like with a clear message.
ParallelGenerateResult generate_parallel(const std::string& source, const ParallelGenerateOptions& options,
                                         Communicator* comm = nullptr);

}  // namespace mok
