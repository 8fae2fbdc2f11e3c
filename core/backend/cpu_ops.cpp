#include "core/backend/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/backend/causal_attention.h"
#include "core/backend/gemm.h"
#include "core/backend/qr.h"
#include "core/backend/rms_norm_kernel.h"
#include "core/backend/rope.h"
#include "core/backend/row_quantize.h"
#include "core/backend/swiglu_kernel.h"
#include "core/kittens/gaussian_sketch.h"
#include "core/model/parameter.h"
#include "core/parallel/expert_chunk.h"
#include "core/routing/locality_policy.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {

constexpr int64_t kElementGrain = 4096;   // elements per task of elementwise loops
constexpr int64_t kOptimizerGrain = 1 << 14;

void check_same(const Tensor& a, const Tensor& b, const char* op) {
  if (a.numel() != b.numel())
    throw std::invalid_argument(std::string(op) + ": " + a.shape_string() + " and " + b.shape_string() +
                                " differ in size");
}

}  // namespace

std::string CpuOps::name() const { return "cpu"; }

// --- matrix products

void CpuOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                  int64_t lda, const Tensor& b, int64_t ldb, double beta, Tensor& c, int64_t ldc) {
  mok::gemm(trans_a, trans_b, m, n, k, static_cast<real>(alpha), a.data(), lda, b.data(), ldb,
            static_cast<real>(beta), c.data(), ldc);
}

void CpuOps::grouped_gemm(bool trans_b, const RowSegments& segments, const Tensor& a, const Tensor& b, double beta,
                          Tensor& c) {
  const std::vector<int64_t>& offsets = segments.host();
  const int64_t k = a.dim(1), n = c.dim(1);
  const int groups = segments.groups();
  if (b.numel() != static_cast<int64_t>(groups) * k * n)
    throw std::invalid_argument("grouped_gemm: stacked B " + b.shape_string() + " is not " + std::to_string(groups) +
                                " blocks of " + std::to_string(k) + "×" + std::to_string(n));
  for (int g = 0; g < groups; ++g) {
    const int64_t r0 = offsets[g], rows = offsets[g + 1] - r0;
    if (rows == 0) continue;
    mok::gemm(false, trans_b, rows, n, k, real(1), a.data() + r0 * k, k, b.data() + g * k * n, trans_b ? k : n,
              static_cast<real>(beta), c.data() + r0 * n, n);
  }
}

void CpuOps::grouped_weight_grad(const RowSegments& segments, const Tensor& a, const Tensor& dy, Tensor& dw) {
  const std::vector<int64_t>& offsets = segments.host();
  const int64_t k = a.dim(1), n = dy.dim(1);
  const int groups = segments.groups();
  for (int g = 0; g < groups; ++g) {
    const int64_t r0 = offsets[g], rows = offsets[g + 1] - r0;
    if (rows == 0) continue;
    mok::gemm(true, false, k, n, rows, real(1), a.data() + r0 * k, k, dy.data() + r0 * n, n, real(1),
              dw.data() + g * k * n, n);
  }
}

// --- elementwise

void CpuOps::add_(Tensor& y, const Tensor& x) {
  check_same(y, x, "add_");
  real* yp = y.data();
  const real* xp = x.data();
  parallel_for(y.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) yp[i] += xp[i];
  });
}

void CpuOps::add2_(Tensor& y, const Tensor& a, const Tensor& b) {
  check_same(y, a, "add2_");
  check_same(y, b, "add2_");
  real* yp = y.data();
  const real* ap = a.data();
  const real* bp = b.data();
  parallel_for(y.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) yp[i] += ap[i] + bp[i];
  });
}

void CpuOps::scale(const Tensor& x, double f, Tensor& out) {
  check_same(out, x, "scale");
  const real s = static_cast<real>(f);
  const real* xp = x.data();
  real* op = out.data();
  parallel_for(x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) op[i] = xp[i] * s;
  });
}

void CpuOps::add_transposed_(Tensor& y, const Tensor& x) {
  const int64_t rows = y.dim(0), cols = y.dim(1);
  if (x.numel() != rows * cols) throw std::invalid_argument("add_transposed_: sizes differ");
  real* g = y.data();
  const real* src = x.data();
  parallel_for(rows, 16, [&](int64_t v0, int64_t v1) {
    for (int64_t v = v0; v < v1; ++v)
      for (int64_t j = 0; j < cols; ++j) g[v * cols + j] += src[j * rows + v];
  });
}

void CpuOps::convert(const Tensor& src, Tensor& dst) {
  check_same(dst, src, "convert");
  if (src.dtype() != dst.dtype())
    throw std::invalid_argument(std::string("convert: the CPU keeps one element type; asked ") +
                                dtype_name(src.dtype()) + " → " + dtype_name(dst.dtype()));
  if (src.numel()) std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(src.bytes()));
}

// --- layers' kernels

void CpuOps::rms_norm_forward(const Tensor& x, const Tensor& g, double eps, Tensor& y, Tensor* rstd) {
  const int64_t d = g.numel(), n = x.numel() / d;
  mok::rms_norm_forward(x.data(), g.data(), static_cast<real>(eps), n, d, y.data(), rstd ? rstd->data() : nullptr);
}

void CpuOps::rms_norm_apply(const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& y) {
  const int64_t d = g.numel(), n = x.numel() / d;
  mok::rms_norm_apply(x.data(), g.data(), rstd.data(), n, d, y.data());
}

void CpuOps::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& dx,
                               Tensor& dg) {
  const int64_t d = g.numel(), n = x.numel() / d;
  mok::rms_norm_backward(dy.data(), x.data(), g.data(), rstd.data(), n, d, dx.data(), dg.data());
}

void CpuOps::rope_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const RopeTable& table,
                   bool inverse) {
  rope_apply(x.data(), rows, ld, heads, seq, pos0, table, inverse);
}

void CpuOps::attention_cached(const Tensor& qkv, int n, const std::vector<Tensor*>& k_cache,
                              const std::vector<Tensor*>& v_cache, const std::vector<int>& pos0, int heads, int hd,
                              Tensor& o) {
  const int64_t batch = static_cast<int64_t>(k_cache.size()), d = static_cast<int64_t>(heads) * hd;
  for (int64_t b = 0; b < batch; ++b) {
    const real* rows = qkv.data() + b * n * 3 * d;
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(k_cache[b]->data() + (pos0[b] + r) * d, rows + r * 3 * d + d, d * sizeof(real));
      std::memcpy(v_cache[b]->data() + (pos0[b] + r) * d, rows + r * 3 * d + 2 * d, d * sizeof(real));
    }
  }
  // One task per (sequence, head): each writes its own columns of its own rows.
  parallel_for(batch * heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / heads, h = t % heads;
      AttentionHeadView a;
      a.q = qkv.data() + b * n * 3 * d + h * hd; a.ldq = 3 * d;
      a.k = k_cache[b]->data() + h * hd; a.ldk = d;
      a.v = v_cache[b]->data() + h * hd; a.ldv = d;
      a.nq = n;
      a.q_pos0 = pos0[b];
      a.hd = hd;
      a.scale = real(1) / std::sqrt(static_cast<real>(hd));
      attention_head_forward(a, o.data() + b * n * d + h * hd, d, nullptr);
    }
  });
}

void CpuOps::attention_forward(const Tensor& qkv, int batch, int seq, int heads, int hd, Tensor& o, Tensor* lse) {
  causal_attention_forward(qkv.data(), batch, seq, heads, hd, o.data(), lse ? lse->data() : nullptr);
}

void CpuOps::attention_backward(const Tensor& qkv, const Tensor& d_o, const Tensor& lse, const Tensor*, int batch,
                                int seq, int heads, int hd, Tensor& dqkv) {  // the CPU kernel needs no o
  causal_attention_backward(qkv.data(), d_o.data(), lse.data(), batch, seq, heads, hd, dqkv.data());
}

void CpuOps::swiglu_forward(const Tensor& a, Tensor& h) {
  const int64_t n = a.dim(0), f = a.dim(1) / 2;
  mok::swiglu_forward(a.data(), n, f, h.data());
}

void CpuOps::swiglu_backward(const Tensor& a, const Tensor& dh, Tensor& da) {
  const int64_t n = a.dim(0), f = a.dim(1) / 2;
  mok::swiglu_backward(a.data(), dh.data(), n, f, da.data());
}

CrossEntropySum CpuOps::cross_entropy(Tensor& logits, const int32_t* targets, bool write_grad) {
  return cross_entropy_forward(logits.data(), targets, logits.dim(0), logits.dim(1), write_grad);
}

void CpuOps::embedding_forward(const Tensor& w, const Tensor& tokens, Tensor& x) {
  const int64_t d = w.dim(1), n = tokens.numel();
  const int32_t* tok = tokens.data_as<int32_t>();
  const real* wp = w.data();
  real* xp = x.data();
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) std::memcpy(xp + t * d, wp + tok[t] * d, d * sizeof(real));
  });
}

void CpuOps::embedding_backward(const Tensor& dx, const Tensor& tokens, Tensor& dw) {
  const int64_t d = dw.dim(1), n = tokens.numel();
  const int32_t* tok = tokens.data_as<int32_t>();
  const real* src0 = dx.data();
  real* g = dw.data();
  // Column chunks: each task owns columns [c0, c1) of every row, tokens in order.
  parallel_for(d, 16, [&](int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < n; ++t) {
      const real* src = src0 + t * d;
      real* dst = g + tok[t] * d;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

// --- routing and dispatch

void CpuOps::router_softmax_topk(const Tensor& logits, int k, const LocalityPolicy* locality, Tensor& probs,
                                 Tensor& lse, Tensor& expert, Tensor& gate) {
  const int64_t n = logits.dim(0);
  const int E = static_cast<int>(logits.dim(1));
  const real* lg = logits.data();
  real* pp = probs.data();
  real* lp = lse.data();
  int32_t* ex = expert.data_as<int32_t>();
  real* gt = gate.data();
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const real* l = lg + t * E;
      real* p = pp + t * E;
      real m = l[0];
      for (int e = 1; e < E; ++e) m = std::max(m, l[e]);
      real s = 0;
      for (int e = 0; e < E; ++e) s += (p[e] = std::exp(l[e] - m));
      for (int e = 0; e < E; ++e) p[e] /= s;
      lp[t] = m + std::log(s);
      // top-k by repeated selection: largest p, ties to the lower index (MoK: with the
      // locality preference when set, core/routing/locality_policy.h)
      int32_t* ch = ex + t * k;
      real* g = gt + t * k;
      select_top_k(p, E, k, locality, ch);
      real chosen_sum = 0;
      for (int slot = 0; slot < k; ++slot) chosen_sum += p[ch[slot]];
      for (int slot = 0; slot < k; ++slot) g[slot] = p[ch[slot]] / chosen_sum;
    }
  });
}

PairOrder CpuOps::sort_pairs(Tensor& expert, int experts, int64_t capacity, bool /*all_routed*/) {
  const int64_t pairs = expert.numel();
  int32_t* ex = expert.data_as<int32_t>();
  PairOrder out;
  out.load = Tensor::zeros({experts}, DType::i64, cpu_allocator());
  int64_t* load = out.load.data_as<int64_t>();
  for (int64_t i = 0; i < pairs; ++i)
    if (ex[i] >= 0) load[ex[i]]++;  // (a pair given as −1 is not routed at all)
  // Capacity (sequential: pair order decides who is dropped).
  std::vector<int64_t> kept(experts, 0);
  for (int64_t i = 0; i < pairs; ++i) {
    int32_t& e = ex[i];
    if (e < 0) continue;
    if (capacity > 0 && kept[e] >= capacity) {
      e = -1;
      out.dropped++;
    } else {
      kept[e]++;
    }
  }
  std::vector<int64_t> offsets(experts + 1, 0);
  for (int e = 0; e < experts; ++e) offsets[e + 1] = offsets[e] + kept[e];
  out.order = Tensor::empty({offsets[experts]}, DType::i32, cpu_allocator());
  out.row_of_pair = Tensor::empty({pairs}, DType::i32, cpu_allocator());
  int32_t* order = out.order.data_as<int32_t>();
  int32_t* row_of = out.row_of_pair.data_as<int32_t>();
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  out.segments = RowSegments(std::move(offsets));
  for (int64_t p = 0; p < pairs; ++p) {
    if (ex[p] < 0) {
      row_of[p] = -1;
      continue;
    }
    const int64_t row = next[ex[p]]++;
    order[row] = static_cast<int32_t>(p);
    row_of[p] = static_cast<int32_t>(row);
  }
  return out;
}

namespace {

// f_e = load_e / pairs (router_loss_sums), in double.
std::vector<double> routed_fractions(const Tensor& load, double pairs) {
  const int64_t* l = load.data_as<int64_t>();
  std::vector<double> f(static_cast<size_t>(load.numel()), 0.0);
  for (size_t e = 0; e < f.size(); ++e) f[e] = pairs > 0 ? static_cast<double>(l[e]) / pairs : 0.0;
  return f;
}

}  // namespace

void CpuOps::router_loss_sums(const Tensor& probs, const Tensor& lse, const Tensor& load, double pairs,
                              const std::vector<uint8_t>* local, Tensor& sums) {
  const int64_t n = probs.dim(0);
  const int E = static_cast<int>(probs.dim(1));
  const std::vector<double> f = routed_fractions(load, pairs);
  const real* p = probs.data();
  const real* l = lse.data();
  RouterLossSums s;
  std::vector<double> pmean(E, 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int e = 0; e < E; ++e) pmean[e] += p[t * E + e];
  for (int e = 0; e < E; ++e) s.aux += f[e] * pmean[e] / static_cast<double>(n);
  for (int64_t t = 0; t < n; ++t) s.z_sum += static_cast<double>(l[t]) * l[t];
  if (local) {
    for (int64_t t = 0; t < n; ++t)
      for (int e = 0; e < E; ++e)
        if (!(*local)[e]) s.remote_sum += p[t * E + e];
  }
  double* out = sums.data_as<double>();
  out[0] = s.aux;
  out[1] = s.z_sum;
  out[2] = s.remote_sum;
}

void CpuOps::router_backward(const Tensor& probs, const Tensor& lse, const Tensor& choice, const Tensor& dgate,
                             const Tensor& load, double pairs, const std::vector<uint8_t>* local, double aux_w_d,
                             double z_w_d, double loc_w_d, Tensor& dlogits) {
  const std::vector<double> f = routed_fractions(load, pairs);
  const int64_t n = probs.dim(0);
  const int E = static_cast<int>(probs.dim(1));
  const int k = static_cast<int>(choice.numel() / std::max<int64_t>(n, 1));
  const real aux_w = static_cast<real>(aux_w_d), z_w = static_cast<real>(z_w_d), loc_w = static_cast<real>(loc_w_d);
  const real* pp = probs.data();
  const real* lp = lse.data();
  const int32_t* ch_all = choice.data_as<int32_t>();
  const real* dg_all = dgate.data();
  real* dl_all = dlogits.data();
  parallel_for(n, 64, [&](int64_t t0, int64_t t1) {
    std::vector<real> dp(E);
    for (int64_t t = t0; t < t1; ++t) {
      const real* p = pp + t * E;
      const int32_t* ch = ch_all + t * k;
      const real* dg = dg_all + t * k;
      // aux: dL/dp_e = aux_coef·E·f_e/n
      for (int e = 0; e < E; ++e) dp[e] = aux_w * static_cast<real>(f[e]);
      // locality: dL/dp_e = locality_coef/n for experts on other ranks
      if (local)
        for (int e = 0; e < E; ++e)
          if (!(*local)[e]) dp[e] += loc_w;
      // gates g_s = p_{c_s}/S: dp_{c_s} += (dg_s − Σ_q dg_q·g_q)/S
      real s = 0, dot = 0;
      for (int q = 0; q < k; ++q) s += p[ch[q]];
      for (int q = 0; q < k; ++q) dot += dg[q] * p[ch[q]] / s;
      for (int q = 0; q < k; ++q) dp[ch[q]] += (dg[q] - dot) / s;
      // softmax: dl_e = p_e·(dp_e − Σ p·dp); z: dl_e += 2·z_coef·lse·p_e/n
      real pdp = 0;
      for (int e = 0; e < E; ++e) pdp += p[e] * dp[e];
      real* dl = dl_all + t * E;
      for (int e = 0; e < E; ++e) dl[e] = p[e] * (dp[e] - pdp) + z_w * lp[t] * p[e];
    }
  });
}

void CpuOps::gather_rows(const Tensor& src, const Tensor& order, int k, Tensor& out) {
  if (src.dtype() != out.dtype())
    throw std::invalid_argument("gather_rows: " + src.describe() + " into " + out.describe());
  const int64_t m = order.numel();
  const size_t row = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());  // bytes: any dtype
  const int32_t* ord = order.data_as<int32_t>();
  const auto* sp = static_cast<const uint8_t*>(src.raw());
  auto* op = static_cast<uint8_t*>(out.raw());
  parallel_for(m, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::memcpy(op + i * row, sp + (ord[i] / k) * row, row);
  });
}

void CpuOps::combine_pairs(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n, int k,
                           Tensor& out) {
  const int64_t d = out.dim(1);
  const int32_t* row_of = row_of_pair.data_as<int32_t>();
  const real* scale = gate ? gate->data() : nullptr;
  const real* rp = rows.empty() ? nullptr : rows.data();
  real* dst = out.data();
  parallel_for(n, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      real* y = dst + t * d;
      for (int64_t j = 0; j < d; ++j) y[j] = 0;
      for (int s = 0; s < k; ++s) {
        const int64_t p = t * k + s;
        if (row_of[p] < 0) continue;
        const real g = scale ? scale[p] : real(1);
        const real* src = rp + static_cast<int64_t>(row_of[p]) * d;
        for (int64_t j = 0; j < d; ++j) y[j] += g * src[j];
      }
    }
  });
}

void CpuOps::pairs_to_rows(const Tensor& per_pair, const Tensor& order, Tensor& per_row) {
  const int32_t* ord = order.data_as<int32_t>();
  const real* src = per_pair.data();
  real* dst = per_row.data();
  for (int64_t i = 0; i < order.numel(); ++i) dst[i] = src[ord[i]];
}

void CpuOps::rows_to_pairs(const Tensor& per_row, const Tensor& order, Tensor& per_pair) {
  const int32_t* ord = order.data_as<int32_t>();
  const real* src = per_row.data();
  real* dst = per_pair.data();
  std::fill(dst, dst + per_pair.numel(), real(0));
  for (int64_t i = 0; i < order.numel(); ++i)
    if (ord[i] >= 0) dst[ord[i]] = src[i];
}

void CpuOps::scatter_positions(const Tensor& index, int32_t base, Tensor& out) {
  const int32_t* idx = index.data_as<int32_t>();
  int32_t* dst = out.data_as<int32_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    if (idx[i] >= 0) dst[idx[i]] = base + static_cast<int32_t>(i);
}

void CpuOps::slot_share_counts(const Tensor& expert, const Tensor& owner, int k, Tensor& counts) {
  const int32_t* ex = expert.data_as<int32_t>();
  const int32_t* own = owner.data_as<int32_t>();
  int32_t* cnt = counts.data_as<int32_t>();
  std::fill(cnt, cnt + counts.numel(), 0);
  const int64_t n = expert.numel() / k;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* e = ex + t * k;
    for (int s = 0; s < k; ++s) {
      if (e[s] < 0) continue;
      int m = 0;
      for (int j = 0; j < k; ++j) m += e[j] >= 0 && own[e[j]] == own[e[s]];
      cnt[static_cast<int64_t>(e[s]) * k + m - 1]++;
    }
  }
}

void CpuOps::shadow_decisions(const Tensor& counts, const Tensor& owner, int self, int k, const ShadowRule& rule,
                              Tensor& rows, Tensor& dest) {
  const int32_t* c = counts.data_as<int32_t>();
  const int32_t* own = owner.data_as<int32_t>();
  double* r = rows.data_as<double>();
  int32_t* to = dest.data_as<int32_t>();
  for (int64_t e = 0; e < owner.numel(); ++e) {
    double u = 0.0;
    if (own[e] != self)
      for (int m = 1; m <= k; ++m) u += static_cast<double>(c[e * k + m - 1]) / m;
    r[e] = u;
    to[e] = own[e] != self && shadow_wins(rule, u) ? -1 : own[e];
  }
}

ShipRows CpuOps::ship_rows(const Tensor& expert, const Tensor& gate, const Tensor& dest, const Tensor& local_index,
                           int k, int ranks, bool every_row, const ShipChunks* chunks) {
  check_ship_chunks(chunks, ranks, every_row, "ship_rows");
  const int32_t* ex = expert.data_as<int32_t>();
  const int32_t* to = dest.data_as<int32_t>();
  const int32_t* local = local_index.data_as<int32_t>();
  const real* g = gate.data();
  const int64_t n = expert.numel() / k;
  auto dest_of = [&](int32_t e) { return e >= 0 ? to[e] : -1; };
  ShipRows out;
  out.rows.assign(static_cast<size_t>(ranks), every_row ? n : 0);
  if (!every_row)
    for (int64_t t = 0; t < n; ++t)
      for (int q = 0; q < ranks; ++q)
        for (int s = 0; s < k; ++s)
          if (dest_of(ex[t * k + s]) == q) {
            out.rows[q]++;
            break;
          }
  int64_t total = 0;
  for (int64_t r : out.rows) total += r;
  Allocator& mem = cpu_allocator();
  out.token = Tensor::empty({total}, DType::i32, mem);
  out.head_pair = Tensor::empty({total}, DType::i32, mem);
  out.entry = Tensor::empty({total, k}, DType::i32, mem);
  out.gate = Tensor::empty({total, k}, kRealDType, mem);
  out.pair = Tensor::empty({total, k}, DType::i32, mem);
  int64_t row = 0;
  for (int q = 0; q < ranks; ++q)
    for (int64_t t = 0; t < n; ++t) {
      bool any = false;
      for (int s = 0; s < k && !any; ++s) any = dest_of(ex[t * k + s]) == q;
      if (!any && !every_row) continue;
      int j = 0;
      out.token.data_as<int32_t>()[row] = static_cast<int32_t>(t);
      out.head_pair.data_as<int32_t>()[row] = -1;
      for (int s = 0; s < k; ++s) {
        const int32_t e = ex[t * k + s];
        if (dest_of(e) != q) continue;
        if (j == 0) out.head_pair.data_as<int32_t>()[row] = static_cast<int32_t>(t * k + s);
        out.entry.data_as<int32_t>()[row * k + j] = local[e];
        out.gate.data()[row * k + j] = g[t * k + s];
        out.pair.data_as<int32_t>()[row * k + j] = static_cast<int32_t>(t * k + s);
        ++j;
      }
      for (; j < k; ++j) {
        out.entry.data_as<int32_t>()[row * k + j] = -1;
        out.gate.data()[row * k + j] = real(0);
        out.pair.data_as<int32_t>()[row * k + j] = -1;
      }
      ++row;
    }
  if (chunks) {
    Tensor lo = Tensor::empty({total}, DType::i32, mem), hi = Tensor::empty({total}, DType::i32, mem);
    row_chunk_keys(out.entry, out.rows, *chunks, lo, hi);
    const size_t cells = static_cast<size_t>(chunks->chunks) * static_cast<size_t>(ranks);
    out.chunk_lo.assign(cells, 0);
    out.chunk_hi.assign(cells, 0);
    for (int64_t i = 0; i < total; ++i) {
      out.chunk_lo[static_cast<size_t>(lo.data_as<int32_t>()[i])]++;
      out.chunk_hi[static_cast<size_t>(hi.data_as<int32_t>()[i])]++;
    }
  }
  return out;
}

void CpuOps::row_chunk_keys(const Tensor& entry, const std::vector<int64_t>& rows_per_rank, const ShipChunks& chunks,
                            Tensor& key_lo, Tensor& key_hi) {
  const int R = static_cast<int>(rows_per_rank.size());
  check_ship_chunks(&chunks, R, false, "row_chunk_keys");
  const int64_t rows = entry.rank() > 0 ? entry.dim(0) : 0, k = rows > 0 ? entry.numel() / rows : 0;
  const int32_t* en = entry.data_as<int32_t>();
  int64_t row = 0;
  for (int q = 0; q < R; ++q) {
    for (int64_t i = 0; i < rows_per_rank[static_cast<size_t>(q)]; ++i, ++row) {
      if (row >= rows) throw std::invalid_argument("row_chunk_keys: more rows per rank than entries");
      int lo = INT32_MAX, hi = -1;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t l = en[row * k + j];
        if (l < 0) continue;
        lo = std::min(lo, static_cast<int>(l));
        hi = std::max(hi, static_cast<int>(l));
      }
      const int L = chunks.locals[static_cast<size_t>(q)];
      if (hi < 0) throw std::invalid_argument("row_chunk_keys: a row without entries");
      if (hi >= L)
        throw std::invalid_argument("row_chunk_keys: local expert " + std::to_string(hi) + " of a rank with " +
                                    std::to_string(L));
      key_lo.data_as<int32_t>()[row] = expert_chunk(lo, L, chunks.chunks) * R + q;
      key_hi.data_as<int32_t>()[row] = expert_chunk(hi, L, chunks.chunks) * R + q;
    }
  }
  if (row != rows) throw std::invalid_argument("row_chunk_keys: fewer rows per rank than entries");
}

void CpuOps::replace_negative(Tensor& entry, int32_t pad) {
  int32_t* e = entry.data_as<int32_t>();
  for (int64_t i = 0; i < entry.numel(); ++i)
    if (e[i] < 0) e[i] = pad;
}

void CpuOps::unroute_group(const Tensor& entry, int32_t group, Tensor& row_of_pair) {
  if (row_of_pair.numel() != entry.numel())
    throw std::invalid_argument("unroute_group: " + std::to_string(row_of_pair.numel()) + " rows for " +
                                std::to_string(entry.numel()) + " entries");
  const int32_t* e = entry.data_as<int32_t>();
  int32_t* row = row_of_pair.data_as<int32_t>();
  for (int64_t i = 0; i < entry.numel(); ++i)
    if (e[i] == group) row[i] = -1;
}

void CpuOps::row_dot(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t m = a.dim(0), f = a.dim(1);
  const real* ap = a.data();
  const real* bp = b.data();
  real* op = out.data();
  parallel_for(m, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* ar = ap + r * f;
      const real* br = bp + r * f;
      real s = 0;
      for (int64_t j = 0; j < f; ++j) s += ar[j] * br[j];
      op[r] = s;
    }
  });
}

void CpuOps::scale_rows(const Tensor& x, const Tensor& s, Tensor& out) {
  const int64_t m = x.dim(0), d = x.dim(1);
  const real* xp = x.data();
  const real* sp = s.data();
  real* op = out.data();
  parallel_for(m, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < d; ++j) op[r * d + j] = xp[r * d + j] * sp[r];
  });
}

// --- low-bit copies

void CpuOps::quantize_rows(const Tensor& x, const QuantizeOptions& options, Tensor& codes, Tensor& scales,
                           Tensor* error_terms) {
  const int64_t cols = x.dim(-1), rows = cols ? x.numel() / cols : 0;
  const double err = quantize_rows_cpu(x.data(), rows, cols, options, codes.ptr<uint8_t>(), scales.ptr<float>());
  if (error_terms) {
    double xx = 0.0;  // in element order, as one thread
    const real* xp = x.data();
    for (int64_t i = 0; i < x.numel(); ++i) xx += static_cast<double>(xp[i]) * static_cast<double>(xp[i]);
    error_terms->ptr<double>()[0] = err;
    error_terms->ptr<double>()[1] = xx;
  }
}

void CpuOps::dequantize_rows(const Tensor& codes, const Tensor& scales, int bits, Tensor& out) {
  const int64_t cols = out.dim(-1), rows = cols ? out.numel() / cols : 0;
  dequantize_rows_cpu(codes.ptr<uint8_t>(), scales.ptr<float>(), rows, cols, bits, out.data());
}

// --- low-rank copies

void CpuOps::gaussian_fill(Tensor& out, double variance, uint64_t seed, uint64_t stream) {
  const int64_t cols = out.dim(-1), rows = cols ? out.numel() / cols : 0;
  fill_gaussian(out.data(), rows, cols, variance, seed, stream);
}

void CpuOps::orthonormalize_columns(Tensor& y) {
  mok::orthonormalize_columns(y.data(), y.dim(0), y.numel() / std::max<int64_t>(1, y.dim(0)));
}

namespace {
double sum_of_squares(const real* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}
}  // namespace

void CpuOps::projection_error_terms(const Tensor& x, const Tensor& kept, const Tensor* extra, Tensor& terms) {
  const double xx = sum_of_squares(x.data(), x.numel());
  const double kk = sum_of_squares(kept.data(), kept.numel());
  const double add = extra ? extra->ptr<double>()[0] : 0.0;
  double* t = terms.ptr<double>();
  t[0] = std::max(0.0, xx - kk) + add;
  t[1] = xx;
}

void CpuOps::sampled_error_terms(const Tensor& x, int64_t stride, const Tensor& x_hat, Tensor& terms) {
  const int64_t cols = x_hat.dim(-1), rows = cols ? x_hat.numel() / cols : 0;
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < rows; ++i) {
    const real* xr = x.data() + i * stride * cols;
    const real* hr = x_hat.data() + i * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double e = static_cast<double>(xr[c]) - static_cast<double>(hr[c]);
      num += e * e;
      den += static_cast<double>(xr[c]) * static_cast<double>(xr[c]);
    }
  }
  double* t = terms.ptr<double>();
  t[0] = num;
  t[1] = den;
}

// --- optimizer

void CpuOps::adamw_step(const std::vector<Parameter*>& params, std::vector<Tensor>& m_all, std::vector<Tensor>& v_all,
                        const AdamWStep& st) {
  if (st.grad_scale != 1.0) scale_grads(params, st.grad_scale);  // as the clipping left them before
  const double b1 = st.beta1, b2 = st.beta2, eps = st.eps, lr = st.lr;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(st.t));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(st.t));
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i];
    real* w = p.value.data();
    const real* g = p.grad.data();
    real* m = m_all[i].data();
    real* v = v_all[i].data();
    const double decay = p.weight_decay ? 1.0 - lr * st.weight_decay : 1.0;
    parallel_for(p.value.numel(), kOptimizerGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const double gk = g[k];
        const double mk = b1 * m[k] + (1.0 - b1) * gk;
        const double vk = b2 * v[k] + (1.0 - b2) * gk * gk;
        m[k] = static_cast<real>(mk);
        v[k] = static_cast<real>(vk);
        const double update = (mk / bias1) / (std::sqrt(vk / bias2) + eps);
        w[k] = static_cast<real>(decay * w[k] - lr * update);
      }
    });
  }
}

double CpuOps::grad_norm_sq(const std::vector<Parameter*>& params) {
  double sum_sq = 0.0;
  for (const Parameter* p : params) {
    const real* g = p->grad.data();
    sum_sq += parallel_sum(p->grad.numel(), kOptimizerGrain, [g](int64_t b, int64_t e) {
      double s = 0.0;
      for (int64_t k = b; k < e; ++k) s += static_cast<double>(g[k]) * g[k];
      return s;
    });
  }
  return sum_sq;
}

void CpuOps::scale_grads(const std::vector<Parameter*>& params, double s) {
  const real scale = static_cast<real>(s);
  for (Parameter* p : params) {
    real* g = p->grad.data();
    parallel_for(p->grad.numel(), kOptimizerGrain, [g, scale](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) g[k] *= scale;
    });
  }
}

MOK_NN_END
