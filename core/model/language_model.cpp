#include "core/model/language_model.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/backend/rope.h"
#include "core/model/cross_entropy.h"
#include "core/model/embedding.h"
#include "core/model/lm_head.h"
#include "core/model/rms_norm.h"
#include "core/kittens/kitten_saved_input_policy.h"
#include "core/model/saved_input_policy.h"
#include "core/model/transformer_block.h"
#include "core/model/zero_gradients.h"

MOK_NN_BEGIN

std::vector<bool> moe_layer_mask(const ModelConfig& m) {
  std::vector<bool> mask(std::max(0, m.layers), false);
  if (m.experts <= 0) return mask;
  const std::string& s = m.moe_layers;
  if (s == "all" || s.empty()) {
    mask.assign(mask.size(), true);
  } else if (s == "none") {
  } else if (s.rfind("every_", 0) == 0) {
    int every = 0;
    try {
      size_t used = 0;
      every = std::stoi(s.substr(6), &used);
      if (used != s.size() - 6) every = 0;
    } catch (...) {
      every = 0;
    }
    if (every < 1) throw std::invalid_argument("model.moe_layers: '" + s + "' needs a positive N in every_N");
    for (int l = every - 1; l < m.layers; l += every) mask[l] = true;
  } else {
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
      int l = -1;
      try {
        size_t used = 0;
        l = std::stoi(item, &used);
        while (used < item.size() && item[used] == ' ') ++used;
        if (used != item.size()) l = -1;
      } catch (...) {
        l = -1;
      }
      if (l < 0 || l >= m.layers)
        throw std::invalid_argument("model.moe_layers: '" + item + "' in '" + s +
                                    "' is not a layer index in [0, " + std::to_string(m.layers) +
                                    "); use all, none, every_N or a comma list");
      mask[l] = true;
    }
  }
  return mask;
}

int moe_layer_count(const ModelConfig& m) {
  const std::vector<bool> mask = moe_layer_mask(m);
  return static_cast<int>(std::count(mask.begin(), mask.end(), true));
}

struct LanguageModel::Impl {
  ModelOptions options;
  RopeTable rope;
  std::unique_ptr<Embedding> embedding;
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  std::unique_ptr<RmsNorm> final_norm;
  std::unique_ptr<LmHead> head;
  CrossEntropy ce;
  std::shared_ptr<SavedInputPolicy> policy;
  int64_t step = 0;
  bool forward_pending = false;
  std::function<void()> block_boundary;

  void boundary() const {
    if (block_boundary) block_boundary();
  }

  // With stats: each MoE layer's losses and load, still on the device, in layer order.
  Tensor run_blocks(Tensor x, int batch, int seq, bool keep, PendingForwardStats* stats) {
    for (size_t l = 0; l < blocks.size(); ++l) {
      boundary();
      auto& b = blocks[l];
      MoeStats ms;
      x = b->forward(x, batch, seq, keep, &ms);
      if (b->is_moe() && stats) {
        stats->router_losses.push_back(std::move(ms.losses));
        stats->loads.push_back(std::move(ms.load));
        stats->known.dropped_tokens += ms.dropped;
        stats->known.moe_layer_ids.push_back(static_cast<int>(l));
      }
    }
    return x;
  }

  PendingForwardStats run(const int32_t* tokens, const int32_t* targets, int batch, int seq, bool keep) {
    check_shape(batch, seq);
    const int64_t n = static_cast<int64_t>(batch) * seq;
    PendingForwardStats stats;
    Tensor x = run_blocks(embedding->forward(tokens, n, keep), batch, seq, keep, &stats);
    boundary();
    Tensor h = final_norm->forward(x, keep);
    x.reset();
    Tensor logits = head->forward(h, keep, keep ? CrossEntropy::saved_tag() : MemTag{});
    h.reset();
    CrossEntropySum s = ce.forward(std::move(logits), targets, keep);
    stats.known.tokens = s.count;
    stats.known.loss = s.count ? s.loss_sum / static_cast<double>(s.count) : 0.0;
    return stats;
  }

  void check_shape(int batch, int seq) const {
    if (batch < 1 || seq < 1)
      throw std::invalid_argument("LanguageModel: batch and seq must be positive");
    if (seq > options.max_seq_len)
      throw std::invalid_argument("LanguageModel: sequence of " + std::to_string(seq) +
                                  " tokens exceeds max_seq_len " + std::to_string(options.max_seq_len));
  }
};

LanguageModel::LanguageModel(const ModelOptions& o) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = o;
  const ModelConfig& c = o.model;
  if (c.layers < 1 || c.d_model < 1 || c.heads < 1 || c.d_model % c.heads)
    throw std::invalid_argument("model: need layers ≥ 1 and d_model a multiple of heads");
  if (o.vocab_size < 2) throw std::invalid_argument("model: vocab_size must be ≥ 2");
  m.rope = RopeTable(o.max_seq_len, c.d_model / c.heads, c.rope_theta);
  const std::vector<bool> moe = moe_layer_mask(c);
  BlockConfig bc;
  bc.d = c.d_model;
  bc.heads = c.heads;
  bc.dense_hidden = c.dense_hidden;
  bc.norm_eps = c.norm_eps;
  bc.init_std = c.init_std;
  bc.out_std = c.init_std / std::sqrt(2.0 * c.layers);
  bc.recompute = o.recompute || kitten_wants_recompute(o.kittens);
  bc.checkpoint = o.checkpoint_blocks;
  bc.moe_config.experts = c.experts;
  bc.moe_config.top_k = c.top_k;
  bc.moe_config.hidden = c.expert_hidden;
  bc.moe_config.shared_expert = c.shared_expert;
  bc.moe_config.aux_loss_coef = c.aux_loss_coef;
  bc.moe_config.z_loss_coef = c.z_loss_coef;
  bc.moe_config.capacity_factor = o.routing.capacity_factor;
  bc.moe_config.recompute = bc.recompute;  // the experts' hidden too, as the dense MLP's
  if (!o.local_experts.empty() && static_cast<int>(o.local_experts.size()) != c.experts)
    throw std::invalid_argument("model: local_experts names " + std::to_string(o.local_experts.size()) +
                                " experts, the model has " + std::to_string(c.experts));
  if (!o.resident_layers.empty() && static_cast<int>(o.resident_layers.size()) != c.layers)
    throw std::invalid_argument("model: resident_layers names " + std::to_string(o.resident_layers.size()) +
                                " layers, the model has " + std::to_string(c.layers));
  m.embedding = std::make_unique<Embedding>("embed", o.vocab_size, c.d_model, c.init_std, o.seed);
  for (int l = 0; l < c.layers; ++l) {
    bc.moe = moe[l];
    const bool resident = !o.resident_layers.empty() && o.resident_layers[l];
    bc.moe_config.local_experts = resident ? std::vector<bool>{} : o.local_experts;
    m.blocks.push_back(std::make_unique<TransformerBlock>(l, bc, &m.rope, o.seed));
  }
  m.final_norm = std::make_unique<RmsNorm>("final_norm", c.d_model, c.norm_eps, -1, "final_norm");
  m.head = std::make_unique<LmHead>("head", c.d_model, o.vocab_size,
                                    c.tie_embeddings ? &m.embedding->weight() : nullptr, c.init_std, o.seed);
  if (o.kittens.mode != "exact") {
    if (const std::string problem = kitten_config_problem(o.kittens); !problem.empty())
      throw std::invalid_argument(problem);
    set_saved_input_policy(std::make_shared<KittenSavedInputPolicy>(o.kittens, c.layers, o.seed, o.train_steps));
  }
}

LanguageModel::~LanguageModel() = default;

ForwardStats PendingForwardStats::resolve() const {
  ForwardStats stats = known;
  for (const RouterLosses& r : router_losses) {
    const RouterLosses::Values v = r.read();
    stats.aux_loss += v.aux;
    stats.z_loss += v.z;
    stats.locality_loss += v.locality;
  }
  for (const auto& load : loads) stats.expert_load.push_back(load ? load->values<int64_t>() : std::vector<int64_t>{});
  return stats;
}

ForwardStats LanguageModel::forward(const int32_t* tokens, const int32_t* targets, int batch, int seq) {
  return forward_pending(tokens, targets, batch, seq).resolve();
}

PendingForwardStats LanguageModel::forward_pending(const int32_t* tokens, const int32_t* targets, int batch,
                                                   int seq) {
  if (impl_->forward_pending)
    throw std::logic_error("LanguageModel::forward: the previous forward has not been through backward");
  PendingForwardStats s = impl_->run(tokens, targets, batch, seq, true);
  impl_->forward_pending = true;
  return s;
}

void LanguageModel::backward(double scale) {
  Impl& m = *impl_;
  if (!m.forward_pending) throw std::logic_error("LanguageModel::backward: no forward to go back through");
  const real sc = static_cast<real>(scale);
  m.forward_pending = false;  // also when a boundary check throws: the next forward starts clean
  m.boundary();
  Tensor d = m.head->backward(m.ce.backward(sc));
  d = m.final_norm->backward(d);
  for (auto it = m.blocks.rbegin(); it != m.blocks.rend(); ++it) {
    m.boundary();
    d = (*it)->backward(d, sc);
  }
  m.embedding->backward(d);
}

ForwardStats LanguageModel::evaluate(const int32_t* tokens, const int32_t* targets, int batch, int seq) {
  return impl_->run(tokens, targets, batch, seq, false).resolve();
}

Tensor LanguageModel::logits(const int32_t* tokens, int batch, int seq) {
  Impl& m = *impl_;
  m.check_shape(batch, seq);
  const int64_t n = static_cast<int64_t>(batch) * seq;
  Tensor x = m.run_blocks(m.embedding->forward(tokens, n, false), batch, seq, false, nullptr);
  return m.head->forward(m.final_norm->forward(x, false), false);
}

std::vector<LayerKvCache> LanguageModel::make_kv_cache(int max_len) const {
  if (max_len > impl_->options.max_seq_len)
    throw std::invalid_argument("KV cache of " + std::to_string(max_len) + " positions exceeds max_seq_len " +
                                std::to_string(impl_->options.max_seq_len));
  std::vector<LayerKvCache> cache(impl_->blocks.size());
  // On the current device, in its compute dtype (zero-filled on the CPU); the tracker's
  // kv_cache bytes.
  const ExecContext& cx = ExecContext::current();
  const MemTag tag{MemCategory::kv_cache, -1, ""};
  const std::vector<int64_t> shape = {max_len, impl_->options.model.d_model};
  for (auto& c : cache) {
    c.k = cx.device().is_cpu() ? Tensor(shape, tag) : cx.activation(shape, tag);
    c.v = cx.device().is_cpu() ? Tensor(shape, tag) : cx.activation(shape, tag);
  }
  return cache;
}

Tensor LanguageModel::forward_cached(const int32_t* tokens, int n, int pos0, std::vector<LayerKvCache>& cache) {
  Impl& m = *impl_;
  if (cache.size() != m.blocks.size()) throw std::invalid_argument("forward_cached: cache has the wrong layer count");
  Tensor x = m.embedding->forward(tokens, n, false);
  for (size_t l = 0; l < m.blocks.size(); ++l) x = m.blocks[l]->forward_cached(x, cache[l], pos0);
  return m.head->forward(m.final_norm->forward(x, false), false);
}

Tensor LanguageModel::forward_cached_batch(const int32_t* tokens, int batch, int n, const std::vector<int>& pos0,
                                           std::vector<std::vector<LayerKvCache>>& cache) {
  Impl& m = *impl_;
  if (batch < 1 || n < 1) throw std::invalid_argument("forward_cached_batch: batch and n must be >= 1");
  if (static_cast<int>(cache.size()) != batch || static_cast<int>(pos0.size()) != batch)
    throw std::invalid_argument("forward_cached_batch: one cache and one position per sequence needed");
  for (const auto& c : cache)
    if (c.size() != m.blocks.size()) throw std::invalid_argument("forward_cached_batch: cache has the wrong layer count");
  Tensor x = m.embedding->forward(tokens, static_cast<int64_t>(batch) * n, false);  // (batch·n, d)
  std::vector<LayerKvCache*> layer_cache(batch);
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    for (int b = 0; b < batch; ++b) layer_cache[b] = &cache[b][l];
    x = m.blocks[l]->forward_cached_batch(x, n, layer_cache, pos0);
  }
  return m.head->forward(m.final_norm->forward(x, false), false);
}

std::vector<Parameter*> LanguageModel::parameters() {
  Impl& m = *impl_;
  std::vector<Parameter*> out{&m.embedding->weight()};
  for (auto& b : m.blocks) b->collect_parameters(out);
  out.push_back(&m.final_norm->weight());
  if (Parameter* h = m.head->own_weight()) out.push_back(h);
  return out;
}

void LanguageModel::zero_grad() { zero_gradients(parameters()); }

int64_t LanguageModel::parameter_count() const {
  int64_t n = 0;
  for (Parameter* p : const_cast<LanguageModel*>(this)->parameters()) n += p->numel();
  return n;
}

const ModelOptions& LanguageModel::options() const { return impl_->options; }
void LanguageModel::set_step(int64_t step) {
  impl_->step = step;
  if (impl_->policy) impl_->policy->set_step(step);
}
int64_t LanguageModel::step() const { return impl_->step; }

void LanguageModel::set_saved_input_policy(std::shared_ptr<SavedInputPolicy> policy) {
  Impl& m = *impl_;
  m.policy = std::move(policy);
  for (auto& b : m.blocks) b->set_policy(m.policy.get());
  m.head->set_policy(m.policy.get());
  m.final_norm->set_saved_policy(m.policy.get());
}

bool LanguageModel::replayable_from(int64_t step) const {
  return !impl_->policy || impl_->policy->replayable_from(step);
}
void LanguageModel::step_recorded() {
  if (impl_->policy) impl_->policy->step_recorded();
}
void LanguageModel::step_replayed() {
  if (impl_->policy) impl_->policy->step_replayed();
}

std::vector<std::pair<std::string, double>> LanguageModel::kitten_metrics() const {
  const auto* k = dynamic_cast<const KittenSavedInputPolicy*>(impl_->policy.get());
  return k ? k->policy().metrics() : std::vector<std::pair<std::string, double>>{};
}

std::vector<MoeLayer*> LanguageModel::moe_layers() {
  std::vector<MoeLayer*> out;
  for (auto& b : impl_->blocks) out.push_back(b->moe());
  return out;
}

void LanguageModel::set_block_boundary(std::function<void()> check) { impl_->block_boundary = std::move(check); }

int LanguageModel::layer_count() const { return static_cast<int>(impl_->blocks.size()); }

MOK_NN_END
