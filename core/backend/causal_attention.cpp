#include "core/backend/causal_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {
// Eight interleaved partial sums (lane i takes elements i, i+8, …), added in a fixed order:
// vectorizes without reassociation and gives the same bits on every run.
inline real dot(const real* a, const real* b, int n) {
  real lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
  real s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace

void attention_head_forward(const AttentionHeadView& a, real* o, int64_t ldo, real* lse) {
  const int hd = a.hd;
  std::vector<real> scores(kAttnKeyBlock), acc(hd);
  for (int i = 0; i < a.nq; ++i) {
    const real* qi = a.q + static_cast<int64_t>(i) * a.ldq;
    const int nk = a.q_pos0 + i + 1;
    real m = -std::numeric_limits<real>::infinity(), l = 0;
    std::fill(acc.begin(), acc.end(), real(0));
    for (int j0 = 0; j0 < nk; j0 += kAttnKeyBlock) {
      const int j1 = std::min(nk, j0 + kAttnKeyBlock);
      real bm = -std::numeric_limits<real>::infinity();
      for (int j = j0; j < j1; ++j) {
        const real s = a.scale * dot(qi, a.k + static_cast<int64_t>(j) * a.ldk, hd);
        scores[j - j0] = s;
        bm = std::max(bm, s);
      }
      const real m_new = std::max(m, bm);
      const real rescale = std::exp(m - m_new);  // 0 on the first block (m = −inf)
      l *= rescale;
      for (int c = 0; c < hd; ++c) acc[c] *= rescale;
      for (int j = j0; j < j1; ++j) {
        const real p = std::exp(scores[j - j0] - m_new);
        l += p;
        const real* vj = a.v + static_cast<int64_t>(j) * a.ldv;
        for (int c = 0; c < hd; ++c) acc[c] += p * vj[c];
      }
      m = m_new;
    }
    real* oi = o + static_cast<int64_t>(i) * ldo;
    for (int c = 0; c < hd; ++c) oi[c] = acc[c] / l;
    if (lse) lse[i] = m + std::log(l);
  }
}

void attention_head_backward(const AttentionHeadView& a, const real* d_o, int64_t ld_do,
                             const real* lse, real* dq, int64_t ldq, real* dk, int64_t ldk,
                             real* dv, int64_t ldv) {
  const int hd = a.hd;
  const int nk_max = a.q_pos0 + a.nq;
  std::vector<real> p(nk_max), dp(nk_max), dqi(hd);
  for (int i = 0; i < a.nq; ++i) {
    const real* qi = a.q + static_cast<int64_t>(i) * a.ldq;
    const real* doi = d_o + static_cast<int64_t>(i) * ld_do;
    const int nk = a.q_pos0 + i + 1;
    real big_d = 0;  // D = Σ_j p_j·dp_j = dO·O
    for (int j = 0; j < nk; ++j) {
      p[j] = std::exp(a.scale * dot(qi, a.k + static_cast<int64_t>(j) * a.ldk, hd) - lse[i]);
      dp[j] = dot(doi, a.v + static_cast<int64_t>(j) * a.ldv, hd);
      big_d += p[j] * dp[j];
    }
    std::fill(dqi.begin(), dqi.end(), real(0));
    for (int j = 0; j < nk; ++j) {
      const real ds = a.scale * p[j] * (dp[j] - big_d);  // ∂/∂(q·k_j)
      const real* kj = a.k + static_cast<int64_t>(j) * a.ldk;
      real* dkj = dk + static_cast<int64_t>(j) * ldk;
      real* dvj = dv + static_cast<int64_t>(j) * ldv;
      for (int c = 0; c < hd; ++c) {
        dqi[c] += ds * kj[c];
        dkj[c] += ds * qi[c];
        dvj[c] += p[j] * doi[c];
      }
    }
    real* dqr = dq + static_cast<int64_t>(i) * ldq;
    for (int c = 0; c < hd; ++c) dqr[c] = dqi[c];
  }
}

namespace {
AttentionHeadView head_view(const real* qkv, int b, int h, int seq, int heads, int hd) {
  const int64_t d = static_cast<int64_t>(heads) * hd, ld = 3 * d;
  const real* base = qkv + static_cast<int64_t>(b) * seq * ld + static_cast<int64_t>(h) * hd;
  AttentionHeadView a;
  a.q = base; a.ldq = ld;
  a.k = base + d; a.ldk = ld;
  a.v = base + 2 * d; a.ldv = ld;
  a.nq = seq;
  a.q_pos0 = 0;
  a.hd = hd;
  a.scale = real(1) / std::sqrt(static_cast<real>(hd));
  return a;
}
}  // namespace

void causal_attention_forward(const real* qkv, int batch, int seq, int heads, int hd, real* o,
                              real* lse) {
  const int64_t d = static_cast<int64_t>(heads) * hd;
  parallel_for(static_cast<int64_t>(batch) * heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int b = static_cast<int>(t / heads), h = static_cast<int>(t % heads);
      attention_head_forward(head_view(qkv, b, h, seq, heads, hd),
                             o + static_cast<int64_t>(b) * seq * d + static_cast<int64_t>(h) * hd, d,
                             lse ? lse + t * seq : nullptr);
    }
  });
}

void causal_attention_backward(const real* qkv, const real* d_o, const real* lse, int batch,
                               int seq, int heads, int hd, real* dqkv) {
  const int64_t d = static_cast<int64_t>(heads) * hd, ld = 3 * d;
  parallel_for(static_cast<int64_t>(batch) * heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int b = static_cast<int>(t / heads), h = static_cast<int>(t % heads);
      real* base = dqkv + static_cast<int64_t>(b) * seq * ld + static_cast<int64_t>(h) * hd;
      for (int s = 0; s < seq; ++s)  // this task owns these dk, dv columns: zero, then accumulate
        for (int c = 0; c < hd; ++c) base[s * ld + d + c] = base[s * ld + 2 * d + c] = 0;
      attention_head_backward(head_view(qkv, b, h, seq, heads, hd),
                              d_o + static_cast<int64_t>(b) * seq * d + static_cast<int64_t>(h) * hd, d,
                              lse + t * seq, base, ld, base + d, ld, base + 2 * d, ld);
    }
  });
}

MOK_NN_END
