#pragma once
// LanguageModel: the decoder-only MoE transformer as the trainer sees it.
//   forward(tokens, targets) → loss and statistics; keeps what backward needs
//   backward()               → accumulates every Parameter::grad, frees what forward kept
// Built from ModelConfig (+ kitten and routing settings). Layers are in core/model/, each a
// forward/backward pair; this class owns them and the order they run in.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/model/parameter.h"
#include "core/routing/topk_router.h"

MOK_NN_BEGIN

class SavedInputPolicy;
class MoeLayer;
struct LayerKvCache;

// Per-forward statistics, for metrics.
struct ForwardStats {
  double loss = 0.0;      // mean cross-entropy over target tokens (nats)
  double aux_loss = 0.0;  // load-balancing loss, already weighted by aux_loss_coef
  double z_loss = 0.0;    // router z-loss, already weighted by z_loss_coef
  double locality_loss = 0.0;  // MoK locality loss, weighted by routing.locality_aux_coef (0 unless set)
  int64_t tokens = 0;     // target tokens in this forward
  int64_t dropped_tokens = 0;  // (token, expert) pairs dropped by the capacity factor
  // expert_load[moe_layer][expert]: (token, expert) pairs routed to each expert.
  std::vector<std::vector<int64_t>> expert_load;
  // moe_layer_ids[i]: the block index of expert_load[i] (for moe/load/layer<L>/expert<E>).
  std::vector<int> moe_layer_ids;
};

// A forward's statistics before the host has read the device values among them (each MoE
// layer's router losses and expert load): resolve() reads them, waiting for the device. A
// recorded step's are resolved again after each replay (core/train/train_step.h).
struct PendingForwardStats {
  ForwardStats known;  // everything but the router losses and the loads
  std::vector<RouterLosses> router_losses;          // per MoE layer
  std::vector<std::shared_ptr<HostReading>> loads;  // per MoE layer: (E) i64
  ForwardStats resolve() const;
};

struct ModelOptions {
  ModelConfig model;
  KittensConfig kittens;
  RoutingConfig routing;
  int vocab_size = 256;
  int max_seq_len = 128;
  uint64_t seed = 1234;
  // Keep norm inputs and MLP pre-activations only; rebuild the normalised inputs of the
  // attention / dense-MLP linear layers and every MLP / expert hidden in backward.
  bool recompute = false;
  // Plain activation checkpointing: every block keeps only its input and runs its forward
  // again in backward (train.activation_checkpointing).
  bool checkpoint_blocks = false;
  // Length of the run in steps: the horizon of the kitten rank schedules (linear, cosine).
  int64_t train_steps = 0;
  // (experts) which routed experts this replica builds; empty → all. For expert
  // parallelism: the other slots stay null, and parameters() skips them. Every expert's
  // initial values depend on its name and the seed only, so replicas agree.
  std::vector<bool> local_experts;
  // (layers) true where the block's MoE layer holds every expert whatever local_experts says:
  // a generating rank's resident layers (core/train/resident_experts.h). Empty → none.
  std::vector<bool> resident_layers;
};

// Which layers are MoE for ModelConfig.moe_layers ("all", "none", "every_N" = layers
// N−1, 2N−1, …, or a comma list "1,3"); all false when experts == 0. Throws
// std::invalid_argument naming the bad value.
std::vector<bool> moe_layer_mask(const ModelConfig& model);
// How many layers moe_layer_mask marks.
int moe_layer_count(const ModelConfig& model);

class LanguageModel {
 public:
  explicit LanguageModel(const ModelOptions& options);
  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // tokens, targets: (batch, seq) row-major token ids. Returns mean loss over targets; the
  // backward of the total objective (loss + aux + z) is taken by backward().
  ForwardStats forward(const int32_t* tokens, const int32_t* targets, int batch, int seq);
  // The same, its device statistics left for the caller to resolve (after the step: a MoE
  // forward then never waits for the device).
  PendingForwardStats forward_pending(const int32_t* tokens, const int32_t* targets, int batch, int seq);
  // Gradients of (loss + aux_loss + z_loss + locality_loss) scaled by `scale` (e.g. 1/grad_accum), added
  // into Parameter::grad.
  void backward(double scale = 1.0);
  // Forward without keeping anything for backward; returns the mean loss. For validation.
  ForwardStats evaluate(const int32_t* tokens, const int32_t* targets, int batch, int seq);

  std::vector<Parameter*> parameters();
  void zero_grad();
  int64_t parameter_count() const;
  const ModelOptions& options() const;

  // Training progress, for rank schedules and subspace refreshes (kittens).
  void set_step(int64_t step);
  int64_t step() const;

  // How every linear layer keeps its input for backward (null = exact). Set between steps.
  void set_saved_input_policy(std::shared_ptr<SavedInputPolicy> policy);
  // With kittens.mode other than exact the model installs a KittenSavedInputPolicy at
  // construction. Its per-layer metrics (kittens/rank/layer<L>, kittens/error/layer<L>) for
  // the step in progress; empty without a kitten policy.
  std::vector<std::pair<std::string, double>> kitten_metrics() const;
  // A step's forward and backward recorded and replayed (core/backend/step_graph.h): whether
  // the saved-input policy allows it from `step` on, and the policy's hooks around it
  // (SavedInputPolicy::step_recorded / step_replayed).
  bool replayable_from(int64_t step) const;
  void step_recorded();
  void step_replayed();

  // Logits (batch·seq, vocab) of a full forward that keeps nothing (evaluate's path).
  Tensor logits(const int32_t* tokens, int batch, int seq);
  // Incremental forward of one sequence: `n` new tokens at positions [pos0, pos0 + n), using
  // and extending `cache` (one entry per layer, see make_kv_cache). Returns (n, vocab) logits.
  // MoE layers run dropless here. Keeps nothing for backward.
  Tensor forward_cached(const int32_t* tokens, int n, int pos0, std::vector<LayerKvCache>& cache);
  std::vector<LayerKvCache> make_kv_cache(int max_len) const;
  // Incremental forward of `batch` sequences, `n` new tokens each: tokens (batch, n)
  // row-major, sequence b at positions [pos0[b], pos0[b] + n) with its own cache[b] (from
  // make_kv_cache). Attention runs per sequence; norms, MoE layers (router and dispatcher
  // see all batch·n rows in one call) and the head run over all rows. Returns
  // (batch·n, vocab) logits, sequence-major. Each sequence's logits equal those of
  // forward_cached on it alone up to float rounding. With an expert-parallel dispatcher
  // installed this is a collective: every rank calls it the same number of times.
  Tensor forward_cached_batch(const int32_t* tokens, int batch, int n, const std::vector<int>& pos0,
                              std::vector<std::vector<LayerKvCache>>& cache);

  // Called before each block and before the head in forward, backward and evaluate (e.g. to
  // abandon a step when a stop is requested). It may throw: the exception leaves the call,
  // the parameters are as they were (no update happens inside the model), and the next
  // zero_grad() + forward() starts clean. Empty: no check.
  void set_block_boundary(std::function<void()> check);

  // The MoE layers, in layer order (null entries for dense layers), e.g. to install a
  // multi-rank ExpertDispatcher.
  std::vector<MoeLayer*> moe_layers();
  int layer_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

MOK_NN_END
