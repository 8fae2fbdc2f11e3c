#pragma once
// Causal scaled-dot-product attention that keeps no (seq × seq) tensor.
//
// Forward runs an online softmax over key blocks of kAttnKeyBlock and keeps, per query, only
// the output row and the log-sum-exp of its scores. Backward recomputes each query's
// probabilities p_j = exp(s_j − lse) one row at a time (O(seq) workspace) and uses
// D = Σ_j p_j·(dO·v_j) (= dO·O), so the output need not be kept either.
//
// Layout: q, k, v rows with strides; head h of a row is columns [h·hd, (h+1)·hd).
// Query i sits at position q_pos0 + i and sees keys [0, q_pos0 + i].

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

constexpr int kAttnKeyBlock = 64;

struct AttentionHeadView {
  const real* q;  int64_t ldq;
  const real* k;  int64_t ldk;
  const real* v;  int64_t ldv;
  int nq = 0;       // query rows
  int q_pos0 = 0;   // position of query 0 (keys start at position 0)
  int hd = 0;
  real scale = 1;   // 1/sqrt(hd)
};

// o: (nq, hd) with stride ldo; lse: (nq) or null.
void attention_head_forward(const AttentionHeadView& a, real* o, int64_t ldo, real* lse);
// dq: (nq, hd) written; dk, dv: (nk, hd) accumulated (+=), nk = q_pos0 + nq.
void attention_head_backward(const AttentionHeadView& a, const real* d_o, int64_t ld_do,
                             const real* lse, real* dq, int64_t ldq, real* dk, int64_t ldk,
                             real* dv, int64_t ldv);

// Training layout. qkv: (batch·seq, 3·d) with q | k | v column blocks (d = heads·hd).
//   o: (batch·seq, d); lse: (batch, heads, seq) or null.
void causal_attention_forward(const real* qkv, int batch, int seq, int heads, int hd, real* o,
                              real* lse);
//   d_o: (batch·seq, d) → dqkv: (batch·seq, 3·d) written.
void causal_attention_backward(const real* qkv, const real* d_o, const real* lse, int batch,
                               int seq, int heads, int hd, real* dqkv);

MOK_NN_END
