#include "core/plan/saved_activation_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "core/kittens/kitten_policy.h"
#include "core/kittens/kitten_saved_input_policy.h"
#include "core/plan/planned_shape.h"
#include "core/train/rank_device.h"

namespace mok {

namespace {

// The shape a saved tensor's width is written in.
struct Dims {
  double d = 0, heads = 0, experts = 0, top_k = 0, expert_hidden = 0, dense_hidden = 0, vocab = 0;
};

// Which part of the model keeps the tensor.
enum class Part {
  attention,      // every layer: attention and its norm (transformer_block.cpp, attention.cpp, rms_norm.cpp)
  ffn_norm,       // every layer: the norm before the MLP or MoE
  dense_mlp,      // layers without experts: SwiGluMlp "mlp" (swiglu_mlp.cpp)
  moe,            // layers with experts, per token: the router (routing/topk_router.cpp)
  routed,         // layers with experts, per routed copy (tokens · top_k rows): GroupedSwiGlu (grouped_swiglu.cpp)
  shared_expert,  // layers with experts and model.shared_expert: SwiGluMlp "moe.shared"
  model,          // once per model, layer -1 (language_model.cpp, embedding.cpp, lm_head.cpp, cross_entropy.cpp)
};

// How it is kept, i.e. which question the model asks the kitten policy about it.
enum class Keeper {
  linear_input,  // the input of a linear layer: KittenPolicy::choose_linear (Linear, LmHead, GroupedSwiGlu)
  elementwise,   // a SavedTensorSlot: KittenPolicy::choose_elementwise (exact or low-bit; "recompute" keeps it exact)
  exact,         // always exact, the policy is not asked (small f32/i32 tensors, the loss gradient)
};

// Element type of the exact tensor: the compute dtype (bf16 on a GPU run, `real` on the CPU),
// f32 (kRealDType: norm and softmax statistics) or i32 (token and expert ids).
enum class Element { activation, f32, i32 };

// Which recompute drops the tensor (it is then rebuilt in backward and not kept).
enum class DroppedBy {
  nothing,
  block_recompute,  // BlockConfig::recompute = kitten_wants_recompute(kittens): norm outputs, every SwiGLU hidden
  local_recompute,  // the same, where the MoE layers keep the local dispatcher (one rank), which
                    // gathers the routed experts' inputs again (ExpertDispatcher::can_rebuild_expert_inputs)
};

struct SavedKind {
  const char* kind;
  Part part;
  Keeper keeper;
  Element element;
  double (*cols)(const Dims&);  // elements per row (per token, or per routed copy)
  DroppedBy dropped_by;
};

// Every tensor the model keeps for backward during training, matching the code that saves it.
// Rows are tokens of the micro-batch, except Part::routed (one row per routed copy).
const SavedKind kSavedKinds[] = {
    // Attention block, every layer. x → attn_norm → Wqkv → RoPE → attention → Wo; then h → ffn_norm.
    {"attn_norm.input", Part::attention, Keeper::elementwise, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::nothing},
    {"attn_norm.rstd", Part::attention, Keeper::exact, Element::f32, [](const Dims&) { return 1.0; }, DroppedBy::nothing},
    // The norm output (Wqkv's input); with recompute it is rebuilt from attn_norm.input and rstd.
    {"attn.qkv.input", Part::attention, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::block_recompute},
    // q, k, v after RoPE, for the attention backward.
    {"attn.qkv", Part::attention, Keeper::elementwise, Element::activation, [](const Dims& s) { return 3.0 * s.d; }, DroppedBy::nothing},
    // The attention output o: kept by Attention itself without a policy, else Wo's saved input.
    {"attn.out.input", Part::attention, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::nothing},
    // Log-sum-exp per (batch, head, position).
    {"attn.lse", Part::attention, Keeper::exact, Element::f32, [](const Dims& s) { return s.heads; }, DroppedBy::nothing},
    {"ffn_norm.input", Part::ffn_norm, Keeper::elementwise, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::nothing},
    {"ffn_norm.rstd", Part::ffn_norm, Keeper::exact, Element::f32, [](const Dims&) { return 1.0; }, DroppedBy::nothing},

    // Dense SwiGLU MLP (hidden h = model.dense_hidden): up (d → 2h), swiglu, down (h → d).
    {"mlp.up.input", Part::dense_mlp, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::block_recompute},
    {"mlp.act.input", Part::dense_mlp, Keeper::elementwise, Element::activation, [](const Dims& s) { return 2.0 * s.dense_hidden; }, DroppedBy::nothing},
    // The hidden h; with recompute it is rebuilt from mlp.act.input.
    {"mlp.down.input", Part::dense_mlp, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.dense_hidden; }, DroppedBy::block_recompute},

    // MoE router, per token. Its input (the ffn_norm output) is kept even with recompute.
    {"moe.router.input", Part::moe, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::block_recompute},
    {"moe.router.probs", Part::moe, Keeper::exact, Element::f32, [](const Dims& s) { return s.experts; }, DroppedBy::nothing},
    {"moe.router.lse", Part::moe, Keeper::exact, Element::f32, [](const Dims&) { return 1.0; }, DroppedBy::nothing},
    {"moe.router.choice", Part::moe, Keeper::exact, Element::i32, [](const Dims& s) { return s.top_k; }, DroppedBy::nothing},

    // Routed experts (hidden f = model.expert_hidden), per routed copy. Exact and low-bit
    // copies are one row-wise copy over all experts' rows; low-rank ones are kept per expert.
    // The hidden is rebuilt from the pre-activation where blocks recompute (MoeConfig::recompute
    // follows BlockConfig::recompute), as the dense MLP's; the input gathered again from the
    // recomputed norm output where the dispatcher is the local one.
    {"moe.expert.up.input", Part::routed, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::local_recompute},
    {"moe.expert.act.input", Part::routed, Keeper::elementwise, Element::activation, [](const Dims& s) { return 2.0 * s.expert_hidden; }, DroppedBy::nothing},
    {"moe.expert.down.input", Part::routed, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.expert_hidden; }, DroppedBy::block_recompute},

    // Shared expert, per token (same shapes as a routed expert).
    {"moe.shared.up.input", Part::shared_expert, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::block_recompute},
    {"moe.shared.act.input", Part::shared_expert, Keeper::elementwise, Element::activation, [](const Dims& s) { return 2.0 * s.expert_hidden; }, DroppedBy::nothing},
    {"moe.shared.down.input", Part::shared_expert, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.expert_hidden; }, DroppedBy::block_recompute},

    // Model level (layer -1): token ids, the final norm, the head's input, and the logits,
    // which the loss overwrites with its gradient and keeps (compute dtype, never compact).
    {"embed.tokens", Part::model, Keeper::exact, Element::i32, [](const Dims&) { return 1.0; }, DroppedBy::nothing},
    {"final_norm.input", Part::model, Keeper::elementwise, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::nothing},
    {"final_norm.rstd", Part::model, Keeper::exact, Element::f32, [](const Dims&) { return 1.0; }, DroppedBy::nothing},
    {"head.input", Part::model, Keeper::linear_input, Element::activation, [](const Dims& s) { return s.d; }, DroppedBy::nothing},
    {"ce.grad", Part::model, Keeper::exact, Element::activation, [](const Dims& s) { return s.vocab; }, DroppedBy::nothing},
};

constexpr double kRealBytes = sizeof(real);  // low-rank factors: `real` on the CPU, f32 on a GPU (any precision)

// Bytes of a low-bit copy: per row ceil(cols · bits / 8) code bytes and a float scale
// (QuantizedMatrix::bytes_for).
double lowbit_bytes(double rows, double cols, int bits) { return rows * (std::ceil(cols * bits / 8.0) + 4.0); }

// Bytes of a low-rank keeper of (rows, cols) input rows, `copies` keepers (one per expert for
// the routed kinds) sharing the rows. sketch: P (rows, r); rsvd: U (rows, r) and B (r, cols)
// per keeper; subspace: P (rows, r) and a basis V (cols, r) per keeper, which lives from step
// to step. P in factor_bits when set (sketch, subspace).
double low_rank_bytes(const SavedTensorChoice& c, double rows, double cols, double copies) {
  const double per_copy_rows = rows / std::max(1.0, copies);
  double r = std::max(1.0, std::min<double>(c.rank, cols));
  if (c.method == SavedTensorMethod::rsvd) {
    r = std::min(r, std::max(1.0, per_copy_rows));
    return rows * r * kRealBytes + copies * r * cols * kRealBytes;
  }
  const double p = c.factor_bits > 0 ? lowbit_bytes(rows, r, c.factor_bits) : rows * r * kRealBytes;
  return p + (c.method == SavedTensorMethod::subspace ? copies * cols * r * kRealBytes : 0.0);
}

std::string describe(const SavedTensorChoice& c) {
  std::string s = saved_tensor_method_name(c.method);
  if (c.method == SavedTensorMethod::lowbit) s += " " + std::to_string(c.bits);
  if (c.is_low_rank()) {
    s += " r=" + std::to_string(c.rank);
    if (c.factor_bits > 0) s += " p" + std::to_string(c.factor_bits);
  }
  return s;
}

// Activation checkpointing (train.activation_checkpointing): a layer keeps only its input,
// (tokens, d) in the compute dtype (act bytes); backward runs the layer's forward again, which
// keeps the layer's tensors as planned (its norm input is the block input itself) while the
// layer's backward runs. Model-level tensors are kept as planned.
std::vector<PlannedSavedTensor> checkpointed(const std::vector<PlannedSavedTensor>& planned, double tokens,
                                             double d, double act) {
  std::map<int, double> again;  // layer → bytes its forward keeps when run again
  std::vector<PlannedSavedTensor> model_level;
  for (const PlannedSavedTensor& t : planned) {
    if (t.layer < 0)
      model_level.push_back(t);
    else if (t.kind != "attn_norm.input")
      again[t.layer] += t.bytes;
  }
  std::vector<PlannedSavedTensor> out;
  for (const auto& [layer, bytes] : again) {
    PlannedSavedTensor t;
    t.layer = layer;
    t.kind = "block.input";
    t.rows = tokens;
    t.cols = d;
    t.kept = "checkpoint";
    t.bytes = tokens * d * act;
    t.restored_bytes = bytes;
    t.stage = "block";
    out.push_back(t);
  }
  out.insert(out.end(), model_level.begin(), model_level.end());
  return out;
}

}  // namespace

std::vector<PlannedSavedTensor> plan_saved_activations(const ExperimentConfig& c, int64_t step) {
  const int layers = std::max(0, c.model.layers);
  const int ranks = std::max(1, c.parallel.ranks);
  Dims s;
  s.d = std::max(1, c.model.d_model);
  s.heads = std::max(1, c.model.heads);
  s.experts = std::max(0, c.model.experts);
  s.top_k = std::max(1, std::min(c.model.top_k, std::max(1, c.model.experts)));
  s.expert_hidden = std::max(1, c.model.expert_hidden);
  s.dense_hidden = std::max(1, c.model.dense_hidden);
  s.vocab = planned_vocab(c);
  const double act = compute_dtype_for(c) == DType::bf16 ? 2.0 : kRealBytes;
  // Tokens of one micro-batch on one rank; routed copies: top_k per token (dropless; a
  // capacity drops some). With expert parallelism a rank's experts get as many on average.
  const double tokens = double(std::max(1, c.train.batch)) / std::max(1, c.train.grad_accum) / ranks *
                        std::max(1, c.data.seq_len);
  const double local_experts = std::ceil(s.experts / ranks);

  const std::vector<bool> moe = planned_moe_layers(c);

  // The policy the model would build (none in exact mode: everything exact), at `step`.
  std::unique_ptr<KittenPolicy> policy;
  if (c.kittens.mode != "exact" && kitten_config_problem(c.kittens).empty()) {
    policy = std::make_unique<KittenPolicy>(c.kittens, layers, c.seed, c.train.steps);
    policy->set_step(step);
  }
  // Fixed when the model is built, warm-up or not (LanguageModel: BlockConfig::recompute).
  const bool recompute = policy && kitten_wants_recompute(c.kittens);
  // One rank: every MoE layer keeps its LocalDispatcher (core/train/rank_model.cpp installs
  // multi-rank dispatchers only over a communicator).
  const bool local_dispatch = ranks == 1;

  std::vector<PlannedSavedTensor> out;
  auto add = [&](int layer, const SavedKind& k) {
    PlannedSavedTensor t;
    t.layer = layer;
    t.kind = k.kind;
    t.stage = k.part == Part::attention ? "attention" : k.part == Part::model ? "model" : "ffn";
    t.rows = k.part == Part::routed ? tokens * s.top_k : tokens;
    t.cols = k.cols(s);
    const double element = k.element == Element::activation ? act : 4.0;
    if (recompute && (k.dropped_by == DroppedBy::block_recompute ||
                      (k.dropped_by == DroppedBy::local_recompute && local_dispatch))) {
      t.kept = "recompute";
      t.restored_bytes = t.rows * t.cols * act;
      out.push_back(t);
      return;
    }
    SavedTensorChoice choice;  // exact
    if (policy && k.keeper == Keeper::linear_input) choice = policy->choose_linear(layer, k.kind);
    if (policy && k.keeper == Keeper::elementwise) choice = policy->choose_elementwise(layer, k.kind);
    // An elementwise "recompute" choice is a model-level switch (kitten_wants_recompute,
    // handled above); the slot itself keeps such a tensor exact.
    if (choice.method == SavedTensorMethod::recompute) choice.method = SavedTensorMethod::exact;
    t.kept = describe(choice);
    if (choice.method == SavedTensorMethod::lowbit) {
      t.bytes = lowbit_bytes(t.rows, t.cols, choice.bits);
      t.restored_bytes = t.rows * t.cols * act;  // dequantized in backward
    }
    else if (choice.is_low_rank())
      t.bytes = low_rank_bytes(choice, t.rows, t.cols, k.part == Part::routed ? local_experts : 1.0);
    else
      t.bytes = t.rows * t.cols * element;
    out.push_back(t);
  };
  for (int l = 0; l < layers; ++l) {
    const bool has_experts = moe[size_t(l)];
    for (const SavedKind& k : kSavedKinds) {
      const bool here = k.part == Part::attention || k.part == Part::ffn_norm ||
                        (k.part == Part::dense_mlp && !has_experts) ||
                        ((k.part == Part::moe || k.part == Part::routed) && has_experts) ||
                        (k.part == Part::shared_expert && has_experts && c.model.shared_expert);
      if (here) add(l, k);
    }
  }
  for (const SavedKind& k : kSavedKinds)
    if (k.part == Part::model) add(-1, k);
  if (c.train.activation_checkpointing) return checkpointed(out, tokens, s.d, act);
  return out;
}

double saved_activation_bytes(const std::vector<PlannedSavedTensor>& tensors) {
  double sum = 0.0;
  for (const PlannedSavedTensor& t : tensors) sum += t.bytes;
  return sum;
}

double released_before_attention_bytes(const ExperimentConfig& c, int64_t step) {
  ExperimentConfig kept = c;
  kept.train.activation_checkpointing = false;  // the recomputed block keeps what an exact forward keeps
  const int last = std::max(0, c.model.layers) - 1;
  double released = 0.0;
  for (const PlannedSavedTensor& t : plan_saved_activations(kept, step))
    if (t.layer == last && (t.stage == "ffn" || t.kind == "attn.out.input")) released += t.bytes;
  return released;
}

double restore_workspace_bytes(const std::vector<PlannedSavedTensor>& tensors) {
  std::map<std::pair<int, std::string>, double> per_stage;
  for (const PlannedSavedTensor& t : tensors) per_stage[{t.layer, t.stage}] += t.restored_bytes;
  double most = 0.0;
  for (const auto& [stage, bytes] : per_stage) most = std::max(most, bytes);
  return most;
}

std::vector<SavedKindBytes> saved_bytes_by_kind(const std::vector<PlannedSavedTensor>& tensors) {
  std::vector<SavedKindBytes> rows;
  for (const PlannedSavedTensor& t : tensors) {
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const SavedKindBytes& r) { return r.kind == t.kind && r.kept == t.kept; });
    if (it == rows.end()) it = rows.insert(rows.end(), SavedKindBytes{t.kind, t.kept, 0, 0.0});
    ++it->layers;
    it->bytes += t.bytes;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const SavedKindBytes& a, const SavedKindBytes& b) { return a.bytes > b.bytes; });
  return rows;
}

}  // namespace mok
