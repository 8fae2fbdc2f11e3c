#pragma once
// BatchedInferenceSession: incremental decoding of B sequences at once, each with its own
// KV cache, all at the same position.
//   prefill(prompts (B, n))  → logits (B, vocab) for the token after each prompt
//   decode(tokens (B))       → logits (B, vocab) for the token after each given token
// Attention runs per sequence over its own cache; every other layer runs over the B rows of
// a step together (LanguageModel::forward_cached_batch), so an MoE layer routes and
// dispatches B rows per decode step (B·n in prefill). Sequence b's logits equal those of an
// InferenceSession fed the same tokens, up to float rounding. With an expert-parallel
// dispatcher installed, prefill and decode are collectives.
//
// Replayed decode steps (set_replay): every decode step has the same shapes and the same
// caches, so on a GPU the third one is recorded as a CUDA graph (core/backend/step_graph.h)
// and every later one replays it: the step's few hundred small kernels from one launch,
// where decoding a few dozen rows is bound by launching them. The tokens and the positions
// are the recording's inputs (refilled before each replay, as the kernels read positions
// from memory), the logits its read-back; the same bits as op by op. Only where the host
// need not see anything inside the step: one rank, no MoE capacity, MoE layers in bf16 with
// their offsets on the device (Ops::grouped_segments_on_device). A recording that fails
// leaves the session op by op.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend/host_reading.h"
#include "core/backend/step_graph.h"
#include "core/model/attention.h"
#include "core/model/language_model.h"

MOK_NN_BEGIN

class BatchedInferenceSession {
 public:
  // max_len ≤ the model's max_seq_len; 0 → max_seq_len.
  BatchedInferenceSession(LanguageModel& model, int batch, int max_len = 0);
  ~BatchedInferenceSession();

  // prompts: (batch, n) row-major, every prompt n tokens. Restarts every cache.
  std::vector<real> prefill(const std::vector<int32_t>& prompts, int n);
  // tokens: (batch) one new token per sequence.
  std::vector<real> decode(const std::vector<int32_t>& tokens);
  void reset() { position_ = 0; }
  int batch() const { return batch_; }
  int position() const { return position_; }  // tokens in each cache
  int max_len() const { return max_len_; }

  // Decode steps replayed from a recorded one where the model and device allow it (above);
  // MOK_CUDA_GRAPH=off keeps them op by op. Off by default (a multi-rank caller's steps
  // exchange rows through the host).
  void set_replay(bool on);
  int64_t replayed_steps() const { return replayed_; }

 private:
  // decode_step: tokens is tokens_ and n = 1 (what a recorded step reads)
  std::vector<real> feed(const int32_t* tokens, int n, bool decode_step);
  Tensor forward(const int32_t* tokens, int n);  // (batch·n, vocab) logits in `real`
  std::vector<real> last_rows(const real* logits, int n) const;
  bool record();  // the next decode step as a graph; false (op by op from now on) if it fails

  LanguageModel& model_;
  int batch_;
  int max_len_;
  int position_ = 0;
  std::vector<std::vector<LayerKvCache>> cache_;  // [sequence][layer]
  // Decoding's inputs, at fixed addresses (a recorded step reads them at every replay)
  std::vector<int32_t> tokens_;  // (batch)
  std::vector<int> positions_;   // (batch): each sequence's first position this step
  bool replay_wanted_ = false;
  int64_t eager_decodes_ = 0;
  int64_t replayed_ = 0;
  std::unique_ptr<StepGraph> graph_;
  std::shared_ptr<HostReading> graph_logits_;  // (batch, vocab) `real`, each replay's
};

MOK_NN_END
