#pragma once
// LanguageModel: the decoder-only MoE transformer as the trainer sees it.
//   forward(tokens, targets) → loss and statistics; keeps what backward needs
//   backward()               → accumulates every Parameter::grad, frees what forward kept
// Built from ModelConfig (+ kitten and routing settings). Layers are in core/model/, each a
// forward/backward pair; this class owns them and the order they run in.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/model/parameter.h"

MOK_NN_BEGIN

// Per-forward statistics, for metrics.
struct ForwardStats {
  double loss = 0.0;      // mean cross-entropy over target tokens (nats)
  double aux_loss = 0.0;  // load-balancing loss, already weighted by aux_loss_coef
  double z_loss = 0.0;    // router z-loss, already weighted by z_loss_coef
  int64_t tokens = 0;     // target tokens in this forward
  int64_t dropped_tokens = 0;  // (token, expert) pairs dropped by the capacity factor
  // expert_load[moe_layer][expert]: (token, expert) pairs routed to each expert.
  std::vector<std::vector<int64_t>> expert_load;
};

struct ModelOptions {
  ModelConfig model;
  KittensConfig kittens;
  RoutingConfig routing;
  int vocab_size = 256;
  int max_seq_len = 128;
  uint64_t seed = 1234;
};

class LanguageModel {
 public:
  explicit LanguageModel(const ModelOptions& options);
  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // tokens, targets: (batch, seq) row-major token ids. Returns mean loss over targets; the
  // backward of the total objective (loss + aux + z) is taken by backward().
  ForwardStats forward(const int32_t* tokens, const int32_t* targets, int batch, int seq);
  // Gradients of (loss + aux_loss + z_loss) scaled by `scale` (e.g. 1/grad_accum), added
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

MOK_NN_END
