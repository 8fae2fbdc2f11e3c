// The MoE routing kernels (kernels/moe_routing.h) against the double-precision core: a
// TopKRouter and the dispatcher's combine (kernels/checks/moe_routing_reference.h). Integer
// outputs (chosen experts, order, row_of_pair, load, counts) must match exactly; their
// checks report the number of mismatched elements (tolerance 0). Every call runs twice and
// the two results must be bitwise equal.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/checks/check_util.h"
#include "kernels/checks/moe_routing_reference.h"
#include "kernels/device_buffer.h"
#include "kernels/moe_routing.h"

namespace mok::cuda {
namespace {

// Device copies that also work for empty vectors (no tokens).
template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& v) {
  DeviceBuffer<T> b(v.size());
  if (!v.empty()) b.upload(v);
  return b;
}
template <typename T>
std::vector<T> from_device(const DeviceBuffer<T>& b) {
  return b.size() ? b.download() : std::vector<T>{};
}
// Float outputs are poisoned with NaN; integer outputs with 0x7F7F7F7F… (large and
// positive: neither an index nor −1).
template <typename T>
void poison(DeviceBuffer<T>& b) {
  if (b.size()) b.poison();
}
template <typename T>
void poison_ints(DeviceBuffer<T>& b) {
  if (b.size()) MOK_CUDA_CHECK(cudaMemset(b.data(), 0x7F, b.size() * sizeof(T)));
}

// Elements whose bytes differ.
template <typename T>
double differing(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return double(std::max(a.size(), b.size()));
  double count = 0;
  for (size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return count;
}

template <typename T>
double differing_prefix(const std::vector<T>& a, const std::vector<T>& b, size_t count) {
  return differing(std::vector<T>(a.begin(), a.begin() + count), std::vector<T>(b.begin(), b.begin() + count));
}

void sync() { MOK_CUDA_CHECK(cudaDeviceSynchronize()); }

// The dispatcher's sort on the host: pairs by expert, in pair order; −1 (dropped) skipped.
struct SortReference {
  std::vector<int32_t> order, row_of_pair;
  std::vector<int64_t> load, counts;
};
SortReference reference_sort(const std::vector<int32_t>& expert, int E, int64_t capacity) {
  SortReference r;
  const int64_t P = static_cast<int64_t>(expert.size());
  r.load.assign(E, 0);
  r.counts.assign(E, 0);
  r.row_of_pair.assign(P, -1);
  std::vector<int32_t> kept(expert);
  for (int64_t p = 0; p < P; ++p) {  // capacity in (token, slot) order, as TopKRouter::forward
    if (expert[p] < 0) continue;
    r.load[expert[p]]++;
    if (capacity > 0 && r.counts[expert[p]] >= capacity) kept[p] = -1;
    else r.counts[expert[p]]++;
  }
  for (int e = 0; e < E; ++e)
    for (int64_t p = 0; p < P; ++p)
      if (kept[p] == e) {
        r.row_of_pair[p] = static_cast<int32_t>(r.order.size());
        r.order.push_back(static_cast<int32_t>(p));
      }
  return r;
}

// Logits on a grid of 1/4: equal logits (ties) are frequent, and distinct ones are far
// apart, so the float GPU and the double reference see the same order. Every 7th token has
// all its logits equal (top-k = experts 0..k−1).
std::vector<float> router_logits(CheckInputs& in, int64_t n, int E) {
  std::vector<float> l = in.normal(size_t(n) * E, 1.5);
  for (float& v : l) v = std::round(v * 4.f) / 4.f;
  for (int64_t t = 0; t < n; t += 7)
    for (int e = 0; e < E; ++e) l[t * E + e] = 0.5f;
  return l;
}

void check_router_case(CheckInputs& in, std::vector<OpCheck>& out, const RouterCase& c) {
  const int64_t n = c.n, P = c.n * c.k;
  const int E = c.experts, k = c.k;
  const std::string label = "moe.router n" + std::to_string(n) + " E" + std::to_string(E) + " k" + std::to_string(k) +
                            (c.capacity_factor > 0 ? " cap" : "") + (c.remote.empty() ? "" : " loc") +
                            (c.locality_margin >= 0 ? " prefer-local" : "");
  const std::vector<float> logits = router_logits(in, n, E);
  const std::vector<float> dgate = in.normal(size_t(P));
  const RouterReference ref = reference_router(c, logits, dgate);
  double repeat_mismatch = 0;

  // softmax and top-k
  DeviceBuffer<float> d_logits = to_device(logits), d_probs(size_t(n) * E), d_lse(n), d_gate(P);
  DeviceBuffer<int32_t> d_expert(P);
  std::vector<float> probs, lse, gate;
  std::vector<int32_t> expert;
  for (int run = 0; run < 2; ++run) {
    poison(d_probs);
    poison(d_lse);
    poison(d_gate);
    poison_ints(d_expert);
    RouterLocality locality;
    if (c.locality_margin >= 0 && !c.remote.empty()) {
      locality.enabled = true;
      locality.margin = c.locality_margin;
      for (int e = 0; e < E; ++e)
        if (!c.remote[e]) locality.local[e / 32] |= 1u << (e % 32);
    }
    router_softmax_topk(d_logits.data(), n, E, k, d_probs.data(), d_lse.data(), d_expert.data(), d_gate.data(),
                        nullptr, locality);
    sync();
    if (run == 0) {
      probs = from_device(d_probs);
      lse = from_device(d_lse);
      gate = from_device(d_gate);
      expert = from_device(d_expert);
    } else {
      repeat_mismatch += differing(probs, from_device(d_probs)) + differing(lse, from_device(d_lse)) +
                         differing(gate, from_device(d_gate)) + differing(expert, from_device(d_expert));
    }
  }
  out.push_back({label + " probs", relative_error(probs, ref.probs), kFp32Tolerance});
  out.push_back({label + " lse", relative_error(lse, ref.lse), kFp32Tolerance});
  out.push_back({label + " top-k (mismatches)", differing(expert, ref.choice), 0.0});
  out.push_back({label + " gates", relative_error(gate, ref.gate), kFp32Tolerance});

  // sort with capacity, on the reference choice (so this checks the sort alone)
  const SortReference sref = reference_sort(ref.choice, E, ref.capacity);
  {
    const size_t ws_bytes = moe_sort_pairs_workspace_bytes(P, E);
    DeviceBuffer<char> ws(ws_bytes);
    DeviceBuffer<int32_t> d_choice = to_device(ref.choice), d_order(P), d_row(P);
    DeviceBuffer<int64_t> d_load(E), d_counts(E);
    std::vector<int32_t> order, row;
    std::vector<int64_t> load, counts;
    for (int run = 0; run < 2; ++run) {
      poison_ints(d_order);
      poison_ints(d_row);
      poison_ints(d_load);
      poison_ints(d_counts);
      moe_sort_pairs(d_choice.data(), P, E, ref.capacity, d_order.data(), d_row.data(), d_load.data(),
                     d_counts.data(), ws.data(), ws_bytes, nullptr);
      sync();
      if (run == 0) {
        order = from_device(d_order);
        row = from_device(d_row);
        load = from_device(d_load);
        counts = from_device(d_counts);
      } else {
        repeat_mismatch += differing_prefix(order, from_device(d_order), sref.order.size()) +
                           differing(row, from_device(d_row)) + differing(load, from_device(d_load)) +
                           differing(counts, from_device(d_counts));
      }
    }
    // The host sort must agree with the router's own capacity rule (its experts after capacity).
    std::vector<int32_t> kept_expert(P);
    for (int64_t p = 0; p < P; ++p) kept_expert[p] = sref.row_of_pair[p] >= 0 ? ref.choice[p] : -1;
    const double mismatches = differing_prefix(order, sref.order, sref.order.size()) +
                              differing(row, sref.row_of_pair) + differing(load, sref.load) +
                              differing(load, ref.load) + differing(counts, sref.counts) +
                              differing(kept_expert, ref.expert);
    out.push_back({label + " sort (mismatches)", mismatches, 0.0});
  }

  // losses, from the GPU's probabilities
  std::vector<float> f(E);
  for (int e = 0; e < E; ++e) f[e] = static_cast<float>(ref.f[e]);
  DeviceBuffer<float> d_f = to_device(f);
  DeviceBuffer<uint8_t> d_remote = to_device(c.remote);
  const uint8_t* remote = c.remote.empty() ? nullptr : d_remote.data();
  {
    const size_t ws_bytes = router_losses_workspace_bytes(n, E);
    DeviceBuffer<char> ws(ws_bytes);
    DeviceBuffer<double> d_sums(3);
    std::vector<double> sums;
    for (int run = 0; run < 2; ++run) {
      poison(d_sums);
      router_losses(d_probs.data(), d_lse.data(), d_f.data(), remote, n, E, d_sums.data(), ws.data(), ws_bytes,
                    nullptr);
      sync();
      if (run == 0) sums = from_device(d_sums);
      else repeat_mismatch += differing(sums, from_device(d_sums));
    }
    const double tokens = double(std::max<int64_t>(n, 1));  // no tokens: the sums are 0, like the losses
    const std::vector<double> gpu{c.aux_coef * E * sums[0], c.z_coef * sums[1] / tokens,
                                  c.locality_coef * sums[2] / tokens};
    out.push_back({label + " losses", relative_error(gpu, {ref.aux, ref.z, ref.locality}), kFp32Tolerance});
  }

  // backward, from the GPU's probabilities and log-sum-exp
  {
    const double scale = c.loss_scale;
    const auto aux_w = static_cast<float>(c.aux_coef * E / double(n) * scale);
    const auto z_w = static_cast<float>(2.0 * c.z_coef / double(n) * scale);
    const auto loc_w = static_cast<float>(c.locality_coef / double(n) * scale);
    DeviceBuffer<int32_t> d_choice = to_device(ref.choice);
    DeviceBuffer<float> d_dgate = to_device(dgate), d_dlogits(size_t(n) * E);
    std::vector<float> dlogits;
    for (int run = 0; run < 2; ++run) {
      poison(d_dlogits);
      router_backward(d_probs.data(), d_lse.data(), d_choice.data(), d_dgate.data(), d_f.data(), remote, n, E, k,
                      aux_w, z_w, loc_w, d_dlogits.data(), nullptr);
      sync();
      if (run == 0) dlogits = from_device(d_dlogits);
      else repeat_mismatch += differing(dlogits, from_device(d_dlogits));
    }
    out.push_back({label + " backward", relative_error(dlogits, ref.dlogits), kFp32Tolerance});
  }
  out.push_back({label + " bitwise repeat (mismatches)", repeat_mismatch, 0.0});
}

// ---- row kernels: gather, combine, pair values, row_dot, scale_rows ----

template <typename T>
struct RowType;
template <>
struct RowType<float> {
  static constexpr const char* name = "f32";
  static constexpr double tolerance = kFp32Tolerance;
  static std::vector<float> device(const std::vector<float>& v) { return v; }
  static std::vector<float> host(const std::vector<float>& v) { return v; }
};
template <>
struct RowType<bf16> {
  static constexpr const char* name = "bf16";
  static constexpr double tolerance = kBf16Tolerance;
  static std::vector<bf16> device(const std::vector<float>& v) { return to_bf16(v); }
  static std::vector<float> host(const std::vector<bf16>& v) { return from_bf16(v); }
};

struct RowErrors {
  double gather = 0, gather_scaled = 0, combine = 0, combine_ungated = 0, combine_add = 0, combine_add_bits = 0, pair_values = 0,
         row_dot = 0, scale = 0, scale_in_place = 0, repeat = 0;
};

template <typename T>
void check_rows(CheckInputs& in, int64_t n, int k, int E, int64_t d, int64_t capacity, RowErrors& err) {
  using R = RowType<T>;
  const int64_t P = n * k;
  // Random choices (k distinct experts per token are not needed by these kernels), some
  // already dropped (−1), then the sort's capacity.
  std::vector<int32_t> choice = in.uniform_int(size_t(P), E + 1);
  for (int32_t& e : choice) e -= 1;  // −1 ..E−1
  const SortReference s = reference_sort(choice, E, capacity);
  const int64_t m = static_cast<int64_t>(s.order.size());
  DeviceBuffer<int32_t> d_order(s.order), d_row(s.row_of_pair);

  // gather: out[i] = src[order[i] / k], exact
  const std::vector<float> src = R::host(R::device(in.normal(size_t(n) * d)));
  DeviceBuffer<T> d_src(R::device(src)), d_rows(size_t(m) * d);
  poison(d_rows);
  gather_rows<T>(d_src.data(), d_order.data(), k, m, d, d_rows.data(), nullptr);
  sync();
  {
    const std::vector<float> got = R::host(from_device(d_rows));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < d; ++j)
        err.gather += std::memcmp(&got[i * d + j], &src[(s.order[i] / k) * d + j], sizeof(float)) != 0;
  }
  // with the rows also scaled (the experts' gated gradient): the gathered rows as above, and
  // the scaled ones the bits of scale_rows over them
  {
    const std::vector<float> row_scale = in.normal(size_t(m), 0.5);
    DeviceBuffer<float> d_row_scale(row_scale);
    DeviceBuffer<T> d_rows2(size_t(m) * d), d_scaled(size_t(m) * d), d_scaled_two(size_t(m) * d);
    poison(d_rows2);
    poison(d_scaled);
    gather_rows<T>(d_src.data(), d_order.data(), k, m, d, d_rows2.data(), nullptr, d_row_scale.data(),
                   d_scaled.data());
    scale_rows<T>(d_rows.data(), d_row_scale.data(), m, d, d_scaled_two.data(), nullptr);
    sync();
    err.gather_scaled += differing(R::host(from_device(d_rows2)), R::host(from_device(d_rows))) +
                         differing(R::host(from_device(d_scaled)), R::host(from_device(d_scaled_two)));
  }

  // combine: out[t] = Σ_s gate·rows[row_of_pair], gated and ungated
  const std::vector<float> rows = R::host(R::device(in.normal(size_t(m) * d)));
  const std::vector<float> gate = in.normal(size_t(P), 0.5);
  std::vector<double> per_pair(size_t(P) * d, 0.0), gate_ref(gate.begin(), gate.end());
  for (int64_t p = 0; p < P; ++p)
    if (s.row_of_pair[p] >= 0)
      for (int64_t j = 0; j < d; ++j) per_pair[p * d + j] = rows[int64_t(s.row_of_pair[p]) * d + j];
  DeviceBuffer<T> d_expert_rows(R::device(rows)), d_out(size_t(n) * d);
  DeviceBuffer<float> d_gate(gate);
  std::vector<float> gated_sum;  // the gated combine as the device rounded it
  for (int gated = 0; gated < 2; ++gated) {
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
      poison(d_out);
      combine_pairs<T>(d_expert_rows.data(), d_row.data(), gated ? d_gate.data() : nullptr, n, k, d, d_out.data(),
                       nullptr);
      sync();
      const std::vector<float> got = R::host(from_device(d_out));
      if (run == 0) first = got;
      else err.repeat += differing(first, got);
    }
    const std::vector<double> ref =
        reference_combine(per_pair, s.row_of_pair, gated ? gate_ref : std::vector<double>{}, n, k, d);
    (gated ? err.combine : err.combine_ungated) =
        std::max(gated ? err.combine : err.combine_ungated, relative_error(first, ref));
    if (gated) gated_sum = first;
  }
  // with the residual stream added (the MoE branch joining it): against the reference, and in
  // fp32 bitwise the combine then a float add
  {
    const std::vector<float> residual = R::host(R::device(in.normal(size_t(n) * d)));
    DeviceBuffer<T> d_residual(R::device(residual));
    poison(d_out);
    combine_pairs<T>(d_expert_rows.data(), d_row.data(), d_gate.data(), n, k, d, d_out.data(), nullptr,
                     d_residual.data());
    sync();
    const std::vector<float> got = R::host(from_device(d_out));
    std::vector<double> ref = reference_combine(per_pair, s.row_of_pair, gate_ref, n, k, d);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += residual[i];
    err.combine_add = std::max(err.combine_add, relative_error(got, ref));
    if constexpr (std::is_same_v<T, float>) {
      std::vector<float> two_calls(gated_sum.size());
      for (size_t i = 0; i < two_calls.size(); ++i) two_calls[i] = gated_sum[i] + residual[i];
      err.combine_add_bits += differing(got, two_calls);
    }
  }

  // gates to rows and row values back to pairs, exact
  {
    DeviceBuffer<float> d_per_row(m), d_per_pair(P);
    poison(d_per_row);
    pair_values_to_rows(d_gate.data(), d_order.data(), m, d_per_row.data(), nullptr);
    poison(d_per_pair);
    rows_to_pair_values(d_per_row.data(), d_order.data(), m, P, d_per_pair.data(), nullptr);
    sync();
    const std::vector<float> per_row = from_device(d_per_row), back = from_device(d_per_pair);
    std::vector<float> per_row_ref(m), back_ref(P, 0.f);
    for (int64_t i = 0; i < m; ++i) per_row_ref[i] = gate[s.order[i]];
    for (int64_t p = 0; p < P; ++p)
      if (s.row_of_pair[p] >= 0) back_ref[p] = gate[p];
    err.pair_values += differing(per_row, per_row_ref) + differing(back, back_ref);
  }

  // row_dot (m rows of length d) and scale_rows
  {
    const std::vector<float> a = R::host(R::device(in.normal(size_t(m) * d)));
    const std::vector<float> b = R::host(R::device(in.normal(size_t(m) * d)));
    const std::vector<float> sc = in.normal(size_t(m));
    DeviceBuffer<T> d_a(R::device(a)), d_b(R::device(b)), d_scaled(size_t(m) * d);
    DeviceBuffer<float> d_dot(m), d_s(sc);
    std::vector<float> dot;
    for (int run = 0; run < 2; ++run) {
      poison(d_dot);
      row_dot<T>(d_a.data(), d_b.data(), m, d, d_dot.data(), nullptr);
      sync();
      if (run == 0) dot = from_device(d_dot);
      else err.repeat += differing(dot, from_device(d_dot));
    }
    std::vector<double> dot_ref(m, 0.0), scaled_ref(size_t(m) * d);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < d; ++j) {
        dot_ref[i] += double(a[i * d + j]) * b[i * d + j];
        scaled_ref[i * d + j] = double(a[i * d + j]) * sc[i];
      }
    // bf16 inputs, fp32 sums: the product of two bf16 values is exact in fp32
    err.row_dot = std::max(err.row_dot, relative_error(dot, dot_ref));
    poison(d_scaled);
    scale_rows<T>(d_a.data(), d_s.data(), m, d, d_scaled.data(), nullptr);
    scale_rows<T>(d_a.data(), d_s.data(), m, d, d_a.data(), nullptr);  // in place
    sync();
    err.scale = std::max(err.scale, relative_error(R::host(from_device(d_scaled)), scaled_ref));
    err.scale_in_place = std::max(err.scale_in_place, relative_error(R::host(from_device(d_a)), scaled_ref));
  }
}

template <typename T>
void check_rows_all(CheckInputs& in, std::vector<OpCheck>& out) {
  using R = RowType<T>;
  RowErrors err;
  check_rows<T>(in, 301, 3, 7, 72, 0, err);   // 16-byte vector path, dropless
  check_rows<T>(in, 257, 2, 5, 37, 60, err);  // scalar path (odd width), capacity drops
  check_rows<T>(in, 40, 4, 9, 64, 0, err);
  const std::string t = R::name;
  out.push_back({"moe.gather_rows " + t + " (mismatches)", err.gather, 0.0});
  out.push_back({"moe.gather_rows scaled = gather, scale_rows " + t + " (mismatches)", err.gather_scaled, 0.0});
  out.push_back({"moe.combine " + t, err.combine, R::tolerance});
  out.push_back({"moe.combine ungated " + t, err.combine_ungated, R::tolerance});
  out.push_back({"moe.combine + residual " + t, err.combine_add, R::tolerance});
  if (std::is_same_v<T, float>)
    out.push_back({"moe.combine + residual = combine, add " + t + " (mismatches)", err.combine_add_bits, 0.0});
  out.push_back({"moe.row_dot " + t, err.row_dot, kFp32Tolerance});
  out.push_back({"moe.scale_rows " + t, err.scale, R::tolerance});
  out.push_back({"moe.scale_rows in place " + t, err.scale_in_place, R::tolerance});
  out.push_back({"moe.pair values " + t + " (mismatches)", err.pair_values, 0.0});
  out.push_back({"moe.rows bitwise repeat " + t + " (mismatches)", err.repeat, 0.0});
}

}  // namespace

void check_moe_routing(CheckInputs& in, std::vector<OpCheck>& out) {
  RouterCase c;
  c.aux_coef = 0.01;
  c.z_coef = 0.001;
  std::vector<RouterCase> cases;

  c.n = 1000, c.experts = 8, c.k = 2, c.capacity_factor = 0.0;
  cases.push_back(c);

  c.n = 777, c.experts = 64, c.k = 8, c.capacity_factor = 1.0;
  c.locality_coef = 0.05;
  c.remote.assign(64, 0);
  for (int e = 16; e < 64; ++e) c.remote[e] = 1;  // this rank holds experts 0..15
  c.loss_scale = 0.5;
  cases.push_back(c);

  c.n = 900, c.experts = 16, c.k = 4, c.capacity_factor = 0.0;  // the locality-preferring top-k
  c.locality_coef = 0.0;
  c.remote.assign(16, 1);
  for (int e : {1, 4, 5, 11}) c.remote[e] = 0;
  c.locality_margin = 0.05;
  cases.push_back(c);
  c.locality_margin = -1.0;

  c.n = 300, c.experts = 256, c.k = 8, c.capacity_factor = 0.5;
  c.locality_coef = 0.0;
  c.remote.clear();
  c.loss_scale = 1.0;
  cases.push_back(c);

  c.n = 4096, c.experts = 64, c.k = 8, c.capacity_factor = 1.25;  // 32 tiles of the sort, drops across them
  cases.push_back(c);

  c.n = 61, c.experts = 5, c.k = 5, c.capacity_factor = 0.0;  // every expert chosen
  cases.push_back(c);

  c.n = 0, c.experts = 8, c.k = 2;  // no tokens
  cases.push_back(c);

  for (const RouterCase& rc : cases)
    run_guarded(out, "moe.router E" + std::to_string(rc.experts) + " n" + std::to_string(rc.n),
                [&] { check_router_case(in, out, rc); });
  run_guarded(out, "moe.rows f32", [&] { check_rows_all<float>(in, out); });
  run_guarded(out, "moe.rows bf16", [&] { check_rows_all<bf16>(in, out); });
}

}  // namespace mok::cuda
