#pragma once
// The routing pieces of the MoE layer on the GPU, around the grouped expert GEMMs
// (kernels/grouped_gemm.h). CPU references: core/routing/topk_router.{h,cpp} (softmax,
// top-k, capacity, losses, backward), core/model/local_dispatcher.cpp (gather, combine) and
// core/model/swiglu_mlp.cpp (the gated expert backward).
//
// Pairs are p = t·k + s (token t, slot s). One MoE layer's forward:
//   logits (n, E) → router_softmax_topk → probs, lse, expert (n, k), gate (n, k)
//   expert → moe_sort_pairs → order (kept pairs sorted by expert), row_of_pair, counts
//   counts → host → offsets;  x → gather_rows → (m, d) expert input rows → grouped GEMMs
//   (m, d) expert output rows → combine_pairs (gated, slot order) → y (n, d)
// All kernels are asynchronous on `stream`, allocate nothing (workspaces come from the
// caller, sized by the *_workspace_bytes queries) and use no floating-point atomics: every
// sum has a fixed order, so results repeat bitwise run to run. Element type T of the row
// kernels: float or bf16 (loaded as T, computed in float, stored as T).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_types.h"

namespace mok::cuda {

constexpr int kMaxRouterExperts = 256;
constexpr int kMaxRouterTopK = 8;

// Per token: p = softmax(logits) (max-subtracted), lse = log Σ exp(logits); top-k of p by
// repeated selection (largest first, ties to the lower expert index), slots in that order;
// gate = p_chosen / Σ_slots p_chosen.   logits, probs (n, E); lse (n); expert, gate (n, k).
// E ≤ kMaxRouterExperts, 1 ≤ k ≤ min(E, kMaxRouterTopK).
// With a locality preference (core/routing/locality_policy.h): in each slot, when the best
// remaining expert is not on this rank and the best remaining local one is within `margin`
// (p_local ≥ p_best − margin, in double), the local one takes the slot.
struct RouterLocality {
  bool enabled = false;
  uint32_t local[kMaxRouterExperts / 32] = {};  // bit e: expert e lives on this rank
  double margin = 0.0;
};
void router_softmax_topk(const float* logits, int64_t n, int E, int k, float* probs, float* lse,
                         int32_t* expert, float* gate, cudaStream_t stream, const RouterLocality& locality = {});

// Stable sort of the pairs by expert (a counting sort in tiles of pairs, three launches) with
// the CPU's capacity rule: of each expert's pairs in pair order, the first `capacity` are kept
// (0 = unlimited). Expert ids outside [0, E) (e.g. −1) count as already dropped. E ≤ 1024.
//   order (P):        kept pair indices by (expert, pair index); the first Σ counts are written
//   row_of_pair (P):  position of each pair in `order`, −1 when dropped
//   load (E):         pairs per expert before capacity; counts (E): kept pairs per expert
//   offsets (E + 1):  when given, the experts' first rows in `order` and then Σ counts (the
//                     segments of the grouped products, left on the device)
// P < 2^31.
size_t moe_sort_pairs_workspace_bytes(int64_t pairs, int E);
void moe_sort_pairs(const int32_t* expert, int64_t pairs, int E, int64_t capacity, int32_t* order,
                    int32_t* row_of_pair, int64_t* load, int64_t* counts, void* ws, size_t ws_bytes,
                    cudaStream_t stream, int64_t* offsets = nullptr);

// f (E) = load_e / pairs in double, rounded to float (0 when pairs = 0): the routed fractions
// the router losses take.
void routed_fractions(const int64_t* load, int E, double pairs, float* f, cudaStream_t stream);

// out (m, d): out[i] = src[order[i] / k], the token row of pair order[i]; src (n, d). With s
// (m floats) and scaled (m, d): also scaled[i] = s[i]·out[i], the bits of scale_rows(out) (the
// experts' gated gradient, written from the same read).
template <typename T>
void gather_rows(const T* src, const int32_t* order, int k, int64_t m, int64_t d, T* out, cudaStream_t stream,
                 const float* s = nullptr, T* scaled = nullptr);

// out (n, d) written: out[t] = Σ_{s = 0..k−1, row_of_pair[t·k+s] ≥ 0} gate[t·k+s] · rows[row_of_pair[t·k+s]]
// in slot order with float accumulation; rows (m, d) in `order` order; gate null = 1. With add
// (n, d): out[t] = that sum + add[t], rounded once (in fp32 the bits of the sum, then add_).
template <typename T>
void combine_pairs(const T* rows, const int32_t* row_of_pair, const float* gate, int64_t n, int k, int64_t d,
                   T* out, cudaStream_t stream, const T* add = nullptr);

// per_row (m) = per_pair[order[i]]: gates into sorted-row order.
void pair_values_to_rows(const float* per_pair, const int32_t* order, int64_t m, float* per_row,
                         cudaStream_t stream);
// per_pair (pairs) written: per_row[i] at order[i], 0 for pairs not in order (dropped).
void rows_to_pair_values(const float* per_row, const int32_t* order, int64_t m, int64_t pairs, float* per_pair,
                         cudaStream_t stream);

// The gated expert backward (SwiGluMlp::backward_gated): dgate = (dy·Wdownᵀ)·h row by row,
// then the gate scales dh and dy.   row_dot: out (m) = Σ_j a[i,j]·b[i,j], a, b (m, f).
template <typename T>
void row_dot(const T* a, const T* b, int64_t m, int64_t f, float* out, cudaStream_t stream);
// out (m, d) = s[i]·x[i, :]; out may be x.
template <typename T>
void scale_rows(const T* x, const float* s, int64_t m, int64_t d, T* out, cudaStream_t stream);

// The three sums of the router losses (mok::RouterLossSums), in double, in a fixed order; the
// caller applies the coefficients as topk_router.cpp does (aux = aux_coef·E·out[0],
// z = z_coef·out[1]/n, locality = locality_coef·out[2]/n):
//   out[0] = Σ_e f_e · Σ_t p_te / n (0 for n = 0),  out[1] = Σ_t lse_t²,
//   out[2] = Σ_t Σ_{e: remote[e]} p_te
// probs (n, E), lse (n), f (E) routed fraction, remote (E) 1 = expert on another rank or
// null (out[2] = 0); out: 3 device doubles. E ≤ kMaxRouterExperts.
size_t router_losses_workspace_bytes(int64_t n, int E);
void router_losses(const float* probs, const float* lse, const float* f, const uint8_t* remote, int64_t n, int E,
                   double* out, void* ws, size_t ws_bytes, cudaStream_t stream);

// dlogits (n, E) written, TopKRouter::backward's formulas per token:
//   dp_e = aux_w·f_e + loc_w·remote[e];  S = Σ_q p_{c_q};  dot = Σ_q dgate_q·p_{c_q}/S
//   dp_{c_q} += (dgate_q − dot)/S;  dlogit_e = p_e·(dp_e − Σ p·dp) + z_w·lse·p_e
// choice (n, k): the chosen experts before capacity; dgate (n·k); remote null = no
// locality term. aux_w = aux_coef·E/n·scale, z_w = 2·z_coef/n·scale, loc_w = locality_coef/n·scale.
void router_backward(const float* probs, const float* lse, const int32_t* choice, const float* dgate,
                     const float* f, const uint8_t* remote, int64_t n, int E, int k, float aux_w, float z_w,
                     float loc_w, float* dlogits, cudaStream_t stream);

}  // namespace mok::cuda
