#pragma once
// ExperimentConfig: one experiment, as the YAML document describes it. Plain data with the
// defaults a user gets for keys they leave out. Loading, validation, printing and the
// schema live in config_io.h; docs/config.md documents every key.
//
// The top-level names (name, seed, data, model, train, kittens, routing, parallel) and the
// keys listed in README/DESIGN are stable for users and scripts: add keys, never rename.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/util/byte_size.h"

namespace mok {

struct DataConfig {
  std::string corpus = "brown";    // "brown" (the bundled Brown corpus) or a UTF-8 file/folder path
  std::string tokenizer = "byte";  // byte | bpe
  int vocab_size = 512;            // bpe only: merges = vocab_size - 256
  int seq_len = 128;               // tokens per sequence
  double val_fraction = 0.05;      // share of documents held out for validation

  friend bool operator==(const DataConfig&, const DataConfig&) = default;
};

struct ModelConfig {
  int layers = 4;
  int d_model = 128;
  int heads = 4;
  int experts = 8;            // 0 → every layer dense
  int top_k = 2;
  int expert_hidden = 256;    // SwiGLU hidden width of one expert
  int dense_hidden = 512;     // SwiGLU hidden width of a dense MLP layer
  std::string moe_layers = "all";  // all | none | every_2 | comma list of layer indices, e.g. "1,3"
  bool shared_expert = false;      // one always-on expert of width expert_hidden beside the routed ones
  bool tie_embeddings = true;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  double aux_loss_coef = 0.01;     // load-balancing loss weight
  double z_loss_coef = 0.001;      // router z-loss weight

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

struct TrainConfig {
  int steps = 2000;
  int batch = 16;              // sequences per optimizer step (global, over all ranks)
  int grad_accum = 1;          // micro-batches per step; batch must divide by it
  double lr = 3.0e-3;
  double min_lr_ratio = 0.1;   // final lr = lr * min_lr_ratio
  int warmup_steps = 100;
  std::string schedule = "cosine";  // cosine | linear | constant
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;      // global norm; 0 disables
  int eval_every = 100;        // steps between validation passes
  int eval_batches = 8;        // validation batches per pass
  int checkpoint_every = 0;    // steps between checkpoints; 0 → only the final one
  int log_every = 1;           // steps between metric rows
  std::string precision = "auto";  // auto | fp32 | bf16: activations and compute copies of weights
  // Plain activation checkpointing: keep only each block's input and run the block's forward
  // again in backward. The baseline kittens are measured against; not with kittens.
  bool activation_checkpointing = false;

  friend bool operator==(const TrainConfig&, const TrainConfig&) = default;
};

// Per-layer override of the kitten settings (keys as in KittensConfig; -1/"" = inherit).
struct KittenLayerOverride {
  std::string mode;
  std::string method;
  int rank = -1;
  int bits = -1;                   // lowbit bits (8 or 4) for this layer

  friend bool operator==(const KittenLayerOverride&, const KittenLayerOverride&) = default;
};

// Per-tensor-kind choice: `kinds` keys are kind prefixes ("attn.qkv", "moe.expert.up", "norm"),
// the longest matching prefix wins. method: exact | sketch | rsvd | subspace | lowbit |
// recompute | lowrank (= KittensConfig::method at the scheduled rank).
struct KittenKindOverride {
  std::string method;
  int rank = -1;                   // -1: the scheduled rank
  int bits = -1;                   // lowbit / factor bits; -1: KittensConfig::bits / factor_bits

  friend bool operator==(const KittenKindOverride&, const KittenKindOverride&) = default;
};

struct KittensConfig {
  std::string mode = "exact";      // exact | kitten
  std::string method = "sketch";   // sketch | rsvd | subspace | lowbit (the low-rank method)
  int rank = 16;
  std::string schedule = "constant";  // constant | linear | cosine | step | warmup | adaptive
  int min_rank = 4;
  int max_rank = 64;
  int warmup_steps = 0;            // exact for the first N steps (any schedule)
  double target_error = 0.3;       // adaptive: keep relative reconstruction error under this
  int refresh_every = 50;          // subspace: steps between basis refreshes
  int bits = 8;                    // lowbit: 8 or 4
  int final_rank = -1;             // linear/cosine/step: rank at the end; -1 → min_rank
  int schedule_steps = 0;          // linear/cosine: steps from warm-up end to final_rank; 0 → the run's steps
  int step_every = 500;            // step: steps between rank drops
  double step_factor = 0.5;        // step: rank multiplier at each drop
  int power_iters = 1;             // rsvd / subspace: power iterations of the range finder
  int factor_bits = 0;             // sketch / subspace: 0 keeps P in full precision; 8 or 4 quantizes it
  std::string rounding = "nearest";  // low-bit rounding: nearest | stochastic
  std::string elementwise = "auto";  // norm outputs, activations: auto | exact | recompute | lowbit
  std::map<std::string, KittenKindOverride> kinds;  // per tensor kind (prefix) overrides
  std::map<int, KittenLayerOverride> layers;         // per-layer overrides

  friend bool operator==(const KittensConfig&, const KittensConfig&) = default;
};

struct RoutingConfig {
  std::string dispatcher = "classic";  // classic | mok
  std::string policy = "topk";         // topk | locality
  double capacity_factor = 0.0;        // 0 → dropless
  double locality_margin = 0.0;        // locality policy: prefer local expert within this score gap
  double locality_aux_coef = 0.0;      // MoK locality loss weight (expert parallel); 0 → off
  std::string shadow = "auto";         // mok: auto (cost model) | never | always
  double cost_link_gbps = 0.0;         // mok cost model bandwidth; 0 → parallel.link_gbps, else 25
  double cost_compute_gflops = 50.0;   // mok cost model: rate of a rank's vector work
  int overlap_chunks = 4;              // mok: chunks of transfer overlapping expert compute; 0 = none
  bool cost_calibrate = false;         // mok: measure link and compute rates before the run

  friend bool operator==(const RoutingConfig&, const RoutingConfig&) = default;
};

struct ParallelConfig {
  std::string device = "cpu";    // cpu | cuda
  int ranks = 1;                 // expert-parallel ranks
  std::string comm = "local";    // local | mpi | nccl
  int threads = 2;               // CPU threads per rank
  double link_gbps = 0.0;        // emulated link bandwidth in GB/s; 0 → no emulation
  double link_latency_us = 0.0;  // emulated per-message latency
  bool link_sleep = false;       // also sleep for the emulated link time (else only modeled)
  std::string expert_placement = "contiguous";  // contiguous | round_robin | "0,0,1,1" (owner per expert)
  std::string gpus;              // device cuda: GPU index per rank, "2,3"; "" → rank r on cuda:r
  std::string device_memory_limit;  // per rank, e.g. "16GiB"; "" → no limit (core/util/byte_size.h)

  // device_memory_limit in bytes; 0 when there is none (or it does not parse: config_check
  // reports that before a run).
  int64_t device_memory_limit_bytes() const {
    return device_memory_limit.empty() ? 0 : parse_byte_size(device_memory_limit).value_or(0);
  }

  friend bool operator==(const ParallelConfig&, const ParallelConfig&) = default;
};

struct LoggingConfig {
  std::string db = "runs/mok.db";  // run store; --db overrides
  bool progress = true;            // progress bar on a terminal
  std::string checkpoint_dir = "runs/checkpoints";

  friend bool operator==(const LoggingConfig&, const LoggingConfig&) = default;
};

struct ExperimentConfig {
  std::string name = "experiment";
  uint64_t seed = 1234;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  KittensConfig kittens;
  RoutingConfig routing;
  ParallelConfig parallel;
  LoggingConfig logging;

  friend bool operator==(const ExperimentConfig&, const ExperimentConfig&) = default;
};

}  // namespace mok
