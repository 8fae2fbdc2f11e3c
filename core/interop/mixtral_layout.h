#pragma once
// The tensor layout of Transformers' MixtralForCausalLM, and how mok's parameters map onto
// it (docs/interop.md). With d = d_model, H heads of hd = d/H, E experts of width f, V ids:
//
//   mok parameter                    Mixtral tensor (nn.Linear: (out, in))
//   embed (V, d)                     model.embed_tokens.weight (V, d)               as is
//   layers.L.attn_norm (d)           model.layers.L.input_layernorm.weight
//   layers.L.attn.wqkv (d, 3d)       …self_attn.{q,k,v}_proj.weight (d, d)          column blocks
//                                    [q | k | v] of Wqkv, each transposed; heads stay in order
//   layers.L.attn.wo (d, d)          …self_attn.o_proj.weight (d, d)                transposed
//   layers.L.ffn_norm (d)            model.layers.L.post_attention_layernorm.weight
//   layers.L.moe.w_router (d, E)     …block_sparse_moe.gate.weight (E, d)           transposed
//   layers.L.moe.experts.e.w_up      …block_sparse_moe.experts.e.w1.weight (f, d)   gate half [0, f)
//     (d, 2f) = [gate | up]          …block_sparse_moe.experts.e.w3.weight (f, d)   up half [f, 2f)
//   layers.L.moe.experts.e.w_down    …block_sparse_moe.experts.e.w2.weight (d, f)   transposed
//   final_norm (d)                   model.norm.weight
//   head (d, V), untied only         lm_head.weight (V, d)                          transposed
//
// Both models rotate the same pairs (i, i + hd/2) of each head by pos·θ^(−2i/hd) (mok's RoPE
// is Transformers' rotate_half form), so q and k rows need no permutation.
//
// Transformers 5 keeps a layer's experts fused (…mlp.experts.gate_up_proj (E, 2f, d) = the
// w1 rows then the w3 rows, …mlp.experts.down_proj (E, d, f), …mlp.gate.weight) and still
// loads the per-expert names above; the reader accepts both.

#include <cstdint>
#include <string>
#include <vector>

#include "core/interop/hf_tensor.h"
#include "core/model/parameter.h"

namespace mok {

struct MixtralShape {
  int64_t vocab = 0;
  int64_t d_model = 0;
  int heads = 0;
  int kv_heads = 0;  // key/value heads in the Mixtral tensors (≤ heads); mok has heads of each
  int layers = 0;
  int experts = 0;
  int64_t expert_hidden = 0;
  bool tied_embeddings = true;
};

// Mok's parameters (the float build's, by name) as Mixtral tensors. Every parameter must be
// one the layout above names (std::invalid_argument otherwise: e.g. a dense MLP or a shared
// expert, which Mixtral has no place for). kv_heads must equal heads.
HfTensorMap mixtral_tensors_from_parameters(const std::vector<Parameter*>& params, const MixtralShape& shape);

// The other way: fills every parameter from the Mixtral tensors. Key/value projections of
// kv_heads < heads (grouped-query attention) are repeated to one head per query head, as
// Transformers' repeat_kv does (query head h reads kv head h / (heads / kv_heads)), which
// computes the same attention. Fused Transformers 5 expert tensors are split first.
// Throws std::invalid_argument naming a missing tensor, a wrong shape, or a tensor left over.
void parameters_from_mixtral_tensors(HfTensorMap tensors, const MixtralShape& shape,
                                     const std::vector<Parameter*>& params);

// Splits Transformers 5's fused expert tensors (…mlp.experts.gate_up_proj,
// …mlp.experts.down_proj, …mlp.gate.weight) into the per-expert names; other tensors pass.
HfTensorMap unfuse_mixtral_experts(HfTensorMap tensors, const MixtralShape& shape);

}  // namespace mok
