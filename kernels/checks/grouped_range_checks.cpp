// A stacked expert pass run range by range (GroupedSwiGlu's forward_experts / backward_experts,
// what the chunked dispatchers run as their chunks arrive) against the same pass run whole, in
// bf16 on the GPU: outputs, input gradients, gate gradients and every expert's weight
// gradients must be the same bits (grouped_swiglu.h promises it). 40 experts, more than
// CudaOps sends to its own grouped kernel, in ranges of 8 and in uneven ones; 8 experts, fewer
// than that, in ranges of 3, 2 and 3. Random segment sizes of about 2 000 rows, some experts
// without rows.
//
// Beside the checks it prints how many weight-gradient elements differ when a range's product
// is chosen by the range's own group count (RowSegments without the pass's count): the
// rounding the pass's count keeps out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/model/expert_bank.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/tensor_download.h"

namespace mok::cuda {

namespace {

using Ranges = std::vector<std::pair<int, int>>;

constexpr int64_t kD = 256, kF = 384;

struct PassBits {
  std::vector<float> ys, dxs, dgate, grads;  // grads: every expert's up then down gradient
};

std::vector<float> download_rows(const mok::Tensor& t) {
  if (t.dtype() == mok::DType::f32) return download<float>(t);
  return from_bf16(download<__nv_bfloat16>(t));
}

mok::Tensor upload_rows(const mok::ExecContext& cx, const std::vector<float>& v, std::vector<int64_t> shape) {
  mok::Tensor t = cx.activation(std::move(shape));
  const std::vector<__nv_bfloat16> b = to_bf16(v);
  t.copy_from_host(b.data(), static_cast<int64_t>(b.size() * sizeof(__nv_bfloat16)));
  return t;
}

std::vector<mok::GroupedSwiGlu::ExpertSpec> expert_specs(int G) {
  std::vector<mok::GroupedSwiGlu::ExpertSpec> s;
  for (int g = 0; g < G; ++g) s.push_back({"moe.expert" + std::to_string(g), static_cast<uint64_t>(70 + g)});
  return s;
}

// One forward and gated backward over `offsets` on a fresh bank (the same weights every time);
// ranges empty: the whole pass (forward, backward_gated).
PassBits run_pass(int G, const std::vector<int64_t>& offsets, const std::vector<float>& xs,
                  const std::vector<float>& dys, const std::vector<float>& gate, const Ranges& ranges) {
  const mok::ExecContext& cx = mok::ExecContext::current();
  const int64_t m = offsets.back();
  mok::ExpertBank bank = mok::make_stacked_expert_bank(expert_specs(G), {}, kD, kF, 0.05, 0.03, 0, "moe.expert");
  mok::GroupedSwiGlu& g = *bank.grouped;
  mok::Tensor x = upload_rows(cx, xs, {m, kD}), dy = upload_rows(cx, dys, {m, kD});
  mok::Tensor gt = cx.empty({m}, mok::DType::f32), dgate = cx.empty({m}, mok::DType::f32);
  gt.copy_from_host(gate.data(), static_cast<int64_t>(gate.size() * sizeof(float)));
  mok::Tensor ys, dxs;
  if (ranges.empty()) {
    ys = g.forward(std::move(x), offsets, true);
    dxs = g.backward_gated(dy, gt, dgate);
  } else {
    g.begin_forward(std::move(x), offsets, true);
    for (auto [g0, g1] : ranges) g.forward_experts(g0, g1);
    ys = g.end_forward();
    g.begin_backward(gt, dgate);
    for (auto [g0, g1] : ranges) g.backward_experts(dy, g0, g1);
    dxs = g.end_backward();
  }
  PassBits p{download_rows(ys), download_rows(dxs), download<float>(dgate), {}};
  for (const auto& e : bank.experts)
    for (const mok::Tensor* w : {&e->up().weight().grad, &e->down().weight().grad}) {
      const std::vector<float> v = download<float>(*w);
      p.grads.insert(p.grads.end(), v.begin(), v.end());
    }
  return p;
}

// Differing elements, or infinity when the whole pass's values are not finite or all zero
// (a comparison that could not fail).
double differ(const std::vector<float>& got, const std::vector<float>& want) {
  bool some = false;
  for (float v : want) {
    if (!std::isfinite(v)) return INFINITY;
    some = some || v != 0.f;
  }
  return some ? differing_elements(got, want) : INFINITY;
}

// A weight gradient, xsᵀ·dys per expert ((G, d, d) fp32), computed range by range with each
// range's segments made afresh, so that their own group count picks the product's method (the
// rule before RowSegments::range kept the pass's): how many elements differ from the whole
// call's. Printed, not checked: it shows what keeping the pass's count changes.
void print_own_method_difference(int G, const std::vector<int64_t>& offsets, const std::vector<float>& xs,
                                 const std::vector<float>& dys, const Ranges& ranges) {
  const mok::ExecContext& cx = mok::ExecContext::current();
  const int64_t m = offsets.back();
  const mok::Tensor x = upload_rows(cx, xs, {m, kD}), dy = upload_rows(cx, dys, {m, kD});
  mok::Tensor whole = cx.zeros({G, kD, kD}, mok::DType::f32), by_ranges = cx.zeros({G, kD, kD}, mok::DType::f32);
  const mok::RowSegments pass(offsets);
  cx.ops().grouped_weight_grad(pass, x, dy, whole);
  for (auto [g0, g1] : ranges) {
    const mok::RowSegments own(pass.range(g0, g1).host());  // the range's offsets, not its pass's count
    const int64_t r0 = offsets[g0];
    const mok::Tensor xr = x.view(r0 * kD, {own.rows(), kD}), dyr = dy.view(r0 * kD, {own.rows(), kD});
    mok::Tensor dw = by_ranges.view(int64_t(g0) * kD * kD, {g1 - g0, kD, kD});
    cx.ops().grouped_weight_grad(own, xr, dyr, dw);
  }
  const std::vector<float> a = download<float>(by_ranges), b = download<float>(whole);
  std::printf("grouped ranges, %d experts: a weight gradient by ranges of their own method: %.0f of %zu elements "
              "differ from the whole call\n",
              G, differing_elements(a, b), b.size());
}

void check_case(CheckInputs& in, std::vector<OpCheck>& out, int G, int avg_rows, const std::vector<Ranges>& splits) {
  // Segment sizes uniform in [0, 2·avg), one expert in five without rows.
  const std::vector<int32_t> sizes = in.uniform_int(static_cast<size_t>(G), 2 * avg_rows);
  const std::vector<int32_t> empty = in.uniform_int(static_cast<size_t>(G), 5);
  std::vector<int64_t> offsets = {0};
  for (int g = 0; g < G; ++g) offsets.push_back(offsets.back() + (empty[g] == 0 ? 0 : sizes[g]));
  const int64_t m = offsets.back();
  const std::vector<float> xs = in.normal(static_cast<size_t>(m * kD)), dys = in.normal(static_cast<size_t>(m * kD));
  const std::vector<float> gate = in.normal(static_cast<size_t>(m), 0.5);
  const PassBits whole = run_pass(G, offsets, xs, dys, gate, {});
  for (const Ranges& ranges : splits) {
    std::string tag = "grouped_ranges_G" + std::to_string(G) + "_by";
    for (auto [g0, g1] : ranges) tag += "_" + std::to_string(g1 - g0);
    const PassBits by = run_pass(G, offsets, xs, dys, gate, ranges);
    out.push_back({tag + " ys", differ(by.ys, whole.ys), 0.0});
    out.push_back({tag + " dxs", differ(by.dxs, whole.dxs), 0.0});
    out.push_back({tag + " dgate", differ(by.dgate, whole.dgate), 0.0});
    out.push_back({tag + " weight grads", differ(by.grads, whole.grads), 0.0});
  }
  print_own_method_difference(G, offsets, xs, dys, splits.front());
}

}  // namespace

void check_grouped_ranges(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "grouped_ranges", [&] {
    std::unique_ptr<mok::ExecContext> cx = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
    mok::ScopedExecContext scope(*cx);
    // Training-sized segments (about 2 000 rows an expert, as the 64 × 256 MoE gives): a long
    // reduction over few output tiles, where cuBLASLt's choice of kernel departs from the
    // grouped kernel's fixed order (a few hundred rows round the same either way).
    check_case(in, out, 40, 2000, {{{0, 8}, {8, 16}, {16, 24}, {24, 32}, {32, 40}}, {{0, 3}, {3, 17}, {17, 40}}});
    check_case(in, out, 8, 2000, {{{0, 3}, {3, 5}, {5, 8}}});
  });
}

}  // namespace mok::cuda
