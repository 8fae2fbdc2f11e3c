// LtGemm (kernels/gemm_lt.h) and GroupedGemm (kernels/grouped_gemm.h) against the CPU GEMM
// of the double-precision core (mok::f64::gemm, core/backend/gemm.h), on fresh random
// inputs: every transpose combination, f32 → f32, bf16 → bf16 and bf16 → f32, beta 0 (C
// poisoned with NaN first: it must be neither read nor left unwritten) and beta 1, odd sizes,
// padded leading dimensions (padding must stay untouched), unaligned pointers, m = 0 and
// k = 0, empty expert groups. Every call runs twice and must repeat bitwise. The grouped
// kernel (kernels/grouped_gemm_kernel.h) in all three forms at the experts' sizes, and what it
// leaves to the loop; with the offsets in device memory, bitwise as with host offsets, also
// replayed from a CUDA graph after the offsets changed.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend/gemm.h"
#include "kernels/checks/check_util.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_lt.h"
#include "kernels/grouped_gemm.h"
#include "kernels/grouped_gemm_wgmma.h"
#include "kernels/grouped_tile_list.cuh"

namespace mok::cuda {
namespace {

// bf16 inputs with an fp32 output: the products are exact in fp32, the error is the fp32
// accumulation (order chosen by the tensor-core kernel).
constexpr double kBf16InputTolerance = 1e-4;

double tolerance_for(GemmType ab, GemmType c) {
  if (c == GemmType::bf16) return kBf16Tolerance;
  return ab == GemmType::bf16 ? kBf16InputTolerance : kFp32Tolerance;
}

std::string types_name(GemmType ab, GemmType c) { return std::string(gemm_type_name(ab)) + ">" + gemm_type_name(c); }

// A matrix on the device as f32 or bf16, handled through host floats.
class DeviceMatrix {
 public:
  DeviceMatrix(size_t count, GemmType type)
      : type_(type), f32_(type == GemmType::f32 ? count : 0), b16_(type == GemmType::bf16 ? count : 0) {}
  DeviceMatrix(const std::vector<float>& host, GemmType type) : DeviceMatrix(host.size(), type) { upload(host); }
  void upload(const std::vector<float>& host) {
    if (type_ == GemmType::f32) f32_.upload(host);
    else b16_.upload(to_bf16(host));
  }
  std::vector<float> download() const { return type_ == GemmType::f32 ? f32_.download() : from_bf16(b16_.download()); }
  void poison() {
    if (type_ == GemmType::f32) f32_.poison();
    else b16_.poison();
  }
  void* data() { return type_ == GemmType::f32 ? static_cast<void*>(f32_.data()) : static_cast<void*>(b16_.data()); }
  // The element `offset` places in (for unaligned pointers).
  void* at(int64_t offset) { return static_cast<char*>(data()) + offset * int64_t(gemm_type_bytes(type_)); }

 private:
  GemmType type_;
  DeviceBuffer<float> f32_;
  DeviceBuffer<bf16> b16_;
};

// What the device holds for host values of `type` (bf16 rounding).
std::vector<float> as_stored(const std::vector<float>& v, GemmType type) {
  return type == GemmType::bf16 ? round_bf16(v) : v;
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

void sync() { MOK_CUDA_CHECK(cudaDeviceSynchronize()); }

// The error `part` returns, or infinity (with the message printed) when it throws.
template <typename F>
double error_or_inf(const std::string& what, F&& part) {
  try {
    return part();
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", what.c_str(), e.what());
    return INFINITY;
  }
}

// ---- LtGemm ----

struct GemmCase {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // leading dimension beyond the row length
  int64_t a_offset = 0;                     // elements: an A pointer off the 16-byte grid
  float alpha = 1.f, beta = 0.f;
  GemmType ab = GemmType::f32, c = GemmType::f32;
};

struct GemmTally {
  double repeat_mismatch = 0;  // elements that differ between two identical calls
  double padding_changed = 0;  // padding elements of C that a call wrote
  double plans_added_on_repeat = 0;
};

// Runs the case twice; returns ‖C − C_ref‖/‖C_ref‖ over the m×n block.
double run_gemm_case(LtGemm& lt, CheckInputs& in, const GemmCase& g, GemmTally& tally) {
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const int64_t lda = a_cols + g.pad_a, ldb = b_cols + g.pad_b, ldc = g.n + g.pad_c;
  const std::vector<float> a = as_stored(in.normal(size_t(a_rows * lda + g.a_offset)), g.ab);
  const std::vector<float> b = as_stored(in.normal(size_t(b_rows * ldb)), g.ab);
  std::vector<float> c0 = as_stored(in.normal(size_t(g.m * ldc)), g.c);
  // padding of C: NaN, which must survive
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = g.n; j < ldc; ++j) c0[i * ldc + j] = NAN;

  std::vector<double> ref = to_double(c0);
  if (g.m > 0 && g.n > 0) {
    const std::vector<double> ad = to_double(a), bd = to_double(b);
    if (g.beta == 0.f)
      for (double& v : ref) v = 0.0;  // BLAS: C is not read
    mok::f64::gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, ad.data() + g.a_offset, lda, bd.data(), ldb,
                   g.beta == 0.f ? 1.0 : double(g.beta), ref.data(), ldc);
    if (g.beta == 0.f)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = g.n; j < ldc; ++j) ref[i * ldc + j] = NAN;
  }

  DeviceMatrix d_a(a, g.ab), d_b(b, g.ab), d_c(c0.size(), g.c);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    if (g.beta == 0.f) {
      d_c.poison();  // NaN everywhere: C must not be read, and every element written
    } else {
      d_c.upload(c0);
    }
    const size_t plans = lt.cached_plans();
    lt.gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, d_a.at(g.a_offset), lda, d_b.data(), ldb, g.beta, d_c.data(), ldc,
            g.ab, g.c, nullptr);
    sync();
    if (run == 1) tally.plans_added_on_repeat += double(lt.cached_plans() - plans);
    const std::vector<float> got = d_c.download();
    if (run == 0) first = got;
    else tally.repeat_mismatch += differing_elements(first, got);
  }
  // the m×n block against the reference; padding must still be NaN
  std::vector<float> block;
  std::vector<double> block_ref;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      block.push_back(first[i * ldc + j]);
      block_ref.push_back(ref[i * ldc + j]);
    }
    for (int64_t j = g.n; j < ldc; ++j) tally.padding_changed += !std::isnan(first[i * ldc + j]);
  }
  return relative_error(block, block_ref);
}

void check_lt_gemm(LtGemm& lt, CheckInputs& in, std::vector<OpCheck>& out) {
  GemmTally tally;
  const std::pair<GemmType, GemmType> types[] = {
      {GemmType::f32, GemmType::f32}, {GemmType::bf16, GemmType::bf16}, {GemmType::bf16, GemmType::f32}};
  for (const auto& [ab, c] : types) {
    // every transpose combination and beta 0/1 at odd sizes: one line per (types, op)
    for (int t = 0; t < 4; ++t) {
      const std::string name =
          std::string("gemm ") + types_name(ab, c) + " " + (t & 1 ? "T" : "N") + (t & 2 ? "T" : "N") + " 37x53x29";
      double worst = 0;
      for (const float beta : {0.f, 1.f}) {
        GemmCase g;
        g.ta = t & 1;
        g.tb = t & 2;
        g.m = 37, g.n = 53, g.k = 29;
        g.alpha = 0.75f, g.beta = beta;
        g.ab = ab, g.c = c;
        worst = std::max(worst, error_or_inf(name, [&] { return run_gemm_case(lt, in, g, tally); }));
      }
      out.push_back({name, worst, tolerance_for(ab, c)});
    }
    // padded leading dimensions, an A pointer one element off the 16-byte grid, beta 1
    {
      GemmCase g;
      g.tb = true;
      g.m = 64, g.n = 48, g.k = 40;
      g.pad_a = 3, g.pad_b = 5, g.pad_c = 7, g.a_offset = 1;
      g.alpha = -1.25f, g.beta = 1.f;
      g.ab = ab, g.c = c;
      const std::string name = "gemm " + types_name(ab, c) + " NT padded+unaligned";
      out.push_back({name, error_or_inf(name, [&] { return run_gemm_case(lt, in, g, tally); }), tolerance_for(ab, c)});
    }
    // tensor-core sized, and a long reduction (weight-gradient shape: split-K territory)
    {
      GemmCase g;
      g.m = 256, g.n = 384, g.k = 512, g.beta = 1.f, g.ab = ab, g.c = c;
      GemmCase w;
      w.ta = true;
      w.m = 96, w.n = 128, w.k = 8192, w.beta = 1.f, w.ab = ab, w.c = c;
      const std::string name = "gemm " + types_name(ab, c) + " 256x384x512, TN 96x128x8192";
      const double e1 = error_or_inf(name, [&] { return run_gemm_case(lt, in, g, tally); });
      const double e2 = error_or_inf(name, [&] { return run_gemm_case(lt, in, w, tally); });
      out.push_back({name, std::max(e1, e2), tolerance_for(ab, c)});
    }
  }

  // Token counts of one size class (1100..1107 → 1152): one heuristic query for the class,
  // whose algorithm serves every exact size (rows: m varies; weight gradient: k varies).
  for (const GemmType ab : {GemmType::bf16, GemmType::f32}) {
    const std::string name = std::string("gemm ") + gemm_type_name(ab) + " size class";
    run_guarded(out, name, [&] {
      double worst = 0;
      const size_t before = lt.heuristic_queries();
      for (int64_t tokens = 1100; tokens < 1108; ++tokens) {
        GemmCase rows;
        rows.m = tokens, rows.n = 64, rows.k = 96, rows.ab = ab, rows.c = ab;
        GemmCase grad;
        grad.ta = true, grad.m = 96, grad.n = 64, grad.k = tokens, grad.beta = 1.f, grad.ab = ab;
        worst = std::max(worst, run_gemm_case(lt, in, rows, tally));
        worst = std::max(worst, run_gemm_case(lt, in, grad, tally));
      }
      out.push_back({name + ": 8 sizes × (rows, dW)", worst, tolerance_for(ab, ab)});
      out.push_back({name + ": heuristic queries beyond 2", std::max(0.0, double(lt.heuristic_queries() - before) - 2),
                     0.0});
    });
  }

  // Edge sizes, exact: m = 0 and n = 0 leave C as it is; k = 0 and alpha = 0 give C = beta·C
  // (multiplying by 0, 0.5, 2 is exact) without reading A or B (NaN there).
  run_guarded(out, "gemm m=0, n=0, k=0, alpha=0", [&] {
    double mismatches = 0;
    const std::vector<float> a(64 * 64, NAN), b(64 * 64, NAN);
    for (const GemmType ct : {GemmType::f32, GemmType::bf16}) {
      const GemmType abt = ct;
      DeviceMatrix d_a(a, abt), d_b(b, abt);
      const std::vector<float> c0 = as_stored(in.normal(size_t(9 * 11)), ct);
      DeviceMatrix d_c(c0, ct);
      struct Edge { int64_t m, n, k; float alpha, beta; };
      for (const Edge& e : {Edge{0, 11, 5, 1.f, 0.f}, Edge{9, 0, 5, 1.f, 0.f}, Edge{9, 11, 0, 1.f, 0.f},
                            Edge{9, 11, 0, 1.f, 1.f}, Edge{9, 11, 0, 1.f, 0.5f}, Edge{9, 11, 7, 0.f, 2.f}}) {
        for (int run = 0; run < 2; ++run) {
          d_c.upload(c0);
          lt.gemm(false, false, e.m, e.n, e.k, e.alpha, d_a.data(), std::max<int64_t>(e.k, 1), d_b.data(), 11,
                  e.beta, d_c.data(), 11, abt, ct, nullptr);
          sync();
          std::vector<float> expect = c0;
          if (e.m > 0 && e.n > 0)
            for (float& v : expect) v = e.beta == 0.f ? 0.f : v * e.beta;
          mismatches += differing_elements(d_c.download(), expect);
        }
      }
    }
    out.push_back({"gemm m=0, n=0, k=0, alpha=0 (mismatches)", mismatches, 0.0});
  });

  // Bad sizes are refused with a message, before anything runs.
  run_guarded(out, "gemm refuses bad sizes", [&] {
    double accepted = 0;
    DeviceMatrix d(size_t(64), GemmType::f32);
    try {
      lt.gemm(false, false, 4, 8, 4, 1.f, d.data(), 4, d.data(), 8, 0.f, d.data(), 7, GemmType::f32, GemmType::f32,
              nullptr);
      accepted += 1;
    } catch (const std::invalid_argument&) {
    }
    try {
      lt.gemm(false, false, 4, 4, 4, 1.f, d.data(), 4, d.data(), 4, 0.f, d.data(), 4, GemmType::f32, GemmType::bf16,
              nullptr);
      accepted += 1;
    } catch (const std::invalid_argument&) {
    }
    out.push_back({"gemm refuses ldc < n, f32>bf16 (accepted)", accepted, 0.0});
  });

  out.push_back({"gemm bitwise repeat (mismatches)", tally.repeat_mismatch, 0.0});
  out.push_back({"gemm C padding written (elements)", tally.padding_changed, 0.0});
  out.push_back({"gemm plan reused on repeat (new plans)", tally.plans_added_on_repeat, 0.0});
}

// ---- GroupedGemm ----

// Row counts per group, with empty groups (first, middle, last) and a one-row group.
std::vector<int64_t> group_offsets(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> off(sizes.size() + 1, 0);
  for (size_t g = 0; g < sizes.size(); ++g) off[g + 1] = off[g] + sizes[g];
  return off;
}

struct GroupedTally {
  double repeat_mismatch = 0;
  double untouched_changed = 0;  // elements of C padding, dW padding or empty groups' dW that changed
};

// Elements beyond the row lengths (and, for dW, between the groups' blocks). The defaults are
// odd (no method may rely on aligned rows); the grouped kernel takes multiples of 8.
struct GroupedPadding {
  int64_t a = 1, c = 2;    // rows: A (M, k + a), C (M, n + c)
  int64_t dy = 3, dw = 5;  // weight_grad: dY (M, n + dy), dW blocks k·n + dw apart
};
constexpr GroupedPadding kAlignedPadding{8, 8, 8, 8};

// rows: C[rows g] = alpha·A[rows g]·op(B_g) + beta·C[rows g]; returns the relative error.
double run_grouped_rows(GroupedGemm& gg, CheckInputs& in, const std::vector<int64_t>& off, bool tb, int64_t n,
                        int64_t k, float beta, GemmType ab, GemmType ct, GroupedTally& tally,
                        std::vector<float>* result, const GroupedPadding& pad = {}) {
  const int G = static_cast<int>(off.size()) - 1;
  const int64_t M = off[G], lda = k + pad.a, ldc = n + pad.c;  // padded rows
  const int64_t ldb = tb ? k : n, stride = n * k;
  const float alpha = 0.5f;
  const std::vector<float> a = as_stored(in.normal(size_t(M * lda)), ab);
  const std::vector<float> b = as_stored(in.normal(size_t(G * stride)), ab);
  const std::vector<float> c0 = as_stored(in.normal(size_t(M * ldc)), ct);
  std::vector<double> ref = to_double(c0);
  const std::vector<double> ad = to_double(a), bd = to_double(b);
  for (int g = 0; g < G; ++g) {
    const int64_t m = off[g + 1] - off[g];
    if (m == 0) continue;
    double* cg = ref.data() + off[g] * ldc;
    if (beta == 0.f)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) cg[i * ldc + j] = 0.0;
    mok::f64::gemm(false, tb, m, n, k, alpha, ad.data() + off[g] * lda, lda, bd.data() + g * stride, ldb,
                   beta == 0.f ? 1.0 : double(beta), cg, ldc);
  }
  DeviceMatrix d_a(a, ab), d_b(b, ab), d_c(c0, ct);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    d_c.upload(c0);
    if (beta == 0.f) {  // NaN in every group's rows: they must be written and not read
      std::vector<float> poisoned = c0;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < n; ++j) poisoned[i * ldc + j] = NAN;
      d_c.upload(poisoned);
    }
    gg.rows(tb, G, off.data(), n, k, alpha, d_a.data(), lda, d_b.data(), stride, beta, d_c.data(), ldc, ab, ct,
            nullptr);
    sync();
    const std::vector<float> got = d_c.download();
    if (run == 0) first = got;
    else tally.repeat_mismatch += differing_elements(first, got);
  }
  if (result) *result = first;
  // padding columns must be untouched
  std::vector<float> block;
  std::vector<double> block_ref;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      block.push_back(first[i * ldc + j]);
      block_ref.push_back(ref[i * ldc + j]);
    }
    for (int64_t j = n; j < ldc; ++j)
      tally.untouched_changed += std::memcmp(&first[i * ldc + j], &c0[i * ldc + j], sizeof(float)) != 0;
  }
  return relative_error(block, block_ref);
}

// dW_g = alpha·A[rows g]ᵀ·dY[rows g] + beta·dW_g (fp32): beta 1 through weight_grad, any other
// beta through weight_grad_into (beta 0: the non-empty groups' blocks are NaN first, to be
// written and not read). Empty groups' dW_g and the padding between blocks must stay bitwise
// as they were.
double run_grouped_weight_grad(GroupedGemm& gg, CheckInputs& in, const std::vector<int64_t>& off, int64_t k,
                               int64_t n, GemmType ab, GroupedTally& tally, std::vector<float>* result,
                               const GroupedPadding& pad = {}, float beta = 1.f) {
  const int G = static_cast<int>(off.size()) - 1;
  const int64_t M = off[G], lda = k, ldy = n + pad.dy, stride = k * n + pad.dw;
  const float alpha = 1.5f;
  const std::vector<float> a = as_stored(in.normal(size_t(M * lda)), ab);
  const std::vector<float> dy = as_stored(in.normal(size_t(M * ldy)), ab);
  std::vector<float> dw0 = in.normal(size_t(G * stride));
  std::vector<double> ref = to_double(dw0);
  const std::vector<double> ad = to_double(a), dyd = to_double(dy);
  for (int g = 0; g < G; ++g) {
    const int64_t m = off[g + 1] - off[g];
    if (m == 0) continue;
    if (beta == 0.f)
      for (int64_t i = 0; i < k * n; ++i) {
        ref[g * stride + i] = 0.0;
        dw0[g * stride + i] = NAN;
      }
    mok::f64::gemm(true, false, k, n, m, alpha, ad.data() + off[g] * lda, lda, dyd.data() + off[g] * ldy, ldy,
                   beta == 0.f ? 1.0 : double(beta), ref.data() + g * stride, n);
  }
  DeviceMatrix d_a(a, ab), d_dy(dy, ab);
  DeviceBuffer<float> d_dw(dw0);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    d_dw.upload(dw0);
    if (beta == 1.f)
      gg.weight_grad(G, off.data(), k, n, alpha, d_a.data(), lda, d_dy.data(), ldy, d_dw.data(), stride, ab, nullptr);
    else
      gg.weight_grad_into(G, off.data(), k, n, alpha, d_a.data(), lda, d_dy.data(), ldy, d_dw.data(), stride, beta,
                          ab, GemmType::f32, nullptr);
    sync();
    const std::vector<float> got = d_dw.download();
    if (run == 0) first = got;
    else tally.repeat_mismatch += differing_elements(first, got);
  }
  if (result) *result = first;
  for (int g = 0; g < G; ++g) {
    const int64_t from = off[g + 1] == off[g] ? 0 : k * n;  // a whole empty block, else its padding
    for (int64_t i = from; i < stride; ++i)
      tally.untouched_changed += std::memcmp(&first[g * stride + i], &dw0[g * stride + i], sizeof(float)) != 0;
  }
  return relative_error(first, ref);
}

void check_grouped_gemm(LtGemm& lt, CheckInputs& in, std::vector<OpCheck>& out) {
  const std::vector<int64_t> small = group_offsets({0, 9, 0, 17, 1, 12, 0});         // odd sizes, empty groups
  const std::vector<int64_t> moe = group_offsets({301, 260, 0, 289, 311, 247, 270, 303});  // E = 8
  const std::pair<GemmType, GemmType> types[] = {
      {GemmType::f32, GemmType::f32}, {GemmType::bf16, GemmType::bf16}, {GemmType::bf16, GemmType::f32}};
  GroupedTally tally;
  for (const GroupedGemmMethod method :
       {GroupedGemmMethod::loop, GroupedGemmMethod::streams, GroupedGemmMethod::cublas}) {
    const std::string mname = grouped_gemm_method_name(method);
    run_guarded(out, "grouped " + mname, [&] {
      GroupedGemm gg(lt, method, 3);
      for (const auto& [ab, ct] : types) {
        double worst = 0;
        try {
          for (const bool tb : {false, true})
            for (const float beta : {0.f, 1.f})
              worst = std::max(worst, run_grouped_rows(gg, in, small, tb, 45, 27, beta, ab, ct, tally, nullptr));
          worst = std::max(worst, run_grouped_rows(gg, in, moe, true, 192, 256, 1.f, ab, ct, tally, nullptr));
        } catch (const std::exception& e) {
          std::printf("grouped %s rows %s: %s\n", mname.c_str(), types_name(ab, ct).c_str(), e.what());
          worst = INFINITY;
        }
        out.push_back({"grouped " + mname + " rows " + types_name(ab, ct), worst, tolerance_for(ab, ct)});
      }
      for (const GemmType ab : {GemmType::f32, GemmType::bf16}) {
        double worst = 0;
        try {
          worst = std::max(worst, run_grouped_weight_grad(gg, in, small, 27, 45, ab, tally, nullptr));
          worst = std::max(worst, run_grouped_weight_grad(gg, in, moe, 96, 160, ab, tally, nullptr));
        } catch (const std::exception& e) {
          std::printf("grouped %s weight_grad %s: %s\n", mname.c_str(), gemm_type_name(ab), e.what());
          worst = INFINITY;
        }
        std::string name = "grouped " + mname + " weight_grad " + gemm_type_name(ab);
        if (method == GroupedGemmMethod::cublas && gg.cublas_declined(ab, GemmType::f32))
          name += " (cuBLAS declined: loop)";
        out.push_back({name, worst, tolerance_for(ab, GemmType::f32)});
      }
      // bad offsets are refused with a message
      double accepted = 0;
      try {
        const int64_t bad[] = {0, 5, 3};
        gg.rows(false, 2, bad, 4, 4, 1.f, nullptr, 4, nullptr, 16, 0.f, nullptr, 4, GemmType::f32, GemmType::f32,
                nullptr);
        accepted = 1;
      } catch (const std::invalid_argument&) {
      }
      out.push_back({"grouped " + mname + " refuses decreasing offsets (accepted)", accepted, 0.0});
    });
  }
  // loop and streams pin the same algorithm per group: the same bits on the same inputs.
  run_guarded(out, "grouped streams = loop", [&] {
    CheckInputs same_a{in.seed + 1}, same_b{in.seed + 1};
    GroupedGemm loop(lt, GroupedGemmMethod::loop), streams(lt, GroupedGemmMethod::streams, 3);
    GroupedTally unused;
    double mismatches = 0;
    for (const auto& [ab, ct] : types) {
      std::vector<float> r1, r2;
      run_grouped_rows(loop, same_a, moe, false, 160, 96, 1.f, ab, ct, unused, &r1);
      run_grouped_rows(streams, same_b, moe, false, 160, 96, 1.f, ab, ct, unused, &r2);
      mismatches += differing_elements(r1, r2);
    }
    std::vector<float> w1, w2;
    run_grouped_weight_grad(loop, same_a, moe, 96, 160, GemmType::bf16, unused, &w1);
    run_grouped_weight_grad(streams, same_b, moe, 96, 160, GemmType::bf16, unused, &w2);
    mismatches += differing_elements(w1, w2);
    out.push_back({"grouped streams = loop bitwise (mismatches)", mismatches, 0.0});
  });
  out.push_back({"grouped bitwise repeat (mismatches)", tally.repeat_mismatch, 0.0});
  out.push_back({"grouped untouched padding, empty groups (changed)", tally.untouched_changed, 0.0});
}

// ---- the grouped kernel (GroupedGemmMethod::kernel) ----

// 64 segments of 0 to ~300 rows: empty ones, one-row ones, none a multiple of a tile.
std::vector<int64_t> many_expert_offsets() {
  std::vector<int64_t> sizes(64);
  for (int g = 0; g < 64; ++g) sizes[g] = g % 13 == 5 ? 0 : g % 17 == 3 ? 1 : 3 + (g * 73) % 290;
  return group_offsets(sizes);
}

// Each of the three forms at the experts' sizes (n, k from 256, 512, 768, 1024, 2048) on
// segments that are empty (first, middle, last), of one row, of up to 8000 rows and never a
// multiple of the tile, with G = 7, 8 and 64, for both tile shapes; beta 0 (outputs NaN first)
// and 1; the rows padded by 8 elements (the padding must stay untouched). Every call must be
// taken by the kernel (not fall back to loop) and repeat bitwise.
void check_grouped_kernel(LtGemm& lt, CheckInputs& in, std::vector<OpCheck>& out) {
  const std::vector<int64_t> small = group_offsets({0, 9, 0, 17, 1, 130, 0});
  const std::vector<int64_t> large = group_offsets({4100, 0, 1, 8000, 37, 130, 2047, 64});
  const std::vector<int64_t> eight = group_offsets({130, 0, 1, 257, 64, 300, 77, 128});
  const std::vector<int64_t> many = many_expert_offsets();
  const GemmType bf = GemmType::bf16;
  struct RowsCase {
    const std::vector<int64_t>* off;
    int64_t n, k;
    float beta;
  };
  // (a) x·W_up, h·W_down shapes; (b) dY·Wᵀ shapes
  const RowsCase forward[] = {{&small, 768, 256, 0.f},  {&small, 256, 2048, 1.f}, {&large, 256, 512, 0.f},
                              {&eight, 2048, 1024, 1.f}, {&many, 512, 768, 0.f},  {&many, 768, 256, 1.f}};
  const RowsCase transposed[] = {{&small, 1024, 512, 0.f}, {&small, 512, 1024, 1.f}, {&large, 512, 256, 1.f},
                                 {&many, 256, 768, 0.f},   {&many, 768, 512, 1.f}};
  struct GradCase {
    const std::vector<int64_t>* off;
    int64_t k, n;
    float beta;
  };
  const GradCase grads[] = {{&small, 256, 768, 1.f}, {&small, 1024, 512, 0.f}, {&large, 512, 256, 1.f},
                            {&eight, 2048, 1024, 1.f}, {&many, 768, 512, 1.f},  {&many, 256, 768, 0.f}};
  GroupedTally tally;
  double not_taken = 0;  // calls that ran as loop instead (or, for wgmma, not on the Hopper kernel)
  std::vector<GroupedKernelTile> tiles = {GroupedKernelTile::m128n256, GroupedKernelTile::m128n128,
                                          GroupedKernelTile::m16n64};
  if (grouped_wgmma_available()) tiles.push_back(GroupedKernelTile::m128n256_wgmma);
  else std::printf("grouped kernel 128x256 wgmma: not checked (needs compute capability 9.0)\n");
  for (const GroupedKernelTile tile : tiles) {
    const std::string tname = std::string("grouped kernel ") + grouped_kernel_tile_name(tile);
    run_guarded(out, tname, [&] {
      GroupedGemm gg(lt, GroupedGemmMethod::kernel);
      gg.set_kernel_tile(tile);
      const bool hopper = tile == GroupedKernelTile::m128n256_wgmma;
      // one call (run twice inside) that the kernel must take
      auto taken = [&](auto&& call) {
        const size_t before = hopper ? gg.wgmma_calls() : gg.kernel_calls();
        const double err = call();
        not_taken += 2.0 - double((hopper ? gg.wgmma_calls() : gg.kernel_calls()) - before);
        return err;
      };
      double worst_a = 0, worst_b = 0, worst_w = 0;
      for (const RowsCase& c : forward)
        worst_a = std::max(worst_a, taken([&] {
          return run_grouped_rows(gg, in, *c.off, false, c.n, c.k, c.beta, bf, bf, tally, nullptr, kAlignedPadding);
        }));
      for (const RowsCase& c : transposed)
        worst_b = std::max(worst_b, taken([&] {
          return run_grouped_rows(gg, in, *c.off, true, c.n, c.k, c.beta, bf, bf, tally, nullptr, kAlignedPadding);
        }));
      for (const GradCase& c : grads)
        worst_w = std::max(worst_w, taken([&] {
          return run_grouped_weight_grad(gg, in, *c.off, c.k, c.n, bf, tally, nullptr, kAlignedPadding, c.beta);
        }));
      out.push_back({tname + " rows A·B_g bf16>bf16", worst_a, kBf16Tolerance});
      out.push_back({tname + " rows A·B_gT bf16>bf16", worst_b, kBf16Tolerance});
      out.push_back({tname + " dW+=AT·dY bf16>f32", worst_w, kBf16InputTolerance});
    });
  }
  out.push_back({"grouped kernel calls run as loop", not_taken, 0.0});

  // Every output element is the same chain of k16 tensor-core steps in reduction order whatever
  // CTA computes it, and mma.sync and wgmma round a k16 step alike, so every tile shape and
  // both kernels give the same bits.
  // Decode-shaped segments too: one row in 4 of 64 experts (a sequence's token, top-4) and a
  // row or two in most of them (15 sequences).
  std::vector<int64_t> one_token(64, 0), fifteen(64, 0);
  for (const int g : {3, 17, 40, 63}) one_token[g] = 1;
  for (int g = 0; g < 64; ++g) fifteen[g] = g % 5 == 2 ? 0 : 1 + (g * 7) % 2;
  const std::vector<int64_t> decode_one = group_offsets(one_token), decode_fifteen = group_offsets(fifteen);
  run_guarded(out, "grouped kernel tiles bitwise", [&] {
    std::vector<GroupedKernelTile> shapes = {GroupedKernelTile::m128n256, GroupedKernelTile::m128n128,
                                             GroupedKernelTile::m16n64};
    if (grouped_wgmma_available()) shapes.push_back(GroupedKernelTile::m128n256_wgmma);
    std::vector<std::vector<float>> results(shapes.size());
    double mismatches = 0, calls = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      CheckInputs same{in.seed + 2};
      GroupedGemm gg(lt, GroupedGemmMethod::kernel);
      gg.set_kernel_tile(shapes[i]);
      GroupedTally unused;
      for (const bool tb : {false, true})
        for (const float beta : {0.f, 1.f}) {  // the wgmma kernel stores beta = 0 rows its own way
          std::vector<float> r;
          run_grouped_rows(gg, same, eight, tb, 768, 512, beta, bf, bf, unused, &r, kAlignedPadding);
          results[i].insert(results[i].end(), r.begin(), r.end());
        }
      std::vector<float> w;
      run_grouped_weight_grad(gg, same, eight, 768, 512, bf, unused, &w, kAlignedPadding);
      results[i].insert(results[i].end(), w.begin(), w.end());
      for (const std::vector<int64_t>* decode : {&decode_one, &decode_fifteen}) {  // partial n and k tiles
        std::vector<float> r;
        run_grouped_rows(gg, same, *decode, false, 520, 264, 0.f, bf, bf, unused, &r, kAlignedPadding);
        results[i].insert(results[i].end(), r.begin(), r.end());
        run_grouped_rows(gg, same, *decode, true, 264, 520, 0.f, bf, bf, unused, &r, kAlignedPadding);
        results[i].insert(results[i].end(), r.begin(), r.end());
      }
      calls += double(shapes[i] == GroupedKernelTile::m128n256_wgmma ? gg.wgmma_calls() : gg.kernel_calls());
      if (i > 0) mismatches += differing_elements(results[0], results[i]);
    }
    std::string names;
    for (const GroupedKernelTile t : shapes)
      names += (names.empty() ? "" : " = ") + std::string(grouped_kernel_tile_name(t));
    out.push_back({"grouped kernel " + names + " bitwise (mismatches)", mismatches, 0.0});
    out.push_back({"grouped kernel " + names + " calls not taken", 18.0 * double(shapes.size()) - calls, 0.0});
  });

  // The narrow choice (GroupedGemm::set_narrow_tiles): decode-shaped calls run on the 16×64 tile
  // with the kernel tile's bits; wide segments keep the kernel tile.
  run_guarded(out, "grouped kernel narrow choice", [&] {
    const GroupedKernelTile wide =
        grouped_wgmma_available() ? GroupedKernelTile::m128n256_wgmma : GroupedKernelTile::m128n256;
    std::vector<float> result[2];
    size_t narrow_calls[2] = {0, 0};
    for (const bool narrow : {false, true}) {
      CheckInputs same{in.seed + 3};
      GroupedGemm gg(lt, GroupedGemmMethod::kernel);
      gg.set_kernel_tile(wide);
      gg.set_narrow_tiles(narrow);
      GroupedTally unused;
      for (const std::vector<int64_t>* off : {&decode_one, &eight}) {
        std::vector<float> r;
        run_grouped_rows(gg, same, *off, false, 520, 264, 0.f, bf, bf, unused, &r, kAlignedPadding);
        result[narrow].insert(result[narrow].end(), r.begin(), r.end());
      }
      narrow_calls[narrow] = gg.narrow_calls();
    }
    out.push_back({"grouped kernel narrow choice = wide tile bitwise (mismatches)",
                   differing_elements(result[0], result[1]), 0.0});
    // run_grouped_rows runs each call twice: the one-token calls go narrow, the 8-expert ones not
    out.push_back({"grouped kernel narrow choice: decode calls not on the 16x64 tile (of 2)",
                   2.0 - double(narrow_calls[1]), 0.0});
    out.push_back({"grouped kernel narrow choice: calls on the 16x64 tile while off", double(narrow_calls[0]), 0.0});
  });

  // What the kernel does not take runs as loop, and is still right: odd strides (the default
  // padding), k not a multiple of 8, f32 operands.
  run_guarded(out, "grouped kernel fallback", [&] {
    GroupedGemm gg(lt, GroupedGemmMethod::kernel);
    double worst = 0;
    worst = std::max(worst, run_grouped_rows(gg, in, small, false, 256, 512, 1.f, bf, bf, tally, nullptr));
    worst = std::max(worst, run_grouped_rows(gg, in, small, true, 64, 36, 0.f, bf, bf, tally, nullptr,
                                             kAlignedPadding));
    worst = std::max(worst, run_grouped_weight_grad(gg, in, small, 256, 512, bf, tally, nullptr));
    const double bf_worst = worst;
    const double f32_err =
        run_grouped_rows(gg, in, small, false, 256, 512, 1.f, GemmType::f32, GemmType::f32, tally, nullptr,
                         kAlignedPadding);
    out.push_back({"grouped kernel fallback bf16 (loop)", bf_worst, kBf16Tolerance});
    out.push_back({"grouped kernel fallback f32 (loop)", f32_err, kFp32Tolerance});
    out.push_back({"grouped kernel fallback calls taken", double(gg.kernel_calls()), 0.0});
  });

  // The kernel refuses what it cannot take, with a message, before anything runs.
  run_guarded(out, "grouped kernel refuses", [&] {
    const int64_t off[] = {0, 5, 12};
    GroupedKernelCall call;
    call.groups = 2, call.host_offsets = off, call.n = 64, call.k = 36, call.lda = 40, call.ldb = 64, call.ldc = 64;
    double accepted = 0;
    try {
      grouped_gemm_kernel(call, GroupedKernelTile::m128n256, nullptr);
      accepted += 1;
    } catch (const std::invalid_argument&) {
    }
    out.push_back({"grouped kernel refuses k % 8 != 0 (accepted)", accepted, 0.0});
  });
  out.push_back({"grouped kernel bitwise repeat (mismatches)", tally.repeat_mismatch, 0.0});
  out.push_back({"grouped kernel untouched padding, empty groups (changed)", tally.untouched_changed, 0.0});
}

// ---- the grouped kernel with device offsets (GroupedGemm::rows_device, weight_grad_into_device) ----

// `rows` rows over `groups` segments, uneven as routing makes them (weights uniform in
// [1, 1000]); with_empty: group 0, every fifth group and the last one empty.
std::vector<int64_t> random_split(CheckInputs& in, int groups, int64_t rows, bool with_empty) {
  const size_t count = static_cast<size_t>(groups);
  const std::vector<int32_t> drawn = in.uniform_int(count, 1000);
  std::vector<int64_t> weight(count), sizes(count, 0);
  int64_t total = 0;
  for (int g = 0; g < groups; ++g) {
    const bool empty = with_empty && (g % 5 == 0 || g == groups - 1);
    weight[g] = empty ? 0 : drawn[g] + 1;
    total += weight[g];
  }
  int64_t assigned = 0;
  for (int g = 0; g < groups; ++g) assigned += sizes[g] = rows * weight[g] / total;
  for (int g = 0; assigned < rows; g = (g + 1) % groups)  // the remainder, a row each
    if (weight[g] > 0) ++sizes[g], ++assigned;
  return group_offsets(sizes);
}

// One expert bank at the layer's sizes with fresh random bf16 inputs, the three products'
// outputs (rows padded by 8 elements, dW blocks 8 apart) and their initial values, and the
// offsets on the host and on the device:
//   rows         Y[rows g] (m_g, hidden) = 0.5·X[rows g] (m_g, d)·W_g (d, hidden) + beta·Y
//   rows_bt      DX[rows g] (m_g, d) = 0.5·H[rows g] (m_g, hidden)·W_gᵀ + beta·DX
//   weight_grad  dW_g (d, hidden) = 1.5·X[rows g]ᵀ·H[rows g] + beta·dW_g (fp32)
struct ExpertBank {
  int groups;
  int64_t rows, d, hidden;
  std::vector<int64_t> offsets;
  DeviceBuffer<int64_t> device_offsets;
  DeviceBuffer<bf16> x, h, w, y_init, y, dx_init, dx;
  DeviceBuffer<float> dw_init, dw;

  ExpertBank(CheckInputs& in, const std::vector<int64_t>& off, int64_t d_model, int64_t hidden_size)
      : groups(static_cast<int>(off.size()) - 1), rows(off.back()), d(d_model), hidden(hidden_size), offsets(off),
        device_offsets(off), x(to_bf16(in.normal(size_t(rows * d)))), h(to_bf16(in.normal(size_t(rows * hidden)))),
        w(to_bf16(in.normal(size_t(groups * d * hidden)))), y_init(to_bf16(in.normal(size_t(rows * ldy())))),
        y(y_init.size()), dx_init(to_bf16(in.normal(size_t(rows * ldx())))), dx(dx_init.size()),
        dw_init(in.normal(size_t(groups * dw_stride()))), dw(dw_init.size()) {}
  int64_t ldy() const { return hidden + 8; }
  int64_t ldx() const { return d + 8; }
  int64_t dw_stride() const { return d * hidden + 8; }

  // New offsets (the same M) on the host and on the device.
  void set_offsets(const std::vector<int64_t>& off) {
    offsets = off;
    device_offsets.upload(off);
  }
  // The form's output back to its initial values (outside any capture).
  void reset(GroupedKernelForm form) {
    if (form == GroupedKernelForm::rows) copy(y, y_init);
    else if (form == GroupedKernelForm::rows_bt) copy(dx, dx_init);
    else copy(dw, dw_init);
  }
  // The form's output as stored, bits and all.
  std::vector<uint16_t> output_bits(GroupedKernelForm form) const {
    std::vector<uint16_t> bits;
    if (form == GroupedKernelForm::weight_grad) {
      const std::vector<float> v = dw.download();
      bits.resize(2 * v.size());
      std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
    } else {
      const std::vector<bf16> v = (form == GroupedKernelForm::rows ? y : dx).download();
      bits.resize(v.size());
      std::memcpy(bits.data(), v.data(), v.size() * sizeof(bf16));
    }
    return bits;
  }
  // One product on `stream`, with the host or the device offsets; false when the device call
  // was not taken.
  bool run(GroupedGemm& gg, GroupedKernelForm form, float beta, bool device, cudaStream_t stream) {
    const GemmType bf = GemmType::bf16;
    const int64_t* off = offsets.data();
    const int64_t* dev = device_offsets.data();
    switch (form) {
      case GroupedKernelForm::rows:
        if (device)
          return gg.rows_device(false, groups, dev, rows, hidden, d, 0.5f, x.data(), d, w.data(), d * hidden, beta,
                                y.data(), ldy(), bf, bf, stream);
        gg.rows(false, groups, off, hidden, d, 0.5f, x.data(), d, w.data(), d * hidden, beta, y.data(), ldy(), bf, bf,
                stream);
        return true;
      case GroupedKernelForm::rows_bt:
        if (device)
          return gg.rows_device(true, groups, dev, rows, d, hidden, 0.5f, h.data(), hidden, w.data(), d * hidden, beta,
                                dx.data(), ldx(), bf, bf, stream);
        gg.rows(true, groups, off, d, hidden, 0.5f, h.data(), hidden, w.data(), d * hidden, beta, dx.data(), ldx(), bf,
                bf, stream);
        return true;
      case GroupedKernelForm::weight_grad:
        if (device)
          return gg.weight_grad_into_device(groups, dev, rows, d, hidden, 1.5f, x.data(), d, h.data(), hidden,
                                            dw.data(), dw_stride(), beta, bf, GemmType::f32, stream);
        gg.weight_grad_into(groups, off, d, hidden, 1.5f, x.data(), d, h.data(), hidden, dw.data(), dw_stride(), beta,
                            bf, GemmType::f32, stream);
        return true;
    }
    return false;
  }

 private:
  template <typename T>
  static void copy(DeviceBuffer<T>& to, const DeviceBuffer<T>& from) {
    MOK_CUDA_CHECK(cudaMemcpy(to.data(), from.data(), from.size() * sizeof(T), cudaMemcpyDeviceToDevice));
  }
};

const char* form_label(GroupedKernelForm form) {
  switch (form) {
    case GroupedKernelForm::rows: return "rows A·B_g";
    case GroupedKernelForm::rows_bt: return "rows A·B_gT";
    case GroupedKernelForm::weight_grad: return "dW=AT·dY";
  }
  return "?";
}
constexpr GroupedKernelForm kForms[] = {GroupedKernelForm::rows, GroupedKernelForm::rows_bt,
                                        GroupedKernelForm::weight_grad};

// The calls the grouped kernel took (for the wgmma tile: those on the Hopper kernel).
size_t kernel_calls_on(const GroupedGemm& gg) {
  return gg.kernel_tile() == GroupedKernelTile::m128n256_wgmma ? gg.wgmma_calls() : gg.kernel_calls();
}

// A non-blocking stream and the graph captured on it (thread-local capture mode: a call that
// synchronizes or copies from pageable memory fails the capture), released in any case.
struct CapturedGraph {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CapturedGraph() { MOK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~CapturedGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  // Captures what `record` issues on `stream`, and instantiates it.
  template <typename F>
  void capture(F&& record) {
    MOK_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      record();
    } catch (...) {
      cudaGraph_t dropped = nullptr;
      cudaStreamEndCapture(stream, &dropped);
      if (dropped) cudaGraphDestroy(dropped);
      throw;
    }
    MOK_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    MOK_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  }
  void replay() {
    MOK_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    MOK_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

// The list build_tile_list_on_device writes is the one fill_tile_list builds from the same
// offsets, entry for entry: both forms (weight_grad's order by decreasing rows with ties by
// index), both tile shapes, random splits with ties and empty groups, up to 1024 groups.
void check_device_tile_list(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "grouped tile list on the device", [&] {
    std::vector<std::vector<int64_t>> splits = {group_offsets({0, 37, 4100, 0, 1, 37, 0, 900, 37, 0}),
                                                random_split(in, 64, 4096, true), random_split(in, 7, 1, false)};
    std::vector<int64_t> tied(1024);  // 1024 groups of four sizes: ties everywhere
    for (size_t g = 0; g < tied.size(); ++g) tied[g] = g % 7 == 3 ? 0 : 1 + int64_t(g * 5 % 4) * 60;
    splits.push_back(group_offsets(tied));
    splits.push_back(random_split(in, 1024, 100000, true));
    DeviceBuffer<GroupedTileList> device_list(1);
    double mismatches = 0;
    for (const std::vector<int64_t>& off : splits) {
      DeviceBuffer<int64_t> device_offsets(off);
      for (const GroupedKernelForm form : kForms)
        for (const auto& [tile_m, tile_n] : {std::pair{128, 256}, std::pair{128, 128}}) {
          GroupedKernelCall call;
          call.form = form;
          call.groups = static_cast<int>(off.size()) - 1;
          call.host_offsets = off.data();
          call.n = 1000, call.k = 776;
          GroupedTileList want;
          fill_tile_list(call, tile_m, tile_n, want);
          call.host_offsets = nullptr;
          call.device_offsets = device_offsets.data();
          call.rows = off.back();
          call.device_list = device_list.data();
          device_list.poison();  // nothing left from the previous list
          build_tile_list_on_device(call, tile_m, tile_n, nullptr);
          const GroupedTileList got = device_list.download()[0];
          const int groups = call.groups;
          mismatches += (got.groups != want.groups) + (got.tiles_n != want.tiles_n) + (got.tiles != want.tiles);
          for (int i = 0; i <= groups; ++i) {
            mismatches += got.tile_start[i] != want.tile_start[i];
            mismatches += got.row_start[i] != want.row_start[i];
            if (i < groups) mismatches += got.group_of[i] != want.group_of[i];
          }
        }
    }
    out.push_back({"grouped tile list built on the device = host (mismatching entries)", mismatches, 0.0});
  });
}

// Device offsets give the bits host offsets give (the same tile list, so every tile is the
// same computation): for every tile shape and form, beta 0 and 1, at the benchmark experts'
// sizes (E 8, d 768, hidden 1024, 16384·2 rows; E 64, hidden 256, 4096 rows) and on odd
// segments (empty first and last groups, a one-row group). The whole output is compared,
// padding and empty groups' blocks included. Then the graph check: one device-offset call of
// each form captured in a CUDA graph, replayed after new offsets (the same M, other splits
// with empty groups) were written to the device, against the host-offset calls on them.
void check_grouped_kernel_device_offsets(LtGemm& lt, CheckInputs& in, std::vector<OpCheck>& out) {
  check_device_tile_list(in, out);
  std::vector<GroupedKernelTile> tiles = {GroupedKernelTile::m128n256, GroupedKernelTile::m128n128,
                                          GroupedKernelTile::m16n64};
  if (grouped_wgmma_available()) tiles.push_back(GroupedKernelTile::m128n256_wgmma);
  else std::printf("grouped kernel 128x256 wgmma device offsets: not checked (needs compute capability 9.0)\n");

  run_guarded(out, "grouped kernel device offsets", [&] {
    struct Shape {
      const char* name;
      std::vector<int64_t> offsets;
      int64_t d, hidden;
    };
    const Shape shapes[] = {{"E8 d768 h1024 M32768", random_split(in, 8, 16384 * 2, false), 768, 1024},
                            {"E64 d768 h256 M4096", random_split(in, 64, 4096, true), 768, 256},
                            {"odd segments d768 h1024", group_offsets({0, 1, 300, 0, 129, 77, 0}), 768, 1024}};
    std::vector<std::unique_ptr<GroupedGemm>> gemms;
    for (const GroupedKernelTile tile : tiles) {
      gemms.push_back(std::make_unique<GroupedGemm>(lt, GroupedGemmMethod::kernel));
      gemms.back()->set_kernel_tile(tile);
    }
    std::vector<std::array<double, 3>> mismatches(tiles.size(), {0, 0, 0});  // [tile][form]
    double not_taken = 0;
    for (const Shape& shape : shapes) {
      ExpertBank bank(in, shape.offsets, shape.d, shape.hidden);
      for (size_t t = 0; t < tiles.size(); ++t)
        for (size_t f = 0; f < std::size(kForms); ++f)
          for (const float beta : {0.f, 1.f}) {
            GroupedGemm& gg = *gemms[t];
            const size_t before = kernel_calls_on(gg);
            std::vector<uint16_t> result[2];
            for (const bool device : {false, true}) {
              bank.reset(kForms[f]);
              bank.run(gg, kForms[f], beta, device, nullptr);
              sync();
              result[device] = bank.output_bits(kForms[f]);
            }
            not_taken += 2.0 - double(kernel_calls_on(gg) - before);
            const double differ = differing_elements(result[0], result[1]);
            if (differ > 0)
              std::printf("grouped kernel %s device offsets %s beta %g %s: %.0f elements differ\n",
                          grouped_kernel_tile_name(tiles[t]), form_label(kForms[f]), double(beta), shape.name, differ);
            mismatches[t][f] += differ;
          }
    }
    for (size_t t = 0; t < tiles.size(); ++t)
      for (size_t f = 0; f < std::size(kForms); ++f)
        out.push_back({std::string("grouped kernel ") + grouped_kernel_tile_name(tiles[t]) + " device offsets = host " +
                           form_label(kForms[f]) + " (mismatches)",
                       mismatches[t][f], 0.0});
    out.push_back({"grouped kernel device offsets: calls not taken by the kernel", not_taken, 0.0});
  });

  for (const GroupedKernelTile tile : tiles) {
    const std::string name = std::string("grouped kernel ") + grouped_kernel_tile_name(tile) +
                             " graph replayed on new device offsets = host (mismatches)";
    run_guarded(out, name, [&] {
      const int64_t rows = 4099;
      ExpertBank bank(in, random_split(in, 8, rows, false), 768, 1024);
      const std::vector<int64_t> replays[] = {random_split(in, 8, rows, true),
                                              group_offsets({0, 4000, 1, 0, 98, 0, 0, 0})};
      const float beta_of[] = {0.f, 1.f, 1.f};  // rows, rows_bt, weight_grad
      CapturedGraph graph;
      // the captured object only ever sees the graph's stream; the host-offset calls run on another
      GroupedGemm captured(lt, GroupedGemmMethod::kernel), direct(lt, GroupedGemmMethod::kernel);
      captured.set_kernel_tile(tile);
      direct.set_kernel_tile(tile);
      double mismatches = 0, not_taken = 0;
      graph.capture([&] {
        for (size_t f = 0; f < std::size(kForms); ++f)
          not_taken += !bank.run(captured, kForms[f], beta_of[f], true, graph.stream);
      });
      not_taken += double(std::size(kForms)) - double(kernel_calls_on(captured));
      for (const std::vector<int64_t>& off : replays) {
        bank.set_offsets(off);
        for (const GroupedKernelForm form : kForms) bank.reset(form);
        sync();  // the copies above are not ordered with the graph's stream
        graph.replay();
        std::vector<uint16_t> replayed[std::size(kForms)];
        for (size_t f = 0; f < std::size(kForms); ++f) replayed[f] = bank.output_bits(kForms[f]);
        for (size_t f = 0; f < std::size(kForms); ++f) {
          bank.reset(kForms[f]);
          bank.run(direct, kForms[f], beta_of[f], false, nullptr);
          sync();
          mismatches += differing_elements(replayed[f], bank.output_bits(kForms[f]));
        }
      }
      not_taken += 2.0 * double(std::size(kForms)) - double(kernel_calls_on(direct));
      out.push_back({name, mismatches, 0.0});
      out.push_back({std::string("grouped kernel ") + grouped_kernel_tile_name(tile) +
                         " graph check: calls not taken by the kernel",
                     not_taken, 0.0});
    });
  }

  // Leading segments (RowSegments::leading: a fixed row exchange sorts its pads into a group
  // after the experts): device offsets of 8 experts that end before M = 6000 rows give the
  // host-offset call's bits, and the rows past their end keep their values.
  run_guarded(out, "grouped kernel leading segments", [&] {
    ExpertBank bank(in, random_split(in, 9, 6000, false), 768, 1024);  // the 9th group: the pads
    const int experts = 8;
    const int64_t end = bank.offsets[experts];
    const GemmType bf = GemmType::bf16;
    std::vector<uint16_t> initial(bank.y_init.size());
    {
      const std::vector<bf16> v = bank.y_init.download();
      std::memcpy(initial.data(), v.data(), v.size() * sizeof(bf16));
    }
    double mismatches = 0, pads_changed = 0, not_taken = 0;
    for (const GroupedKernelTile tile : tiles) {
      GroupedGemm gg(lt, GroupedGemmMethod::kernel);
      gg.set_kernel_tile(tile);
      std::vector<uint16_t> result[2];
      for (const bool device : {false, true}) {
        bank.reset(GroupedKernelForm::rows);
        if (device)
          not_taken += !gg.rows_device(false, experts, bank.device_offsets.data(), bank.rows, bank.hidden, bank.d, 0.5f,
                                       bank.x.data(), bank.d, bank.w.data(), bank.d * bank.hidden, 0.f, bank.y.data(),
                                       bank.ldy(), bf, bf, nullptr);
        else
          gg.rows(false, experts, bank.offsets.data(), bank.hidden, bank.d, 0.5f, bank.x.data(), bank.d, bank.w.data(),
                  bank.d * bank.hidden, 0.f, bank.y.data(), bank.ldy(), bf, bf, nullptr);
        sync();
        result[device] = bank.output_bits(GroupedKernelForm::rows);
      }
      mismatches += differing_elements(result[0], result[1]);
      for (size_t i = static_cast<size_t>(end * bank.ldy()); i < initial.size(); ++i)
        pads_changed += result[1][i] != initial[i];
    }
    out.push_back({"grouped kernel leading segments: device = host offsets (mismatches)", mismatches, 0.0});
    out.push_back({"grouped kernel leading segments: rows past the last segment changed", pads_changed, 0.0});
    out.push_back({"grouped kernel leading segments: calls not taken by the kernel", not_taken, 0.0});
  });
}

// C = A·B + R with R read from its own buffer (c_in: the residual add of a block in the
// GEMM's epilogue): against the reference, R left as it was, a bitwise repeat, C = R when
// there is no product (k = 0 or alpha = 0: a copy, not cuBLASLt), and with fp32
// outputs the same bits as the in-place form (C holding R, beta 1). bf16 outputs differ from
// the in-place form in the last bit of about a quarter of the elements (measured on an H200:
// cuBLASLt rounds the two epilogues differently), both within the bf16 tolerance.
void check_lt_gemm_residual(LtGemm& lt, CheckInputs& in, std::vector<OpCheck>& out) {
  const std::pair<GemmType, GemmType> types[] = {
      {GemmType::f32, GemmType::f32}, {GemmType::bf16, GemmType::bf16}, {GemmType::bf16, GemmType::f32}};
  for (const auto& [ab, ct] : types) {
    const std::string name = "gemm " + types_name(ab, ct) + " + R (separate C in) 256x384x512";
    run_guarded(out, name, [&] {
      const int64_t m = 256, n = 384, k = 512;
      const std::vector<float> a = as_stored(in.normal(size_t(m * k)), ab), b = as_stored(in.normal(size_t(k * n)), ab);
      const std::vector<float> r = as_stored(in.normal(size_t(m * n)), ct);
      std::vector<double> ref = to_double(r);
      const std::vector<double> ad = to_double(a), bd = to_double(b);
      mok::f64::gemm(false, false, m, n, k, 1.0, ad.data(), k, bd.data(), n, 1.0, ref.data(), n);
      DeviceMatrix d_a(a, ab), d_b(b, ab), d_r(r, ct), d_c(size_t(m * n), ct), d_in_place(r, ct);
      std::vector<float> got;
      double mismatches = 0;
      for (int run = 0; run < 2; ++run) {
        d_c.poison();
        lt.gemm(false, false, m, n, k, 1.f, d_a.data(), k, d_b.data(), n, 1.f, d_c.data(), n, ab, ct, nullptr,
                d_r.data());
        sync();
        if (run == 0) got = d_c.download();
        else mismatches += differing_elements(d_c.download(), got);
      }
      mismatches += differing_elements(d_r.download(), r);
      std::string what = ": R changed, repeat";
      if (ct == GemmType::f32) {
        lt.gemm(false, false, m, n, k, 1.f, d_a.data(), k, d_b.data(), n, 1.f, d_in_place.data(), n, ab, ct, nullptr);
        sync();
        mismatches += differing_elements(got, d_in_place.download());
        what += ", = in place";
      }
      out.push_back({name, relative_error(got, ref), tolerance_for(ab, ct)});
      out.push_back({name + what + " (mismatches)", mismatches, 0.0});

      // no product (k = 0, or alpha = 0): C = R exactly, R untouched
      double copies = 0;
      for (const int64_t kk : {int64_t(0), k}) {
        d_c.poison();
        lt.gemm(false, false, m, n, kk, kk == 0 ? 1.f : 0.f, d_a.data(), k, d_b.data(), n, 1.f, d_c.data(), n, ab, ct,
                nullptr, d_r.data());
        sync();
        copies += differing_elements(d_c.download(), r) + differing_elements(d_r.download(), r);
      }
      out.push_back({name + ": k = 0 and alpha = 0 give C = R (mismatches)", copies, 0.0});
    });
  }
}

// Tuning (gemm_lt.h) pins, per problem, the fastest of the heuristic's candidates whose output
// is bitwise the first choice's on the operands of the problem's first call. A tuned LtGemm
// and an untuned one then give the same bits on fresh operands too, for the dense layers'
// kinds of product (bf16, 4 096 tokens): the qkv projection, an input gradient, and the MLP's
// down projection with the residual read from a separate C in. Every one of them must have
// been tuned (eight candidates each on an H200), or the check says nothing.
void check_lt_gemm_tuning(CheckInputs& in, std::vector<OpCheck>& out) {
  struct Case {
    const char* name;
    bool tb;
    int64_t m, n, k;
    bool residual;
  };
  const Case cases[] = {{"qkv NN 4096x2304x768", false, 4096, 2304, 768, false},
                        {"dX NT 4096x768x2304", true, 4096, 768, 2304, false},
                        {"down NN+R 4096x768x2048", false, 4096, 768, 2048, true}};
  run_guarded(out, "gemm tuning", [&] {
    LtGemm tuned, untuned;
    untuned.set_tuning(false);
    const GemmType t = GemmType::bf16;
    double mismatches = 0;
    for (const Case& c : cases) {
      const int64_t ldb = c.tb ? c.k : c.n;
      for (int data = 0; data < 2; ++data) {  // the first call tunes; the second has fresh operands
        DeviceMatrix a(in.normal(size_t(c.m * c.k)), t), b(in.normal(size_t(c.k * c.n)), t),
            r(in.normal(size_t(c.m * c.n)), t), c_tuned(size_t(c.m * c.n), t), c_untuned(size_t(c.m * c.n), t);
        const float beta = c.residual ? 1.f : 0.f;
        tuned.gemm(false, c.tb, c.m, c.n, c.k, 1.f, a.data(), c.k, b.data(), ldb, beta, c_tuned.data(), c.n, t, t,
                   nullptr, c.residual ? r.data() : nullptr);
        untuned.gemm(false, c.tb, c.m, c.n, c.k, 1.f, a.data(), c.k, b.data(), ldb, beta, c_untuned.data(), c.n, t,
                     t, nullptr, c.residual ? r.data() : nullptr);
        sync();
        mismatches += differing_elements(c_tuned.download(), c_untuned.download());
      }
    }
    const std::string counts = std::to_string(tuned.tuned_to_another()) + " of " +
                               std::to_string(tuned.tuned_problems()) + " tuned to another candidate";
    out.push_back({"gemm tuning: tuned = untuned, bitwise (" + counts + ")", mismatches, 0.0});
    out.push_back({"gemm tuning: every case tuned (untuned cases)",
                   static_cast<double>(std::size(cases)) - static_cast<double>(tuned.tuned_problems()), 0.0});
  });
}

}  // namespace

void check_gemm(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "gemm", [&] {
    LtGemm lt;
    check_lt_gemm(lt, in, out);
    check_lt_gemm_residual(lt, in, out);
    check_lt_gemm_tuning(in, out);
    check_grouped_gemm(lt, in, out);
    check_grouped_kernel(lt, in, out);
    check_grouped_kernel_device_offsets(lt, in, out);
  });
}

}  // namespace mok::cuda
