#include "core/model/batched_inference_session.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
#include "core/model/moe_layer.h"
#include "core/util/environment_choice.h"

MOK_NN_BEGIN

BatchedInferenceSession::BatchedInferenceSession(LanguageModel& model, int batch, int max_len)
    : model_(model), batch_(batch), max_len_(max_len > 0 ? max_len : model.options().max_seq_len) {
  if (batch < 1) throw std::invalid_argument("BatchedInferenceSession: batch must be >= 1");
  cache_.reserve(batch);
  for (int b = 0; b < batch; ++b) cache_.push_back(model.make_kv_cache(max_len_));
  tokens_.assign(static_cast<size_t>(batch), 0);
  positions_.assign(static_cast<size_t>(batch), 0);
}

BatchedInferenceSession::~BatchedInferenceSession() {
  graph_logits_.reset();  // refers to the graph's memory
  graph_.reset();
}

void BatchedInferenceSession::set_replay(bool on) {
  replay_wanted_ = false;
  if (!on || environment_choice("MOK_CUDA_GRAPH", {"on", "off"}) == "off") return;
  const ExecContext& cx = ExecContext::current();
  if (cx.device().is_cpu()) return;
  // MoE layers: the host sees nothing of them only without a capacity, with the offsets left
  // on the device (which the grouped products take in bf16).
  const std::vector<MoeLayer*> moe = model_.moe_layers();
  const bool any_moe = std::any_of(moe.begin(), moe.end(), [](const MoeLayer* m) { return m != nullptr; });
  if (any_moe && (model_.options().routing.capacity_factor > 0 || !cx.ops().grouped_segments_on_device() ||
                  cx.compute_dtype() != DType::bf16))
    return;
  replay_wanted_ = true;
}

Tensor BatchedInferenceSession::forward(const int32_t* tokens, int n) {
  Tensor logits = model_.forward_cached_batch(tokens, batch_, n, positions_, cache_);  // (batch·n, vocab)
  if (logits.dtype() == kRealDType) return logits;
  // on the host in `real` (a device's logits may be bf16)
  const ExecContext& cx = ExecContext::current();
  Tensor wide = cx.empty(logits.shape(), kRealDType);
  cx.ops().convert(logits, wide);
  return wide;
}

std::vector<real> BatchedInferenceSession::last_rows(const real* logits, int n) const {
  const int64_t vocab = model_.options().vocab_size;
  std::vector<real> out(static_cast<size_t>(batch_ * vocab));
  for (int b = 0; b < batch_; ++b) {
    const real* last = logits + (static_cast<int64_t>(b) * n + n - 1) * vocab;
    std::copy(last, last + vocab, out.begin() + b * vocab);
  }
  return out;
}

bool BatchedInferenceSession::record() {
  Ops& ops = ExecContext::current().ops();
  std::unique_ptr<StepGraph> graph = ops.make_step_graph();
  if (!graph) {
    replay_wanted_ = false;
    return false;
  }
  graph->add_input(tokens_.data(), tokens_.size() * sizeof(int32_t));
  graph->add_input(positions_.data(), positions_.size() * sizeof(int));
  try {
    graph->record([&] { graph_logits_ = ops.read_later(forward(tokens_.data(), 1)); });
  } catch (const std::exception& e) {
    graph_logits_.reset();
    replay_wanted_ = false;
    std::fprintf(stderr, "mok: decoding runs op by op (%s; MOK_CUDA_GRAPH=off skips the attempt)\n", e.what());
    return false;
  }
  graph_ = std::move(graph);
  return true;
}

std::vector<real> BatchedInferenceSession::feed(const int32_t* tokens, int n, bool decode_step) {
  if (n < 1) throw std::invalid_argument("BatchedInferenceSession: nothing to feed");
  if (position_ + n > max_len_)
    throw std::length_error("BatchedInferenceSession: the caches hold " + std::to_string(max_len_) +
                            " positions; " + std::to_string(position_ + n) +
                            " needed (reset and prefill a shorter context)");
  std::fill(positions_.begin(), positions_.end(), position_);
  // Two decode steps op by op first: products are tuned and every plan and cache built then.
  if (decode_step && replay_wanted_ && !graph_ && eager_decodes_ >= 2) record();
  if (decode_step && graph_) {
    // Recording ran nothing: this step and every later one come from the graph.
    graph_->replay();
    ExecContext::current().ops().synchronize();
    ++replayed_;
    position_ += n;
    return last_rows(static_cast<const real*>(graph_logits_->data()), n);
  }
  Tensor logits = forward(tokens, n);
  if (decode_step) ++eager_decodes_;
  position_ += n;
  std::vector<real> all(static_cast<size_t>(logits.numel()));
  logits.copy_to_host(all.data(), logits.bytes());
  return last_rows(all.data(), n);
}

std::vector<real> BatchedInferenceSession::prefill(const std::vector<int32_t>& prompts, int n) {
  if (n < 1 || static_cast<int64_t>(prompts.size()) != static_cast<int64_t>(batch_) * n)
    throw std::invalid_argument("BatchedInferenceSession: prefill needs batch · n tokens (" + std::to_string(batch_) +
                                " prompts of " + std::to_string(n) + "), got " + std::to_string(prompts.size()));
  position_ = 0;
  return feed(prompts.data(), n, false);
}

std::vector<real> BatchedInferenceSession::decode(const std::vector<int32_t>& tokens) {
  if (static_cast<int>(tokens.size()) != batch_)
    throw std::invalid_argument("BatchedInferenceSession: decode needs one token per sequence");
  std::copy(tokens.begin(), tokens.end(), tokens_.begin());
  return feed(tokens_.data(), 1, true);
}

MOK_NN_END
