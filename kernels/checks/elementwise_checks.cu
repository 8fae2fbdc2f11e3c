// The elementwise, norm, loss, embedding and optimizer kernels against the double-precision
// CPU reference (elementwise_reference.h), for float and bf16, on fresh random inputs with
// outputs poisoned (NaN) before each launch. bf16 kernels are compared with the reference on
// the bf16-rounded inputs. Besides the values:
//   - accumulated outputs (dg, dw) start from random values, not zeros;
//   - every fixed-order reduction run twice on the same inputs gives the same bytes;
//   - odd sizes: n not a multiple of a block or pack, d = 1, 3, 768, 1000, pointers off
//     the 16-byte grid (the one-element path), unscored targets, a token repeated across
//     many chunks and tokens never used;
//   - a workspace that is too small is refused.
// Each named check reports its worst case over the sizes; a failing size is listed on its own.
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/adamw.h"
#include "kernels/add_ranges.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/elementwise_reference.h"
#include "kernels/copy_ranges.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/moe_routing.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/zero_ranges.h"

namespace mok::cuda {
namespace {

using reference::Values;

// Sums in double of fp32 squares (exact products): only the additions round.
constexpr double kDoubleSumTolerance = 1e-10;

template <typename T>
std::string type_name() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}
template <typename T>
constexpr double tolerance_of() {
  return std::is_same_v<T, float> ? kFp32Tolerance : kBf16Tolerance;
}

// Named results: the worst case per name, in first-seen order; a case over its tolerance
// is also listed as "name [detail]".
class Results {
 public:
  explicit Results(std::vector<OpCheck>& out) : out_(out) {}
  void add(const std::string& name, const std::string& detail, double error, double tolerance) {
    if (!(error <= tolerance)) out_.push_back({name + " [" + detail + "]", error, tolerance});
    for (OpCheck& c : worst_)
      if (c.name == name) {
        if (!(error <= c.relative_error)) c.relative_error = error;  // NaN counts as worse
        return;
      }
    worst_.push_back({name, error, tolerance});
  }
  ~Results() { out_.insert(out_.end(), worst_.begin(), worst_.end()); }

 private:
  std::vector<OpCheck>& out_;
  std::vector<OpCheck> worst_;
};

// 0 when f throws std::invalid_argument, 1 when it does not.
double refused(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return 0.0;
  }
  return 1.0;
}

void sync() { MOK_CUDA_CHECK(cudaDeviceSynchronize()); }

Values as_values(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

template <typename T>
T host_from_float(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return __float2bfloat16(x);
}

// A device copy of v; never empty (an empty v gets one unused element), so that every
// pointer is a real allocation.
template <typename V>
DeviceBuffer<V> to_device(std::vector<V> v) {
  if (v.empty()) v.resize(1);
  return DeviceBuffer<V>(v);
}

// A device array of n elements of T from host floats, placed `offset` elements past a
// 256-byte boundary (1 puts it off the 16-byte grid). `values`: what the device holds (the
// floats rounded to T), in double, for the reference.
template <typename T>
struct DeviceArray {
  DeviceArray(const std::vector<float>& host, int64_t offset_) : buffer(host.size() + offset_ + 1),
      offset(offset_), n(static_cast<int64_t>(host.size())), values(host.size()) {
    std::vector<T> staged(buffer.size(), host_from_float<T>(0.f));
    for (size_t i = 0; i < host.size(); ++i) {
      staged[offset + i] = host_from_float<T>(host[i]);
      values[i] = static_cast<double>(to_float(staged[offset + i]));
    }
    buffer.upload(staged);
  }
  DeviceBuffer<T> buffer;  // offset + n + 1 elements
  int64_t offset;
  int64_t n;
  Values values;

  T* ptr() { return buffer.data() + offset; }
  void poison() { buffer.poison(); }
  std::vector<T> download() const {
    const std::vector<T> all = buffer.download();
    return std::vector<T>(all.begin() + offset, all.begin() + offset + n);
  }
  std::vector<float> download_floats() const {
    const std::vector<T> mine = download();
    std::vector<float> out(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) out[i] = to_float(mine[i]);
    return out;
  }
};

template <typename T>
DeviceArray<T> device_array(const std::vector<float>& host, int64_t offset = 0) {
  return DeviceArray<T>(host, offset);
}

// An output array, poisoned.
template <typename T>
DeviceArray<T> poisoned_array(int64_t n, int64_t offset = 0) {
  DeviceArray<T> a = device_array<T>(std::vector<float>(static_cast<size_t>(n), 0.f), offset);
  a.poison();
  return a;
}

std::string shape(const std::string& what, std::initializer_list<int64_t> sizes, int64_t offset = 0) {
  std::string s = what;
  for (int64_t v : sizes) s += (s == what ? "=" : "×") + std::to_string(v);
  return offset ? s + " +" + std::to_string(offset) : s;
}

// ---- RMSNorm ---------------------------------------------------------------------------

template <typename T>
void check_rms_norm(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  struct Case {
    int64_t n, d;
  };
  for (const Case c : {Case{37, 1}, Case{37, 3}, Case{5000, 768}, Case{300, 512}, Case{41, 1000}, Case{8, 13000}}) {
    const int64_t n = c.n, d = c.d;
    // With d = 1, dx = rstd·g·dy·eps/(x² + eps): with a small eps a difference of nearly equal
    // numbers that fp32 cannot resolve (the CPU's fp32 build neither). A large eps keeps that
    // case about indexing.
    const float eps = d == 1 ? 1.f : 1e-5f;
    const std::string detail = shape("n×d", {n, d});
    std::vector<float> gain = in.normal(size_t(d), 0.2);
    for (float& v : gain) v += 1.f;
    auto x = device_array<T>(in.normal(size_t(n * d), 2.0)), g = device_array<T>(gain);
    auto y = poisoned_array<T>(n * d);
    DeviceBuffer<float> rstd(static_cast<size_t>(n));
    rstd.poison();
    rms_norm_forward<T>(x.ptr(), g.ptr(), eps, n, d, y.ptr(), rstd.data(), nullptr);
    sync();
    Values y_ref, rstd_ref;
    reference::rms_norm_forward(x.values, g.values, eps, n, d, y_ref, rstd_ref);
    const std::vector<float> y_gpu = y.download_floats(), rstd_gpu = rstd.download();
    r.add("rms_norm.forward.y" + t, detail, relative_error(y_gpu, y_ref), tolerance_of<T>());
    r.add("rms_norm.forward.rstd" + t, detail, relative_error(rstd_gpu, rstd_ref), kFp32Tolerance);

    // apply: y from the saved rstd (the GPU's own), compared with the reference on that rstd.
    const Values rstd_saved = as_values(rstd_gpu);
    auto y2 = poisoned_array<T>(n * d);
    rms_norm_apply<T>(x.ptr(), g.ptr(), rstd.data(), n, d, y2.ptr(), nullptr);
    sync();
    Values y2_ref;
    reference::rms_norm_apply(x.values, g.values, rstd_saved, n, d, y2_ref);
    r.add("rms_norm.apply" + t, detail, relative_error(y2.download_floats(), y2_ref), tolerance_of<T>());

    // backward: dx written, dg accumulated onto random values; twice for the same bytes.
    auto dy = device_array<T>(in.normal(static_cast<size_t>(n * d)));
    const std::vector<float> dg0 = in.normal(static_cast<size_t>(d));
    DeviceBuffer<float> dg(dg0);
    auto dx = poisoned_array<T>(n * d);
    const size_t ws_bytes = rms_norm_backward_workspace_bytes(n, d);
    DeviceBuffer<char> ws(ws_bytes);
    ws.poison();
    rms_norm_backward<T>(dy.ptr(), x.ptr(), g.ptr(), rstd.data(), n, d, dx.ptr(), dg.data(), ws.data(), ws_bytes,
                         nullptr);
    sync();
    Values dx_ref, dg_ref = as_values(dg0);
    reference::rms_norm_backward(dy.values, x.values, g.values, rstd_saved, n, d, dx_ref, dg_ref);
    const std::vector<T> dx_first = dx.download();
    const std::vector<float> dg_first = dg.download();
    r.add("rms_norm.backward.dx" + t, detail, relative_error(dx.download_floats(), dx_ref), tolerance_of<T>());
    r.add("rms_norm.backward.dg(+=)" + t, detail, relative_error(dg_first, dg_ref), kFp32Tolerance);
    dg.upload(dg0);
    dx.poison();
    ws.poison();
    rms_norm_backward<T>(dy.ptr(), x.ptr(), g.ptr(), rstd.data(), n, d, dx.ptr(), dg.data(), ws.data(), ws_bytes,
                         nullptr);
    sync();
    r.add("rms_norm.backward repeat, bitwise" + t, detail,
          differing_fraction(dg.download(), dg_first) + differing_fraction(dx.download(), dx_first), 0.0);

    // with the residual branch's gradient added before rounding (a block's backward): dx +
    // add against the reference; dg as without; in fp32 the bits of dx then a separate add
    auto add = device_array<T>(in.normal(static_cast<size_t>(n * d)));
    auto dxa = poisoned_array<T>(n * d);
    DeviceBuffer<float> dga(dg0);
    rms_norm_backward<T>(dy.ptr(), x.ptr(), g.ptr(), rstd.data(), n, d, dxa.ptr(), dga.data(), ws.data(), ws_bytes,
                         nullptr, add.ptr());
    sync();
    Values dxa_ref = dx_ref;
    for (size_t i = 0; i < dxa_ref.size(); ++i) dxa_ref[i] += add.values[i];
    const std::vector<T> dxa_got = dxa.download();
    r.add("rms_norm.backward.dx + add" + t, detail, relative_error(dxa.download_floats(), dxa_ref), tolerance_of<T>());
    double add_differ = differing_fraction(dga.download(), dg_first);
    if constexpr (std::is_same_v<T, float>) {
      std::vector<float> two_calls(dx_first.size());
      for (size_t i = 0; i < two_calls.size(); ++i) two_calls[i] = dx_first[i] + static_cast<float>(add.values[i]);
      add_differ += differing_fraction(dxa_got, two_calls);
    }
    r.add("rms_norm.backward + add: dg (and fp32 dx) as two calls, bitwise" + t, detail, add_differ, 0.0);

    if (d == 768 || d == 512) {
      // The same inputs off the 16-byte grid (one element at a time) give the same bytes:
      // the packs are summed in the same order on both paths.
      auto xo = device_array<T>(std::vector<float>(x.values.begin(), x.values.end()), 1);
      auto go = device_array<T>(std::vector<float>(g.values.begin(), g.values.end()), 1);
      auto yo = poisoned_array<T>(n * d, 1);
      DeviceBuffer<float> rstd_o(static_cast<size_t>(n));
      rstd_o.poison();
      rms_norm_forward<T>(xo.ptr(), go.ptr(), eps, n, d, yo.ptr(), rstd_o.data(), nullptr);
      auto dyo = device_array<T>(std::vector<float>(dy.values.begin(), dy.values.end()), 1);
      auto dxo = poisoned_array<T>(n * d, 1);
      DeviceBuffer<float> dgo(dg0);
      rms_norm_backward<T>(dyo.ptr(), xo.ptr(), go.ptr(), rstd.data(), n, d, dxo.ptr(), dgo.data(), ws.data(),
                           ws_bytes, nullptr);
      // rstd not kept: y alone.
      auto yn = poisoned_array<T>(n * d);
      rms_norm_forward<T>(x.ptr(), g.ptr(), eps, n, d, yn.ptr(), nullptr, nullptr);
      sync();
      const double differ = differing_fraction(yo.download(), y.download()) +
                            differing_fraction(rstd_o.download(), rstd_gpu) +
                            differing_fraction(dxo.download(), dx_first) + differing_fraction(dgo.download(), dg_first);
      r.add("rms_norm packed = one-by-one, bitwise" + t, detail + " +1", differ, 0.0);
      r.add("rms_norm.forward.y (no rstd)" + t, detail, differing_fraction(yn.download(), y.download()), 0.0);
      r.add("rms_norm.backward small workspace refused" + t, detail, refused([&] {
              rms_norm_backward<T>(dy.ptr(), x.ptr(), g.ptr(), rstd.data(), n, d, dx.ptr(), dg.data(), ws.data(),
                                   ws_bytes - 1, nullptr);
            }),
            0.0);
    }
  }
}

// ---- RoPE ------------------------------------------------------------------------------

template <typename T>
void check_rope(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  const double theta = 10000.0;
  struct Case {
    int batch, seq, heads, hd, extra_columns, pos0, max_positions;
  };
  for (const Case c : {Case{2, 37, 3, 64, 10, 5, 64}, Case{1, 5, 2, 6, 0, 1, 8}, Case{3, 16, 12, 64, 1536, 0, 16}}) {
    const int64_t rows = int64_t(c.batch) * c.seq, ld = int64_t(c.heads) * c.hd + c.extra_columns;
    Values cos_ref, sin_ref;
    reference::rope_table(c.max_positions, c.hd, theta, cos_ref, sin_ref);
    const DeviceBuffer<float> cos(std::vector<float>(cos_ref.begin(), cos_ref.end()));
    const DeviceBuffer<float> sin(std::vector<float>(sin_ref.begin(), sin_ref.end()));
    for (const bool inverse : {false, true}) {
      const std::string detail = shape("rows×ld", {rows, ld}) + " hd=" + std::to_string(c.hd) +
                                 " pos0=" + std::to_string(c.pos0) + (inverse ? " inverse" : "");
      auto x = device_array<T>(in.normal(static_cast<size_t>(rows * ld)));
      Values ref = x.values;  // columns past heads·hd must stay as they are
      reference::rope_apply(ref, rows, ld, c.heads, c.seq, c.pos0, c.max_positions, c.hd, theta, inverse);
      rope_apply<T>(x.ptr(), rows, ld, c.heads, c.seq, c.pos0, cos.data(), sin.data(), c.hd, inverse, nullptr);
      sync();
      r.add("rope" + t, detail, relative_error(x.download_floats(), ref), tolerance_of<T>());
    }
  }
}

// ---- SwiGLU ----------------------------------------------------------------------------

template <typename T>
void check_swiglu(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  struct Case {
    int64_t n, f, offset;
  };
  for (const Case c : {Case{37, 1, 0}, Case{37, 3, 0}, Case{64, 2048, 0}, Case{29, 1000, 0}, Case{64, 2048, 1}}) {
    const int64_t n = c.n, f = c.f;
    const std::string detail = shape("n×f", {n, f}, c.offset);
    auto a = device_array<T>(in.normal(size_t(n * 2 * f), 2.0), c.offset);
    auto h = poisoned_array<T>(n * f, c.offset);
    swiglu_forward<T>(a.ptr(), n, f, h.ptr(), nullptr);
    sync();
    Values h_ref;
    reference::swiglu_forward(a.values, n, f, h_ref);
    r.add("swiglu.forward" + t, detail, relative_error(h.download_floats(), h_ref), tolerance_of<T>());

    auto dh = device_array<T>(in.normal(static_cast<size_t>(n * f)), c.offset);
    auto da = poisoned_array<T>(n * 2 * f, c.offset);
    swiglu_backward<T>(a.ptr(), dh.ptr(), n, f, da.ptr(), nullptr);
    sync();
    Values da_ref;
    reference::swiglu_backward(a.values, dh.values, n, f, da_ref);
    r.add("swiglu.backward" + t, detail, relative_error(da.download_floats(), da_ref), tolerance_of<T>());

    // The routed experts' gated backward: the gates' gradient Σ_j dh·h with h rebuilt from a,
    // and da of dh's rows scaled by s (each rounded as scale_rows rounds it). Against the
    // reference (h, the scaled rows: the device's rounded ones), and the bits of the three
    // calls it fuses (row_dot over the forward's h, scale_rows, swiglu_backward), dh left as it was.
    const std::vector<float> s_host = in.normal(static_cast<size_t>(n));
    const DeviceBuffer<float> s(s_host);
    const std::vector<T> dh_before = dh.download();
    auto scaled = poisoned_array<T>(n * f, c.offset);
    auto da_three = poisoned_array<T>(n * 2 * f, c.offset), da_fused = poisoned_array<T>(n * 2 * f, c.offset);
    DeviceBuffer<float> dgate_three(static_cast<size_t>(n)), dgate_fused(static_cast<size_t>(n));
    row_dot<T>(dh.ptr(), h.ptr(), n, f, dgate_three.data(), nullptr);
    scale_rows<T>(dh.ptr(), s.data(), n, f, scaled.ptr(), nullptr);
    swiglu_backward<T>(a.ptr(), scaled.ptr(), n, f, da_three.ptr(), nullptr);
    swiglu_backward_gated<T>(a.ptr(), dh.ptr(), s.data(), n, f, da_fused.ptr(), dgate_fused.data(), nullptr);
    sync();
    const std::vector<float> scaled_host = scaled.download_floats(), h_host = h.download_floats();
    Values da_scaled_ref, dgate_ref(static_cast<size_t>(n), 0.0);
    reference::swiglu_backward(a.values, Values(scaled_host.begin(), scaled_host.end()), n, f, da_scaled_ref);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < f; ++j) dgate_ref[i] += dh.values[i * f + j] * double(h_host[i * f + j]);
    r.add("swiglu.backward gated: da" + t, detail, relative_error(da_fused.download_floats(), da_scaled_ref),
          tolerance_of<T>());
    r.add("swiglu.backward gated: dgate" + t, detail,
          relative_error(dgate_fused.download(), dgate_ref), kFp32Tolerance);
    r.add("swiglu.backward gated = row_dot + scale_rows + backward, dh kept (mismatches)" + t, detail,
          differing_elements(da_fused.download(), da_three.download()) +
              differing_elements(dgate_fused.download(), dgate_three.download()) +
              differing_elements(dh.download(), dh_before),
          0.0);
  }
}

// ---- Cross-entropy ---------------------------------------------------------------------

// Targets uniform in [0, vocab); every 4th row unscored (−1 or −100).
std::vector<int32_t> ce_targets(CheckInputs& in, int64_t n, int64_t vocab) {
  std::vector<int32_t> t = in.uniform_int(size_t(n), static_cast<int32_t>(vocab));
  for (int64_t r = 3; r < n; r += 4) t[r] = (r / 4) % 2 ? -1 : -100;
  return t;
}

// The reduce over row_loss: loss sum and scored count, checked, and repeated for the bytes.
// loss_tolerance: kDoubleSumTolerance when loss_ref sums the very floats the GPU sums,
// kFp32Tolerance when it sums the reference's own row losses.
void check_ce_reduce(const float* row_loss, const int32_t* targets, int64_t n, double loss_ref, int64_t count_ref,
                     double loss_tolerance, const std::string& name, const std::string& detail, Results& r) {
  const size_t ws_bytes = cross_entropy_reduce_workspace_bytes(n);
  DeviceBuffer<char> ws(ws_bytes);
  DeviceBuffer<double> loss(1);
  DeviceBuffer<int64_t> count(1);
  std::vector<double> first_loss;
  std::vector<int64_t> first_count;
  for (int run = 0; run < 2; ++run) {
    if (ws_bytes) ws.poison();
    loss.poison();
    count.poison();
    cross_entropy_reduce(row_loss, targets, n, loss.data(), count.data(), ws.data(), ws_bytes, nullptr);
    sync();
    if (run == 0) {
      first_loss = loss.download();
      first_count = count.download();
      r.add(name + ".loss_sum", detail, relative_error(first_loss, Values{loss_ref}), loss_tolerance);
      r.add(name + ".count", detail,
            std::abs(double(first_count[0] - count_ref)) / std::max<double>(1.0, double(count_ref)), 0.0);
    } else {
      r.add(name + " repeat, bitwise", detail,
            differing_fraction(loss.download(), first_loss) + differing_fraction(count.download(), first_count), 0.0);
    }
  }
}

template <typename T>
void check_cross_entropy(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  struct Case {
    int64_t n, vocab;
  };
  for (const Case c : {Case{67, 256}, Case{33, 1000}, Case{9, 65536}}) {
    const int64_t n = c.n, vocab = c.vocab;
    const std::vector<int32_t> targets = ce_targets(in, n, vocab);
    const DeviceBuffer<int32_t> d_targets(targets);
    for (const bool write_grad : {true, false}) {
      const std::string detail = shape("n×vocab", {n, vocab}) + (write_grad ? " grad" : "");
      auto logits = device_array<T>(in.normal(size_t(n * vocab), 3.0));
      const std::vector<T> logits_in = logits.download();
      DeviceBuffer<float> row_loss(static_cast<size_t>(n));
      row_loss.poison();
      cross_entropy_forward<T>(logits.ptr(), d_targets.data(), n, vocab, write_grad, row_loss.data(), nullptr);
      sync();
      Values ref = logits.values, loss_ref;
      reference::cross_entropy_rows(ref, targets, n, vocab, write_grad, loss_ref);
      r.add("cross_entropy.row_loss" + t, detail, relative_error(row_loss.download(), loss_ref), kFp32Tolerance);
      if (write_grad)
        r.add("cross_entropy.grad" + t, detail, relative_error(logits.download_floats(), ref), tolerance_of<T>());
      else
        r.add("cross_entropy logits kept, bitwise" + t, detail, differing_fraction(logits.download(), logits_in), 0.0);
      // The reduce on the GPU's own row losses against Σ of the reference's.
      double sum_ref = 0;
      for (double v : loss_ref) sum_ref += v;
      int64_t count_ref = 0;
      for (int32_t v : targets) count_ref += v >= 0;
      check_ce_reduce(row_loss.data(), d_targets.data(), n, sum_ref, count_ref, kFp32Tolerance,
                      "cross_entropy.forward+reduce" + t, detail, r);
    }
  }
}

// The reduce alone over many rows (several partial blocks), and over none.
void check_cross_entropy_reduce(CheckInputs& in, Results& r) {
  for (const int64_t n : {int64_t{10007}, int64_t{0}}) {
    std::vector<float> loss = in.normal(static_cast<size_t>(n));
    const std::vector<int32_t> targets = ce_targets(in, n, 256);
    double sum_ref = 0;
    int64_t count_ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      loss[i] = targets[i] >= 0 ? std::abs(loss[i]) * 5.f : 0.f;
      sum_ref += loss[i];
      count_ref += targets[i] >= 0;
    }
    const DeviceBuffer<float> d_loss = to_device(loss);
    const DeviceBuffer<int32_t> d_targets = to_device(targets);
    check_ce_reduce(d_loss.data(), d_targets.data(), n, sum_ref, count_ref, kDoubleSumTolerance, "cross_entropy.reduce",
                    shape("n", {n}), r);
  }
}

// ---- Embedding -------------------------------------------------------------------------

template <typename T>
void check_embedding(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  enum class Tokens { skewed, lower_half, uniform, one_token };
  struct Case {
    int64_t vocab, n, d;
    Tokens tokens;
  };
  for (const Case c : {Case{256, 5000, 768, Tokens::skewed}, Case{1000, 37, 3, Tokens::lower_half},
                       Case{65536, 4096, 1, Tokens::uniform}, Case{50, 3000, 1000, Tokens::one_token}}) {
    const int64_t vocab = c.vocab, n = c.n, d = c.d;
    const std::string detail = shape("vocab×n×d", {vocab, n, d});
    // skewed: 40% one token (a run over many chunks), the rest in [0, 128) (tokens ≥ 128
    // never used); lower_half: tokens < vocab/2 only; one_token: every row token 7.
    std::vector<int32_t> tokens = in.uniform_int(size_t(n), static_cast<int32_t>(vocab));
    const std::vector<int32_t> coin = in.uniform_int(size_t(n), 10);
    for (int64_t i = 0; i < n; ++i) {
      if (c.tokens == Tokens::skewed) tokens[i] = coin[i] < 4 ? 32 : tokens[i] % 128;
      if (c.tokens == Tokens::lower_half) tokens[i] %= static_cast<int32_t>(vocab / 2);
      if (c.tokens == Tokens::one_token) tokens[i] = 7;
    }
    const DeviceBuffer<int32_t> d_tokens(tokens);

    auto w = device_array<T>(in.normal(static_cast<size_t>(vocab * d)));
    auto x = poisoned_array<T>(n * d);
    embedding_forward<T>(w.ptr(), d_tokens.data(), n, d, x.ptr(), nullptr);
    sync();
    Values x_ref;
    reference::embedding_forward(w.values, tokens, vocab, d, x_ref);
    r.add("embedding.forward" + t, detail, relative_error(x.download_floats(), x_ref), tolerance_of<T>());

    auto dx = device_array<T>(in.normal(static_cast<size_t>(n * d)));
    const std::vector<float> dw0 = in.normal(static_cast<size_t>(vocab * d));
    DeviceBuffer<float> dw(dw0);
    const size_t ws_bytes = embedding_backward_workspace_bytes(n, vocab, d);
    DeviceBuffer<char> ws(ws_bytes);
    ws.poison();
    embedding_backward<T>(dx.ptr(), d_tokens.data(), n, vocab, d, dw.data(), ws.data(), ws_bytes, nullptr);
    sync();
    Values dw_ref = as_values(dw0);
    reference::embedding_backward(dx.values, tokens, vocab, d, dw_ref);
    const std::vector<float> dw_first = dw.download();
    r.add("embedding.backward.dw(+=)" + t, detail, relative_error(dw_first, dw_ref), kFp32Tolerance);
    dw.upload(dw0);
    ws.poison();
    embedding_backward<T>(dx.ptr(), d_tokens.data(), n, vocab, d, dw.data(), ws.data(), ws_bytes, nullptr);
    sync();
    r.add("embedding.backward repeat, bitwise" + t, detail, differing_fraction(dw.download(), dw_first), 0.0);
    r.add("embedding.backward small workspace refused" + t, detail, refused([&] {
            embedding_backward<T>(dx.ptr(), d_tokens.data(), n, vocab, d, dw.data(), ws.data(), ws_bytes - 1, nullptr);
          }),
          0.0);
  }
}

// ---- add, add2, scale, fill, convert ---------------------------------------------------

template <typename T>
void check_elementwise_ops(CheckInputs& in, Results& r) {
  const std::string t = "<" + type_name<T>() + ">";
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000003}})
    for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
      const std::string detail = shape("n", {n}, offset);
      {
        auto y = device_array<T>(in.normal(static_cast<size_t>(n)), offset), x = device_array<T>(in.normal(static_cast<size_t>(n)), offset);
        add_inplace<T>(y.ptr(), x.ptr(), n, nullptr);
        sync();
        Values ref(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ref[i] = y.values[i] + x.values[i];
        r.add("add_inplace" + t, detail, relative_error(y.download_floats(), ref), tolerance_of<T>());
      }
      {
        auto y = device_array<T>(in.normal(static_cast<size_t>(n)), offset), a = device_array<T>(in.normal(static_cast<size_t>(n)), offset),
             b = device_array<T>(in.normal(static_cast<size_t>(n)));
        add2_inplace<T>(y.ptr(), a.ptr(), b.ptr(), n, nullptr);
        sync();
        Values ref(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ref[i] = y.values[i] + (a.values[i] + b.values[i]);
        r.add("add2_inplace" + t, detail, relative_error(y.download_floats(), ref), tolerance_of<T>());
      }
      {
        const float f = 0.37f;
        auto x = device_array<T>(in.normal(static_cast<size_t>(n)), offset);
        auto out = poisoned_array<T>(n, offset);
        scale<T>(x.ptr(), f, out.ptr(), n, nullptr);
        scale<T>(x.ptr(), f, x.ptr(), n, nullptr);  // in place
        sync();
        Values ref(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ref[i] = x.values[i] * f;
        r.add("scale" + t, detail, relative_error(out.download_floats(), ref), tolerance_of<T>());
        r.add("scale in place = out of place, bitwise" + t, detail, differing_fraction(x.download(), out.download()),
              0.0);
      }
      {
        auto x = poisoned_array<T>(n, offset);
        fill<T>(x.ptr(), -3.5f, n, nullptr);
        sync();
        r.add("fill" + t, detail, relative_error(x.download_floats(), Values(size_t(n), -3.5)), 0.0);
      }
    }
}

// zero_ranges: 300 ranges of one buffer of random values (more than one launch takes), from
// one 16-byte word to 100 000 floats, some adjacent, some empty: exactly those zeroed, every
// other value untouched; a range off the 16-byte grid refused.
void check_zero_ranges(CheckInputs& in, Results& r) {
  const std::vector<float> host = in.normal(size_t(1) << 22);
  DeviceBuffer<float> buffer(host);
  std::vector<DeviceByteRange> ranges;
  std::vector<float> expected = host;
  size_t at = 0;
  for (int i = 0; i < 300; ++i) {
    const size_t floats = i % 50 == 0 ? 0 : i % 7 == 0 ? 100000 : size_t(4) * (1 + (i * 37) % 300);
    if (at + floats > host.size()) break;
    ranges.push_back({buffer.data() + at, int64_t(floats * sizeof(float))});
    std::fill(expected.begin() + at, expected.begin() + at + floats, 0.f);
    at += floats + (i % 3 == 0 ? 0 : size_t(4) * (i % 5));  // adjacent, or a gap of whole words
  }
  zero_ranges(ranges, nullptr);
  sync();
  r.add("zero_ranges: zeroed and untouched, bitwise", std::to_string(ranges.size()) + " ranges",
        differing_fraction(buffer.download(), expected), 0.0);
  r.add("zero_ranges refuses a range off the 16-byte grid (accepted)", "", refused([&] {
          zero_ranges({{buffer.data() + 1, 16}}, nullptr);
        }),
        0.0);
}

// copy_ranges and add_ranges: 300 ranges (more than one launch takes), from one float to
// 100 000, some adjacent, some empty, a few off the 16-byte grid (copied in 4-byte words, added
// by an add of their own), sources spread over a second buffer: exactly the destinations written,
// bitwise the host's copy and the host's f32 sum, every other value untouched.
void check_copy_and_add_ranges(CheckInputs& in, Results& r) {
  const std::vector<float> dst_host = in.normal(size_t(1) << 22), src_host = in.normal(size_t(1) << 22);
  DeviceBuffer<float> copy_dst(dst_host), add_dst(dst_host), src(src_host);
  std::vector<DeviceCopyRange> copies;
  std::vector<DeviceAddRange> adds;
  std::vector<float> copied = dst_host, added = dst_host;
  size_t at = 0;
  int off_grid = 0;
  for (int i = 0; i < 300; ++i) {
    size_t floats = i % 50 == 0 ? 0 : i % 7 == 0 ? 100000 : size_t(4) * (1 + (i * 37) % 300);
    size_t shift = 0;
    if (i % 41 == 5) {  // off the grid: an odd length, or a start one float past a word
      floats += 1;
      shift = i % 2;
      ++off_grid;
    }
    at += shift;
    if (at + floats > dst_host.size()) break;
    const size_t from = (size_t(i) * 7919) % ((src_host.size() - floats - 1) / 4) * 4 + shift;
    copies.push_back({copy_dst.data() + at, src.data() + from, int64_t(floats * sizeof(float))});
    adds.push_back({add_dst.data() + at, src.data() + from, int64_t(floats)});
    for (size_t j = 0; j < floats; ++j) {
      copied[at + j] = src_host[from + j];
      added[at + j] = dst_host[at + j] + src_host[from + j];
    }
    at = (at + floats + 3) / 4 * 4 + (i % 3 == 0 ? 0 : size_t(4) * (i % 5));  // back on the grid
  }
  copy_ranges(copies, nullptr);
  add_ranges(adds, nullptr);
  sync();
  const std::string detail = std::to_string(copies.size()) + " ranges, " + std::to_string(off_grid) + " off the grid";
  r.add("copy_ranges: copied and untouched, bitwise", detail, differing_fraction(copy_dst.download(), copied), 0.0);
  r.add("add_ranges: f32 sums and untouched, bitwise", detail, differing_fraction(add_dst.download(), added), 0.0);
}

// convert<S, D>, with the source and destination on and off the 16-byte grid.
template <typename S, typename D>
void check_convert(CheckInputs& in, Results& r) {
  const std::string name = "convert<" + type_name<S>() + "→" + type_name<D>() + ">";
  // Exact unless rounding to bf16.
  const double tolerance = std::is_same_v<D, bf16> && !std::is_same_v<S, bf16> ? kBf16Tolerance : 0.0;
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000003}})
    for (const int64_t src_offset : {int64_t{0}, int64_t{1}})
      for (const int64_t dst_offset : {int64_t{0}, int64_t{1}}) {
        auto src = device_array<S>(in.normal(static_cast<size_t>(n)), src_offset);
        auto dst = poisoned_array<D>(n, dst_offset);
        convert<S, D>(src.ptr(), dst.ptr(), n, nullptr);
        sync();
        r.add(name, shape("n", {n}) + " src+" + std::to_string(src_offset) + " dst+" + std::to_string(dst_offset),
              relative_error(dst.download_floats(), src.values), tolerance);
      }
}

// ---- AdamW -----------------------------------------------------------------------------

// v placed `offset` elements into a zeroed array of offset + v.size() + 1 (never empty).
std::vector<float> staged(const std::vector<float>& v, int64_t offset) {
  std::vector<float> out(v.size() + offset + 1, 0.f);
  std::copy(v.begin(), v.end(), out.begin() + offset);
  return out;
}

// Host copy of one tensor's state, advanced by the reference beside the device.
struct AdamWHostTensor {
  std::vector<float> param, m, v;
  int64_t offset;  // elements past the 16-byte grid on the device
  bool weight_decay, has_compute;
};

template <typename C>
void check_adamw(CheckInputs& in, Results& r) {
  const std::string t = "<compute " + type_name<C>() + ">";
  const double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  struct Spec {
    int64_t numel, offset;
    bool weight_decay, has_compute;
  };
  const std::vector<Spec> specs = {{1, 0, true, false},     {3, 0, false, true},     {4096, 0, true, true},
                                   {4097, 1, true, true},   {100003, 0, false, true}, {12289, 0, true, true},
                                   {0, 0, true, true}};
  std::vector<AdamWHostTensor> host;
  std::vector<DeviceBuffer<float>> params, grads, ms, vs;
  std::vector<DeviceBuffer<C>> computes;
  std::vector<AdamWTensor> tensors;
  for (const Spec& s : specs) {
    AdamWHostTensor h{in.normal(static_cast<size_t>(s.numel)), in.normal(size_t(s.numel), 0.01), in.normal(static_cast<size_t>(s.numel)),
                      s.offset, s.weight_decay, s.has_compute};
    for (float& x : h.v) x = 1e-4f * x * x;  // second moments are ≥ 0
    host.push_back(h);
    params.push_back(DeviceBuffer<float>(staged(h.param, s.offset)));
    grads.push_back(DeviceBuffer<float>(static_cast<size_t>(s.numel + s.offset + 1)));
    ms.push_back(DeviceBuffer<float>(staged(h.m, s.offset)));
    vs.push_back(DeviceBuffer<float>(staged(h.v, s.offset)));
    computes.push_back(DeviceBuffer<C>(static_cast<size_t>(s.numel + s.offset + 1)));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const int64_t o = specs[i].offset;
    tensors.push_back({params[i].data() + o, grads[i].data() + o, ms[i].data() + o, vs[i].data() + o,
                       specs[i].has_compute ? static_cast<void*>(computes[i].data() + o) : nullptr, specs[i].numel,
                       specs[i].weight_decay ? 1 : 0});
  }
  AdamWPlan plan(tensors, std::is_same_v<C, bf16>);
  DeviceBuffer<char> plan_memory(plan.device_bytes());
  plan.upload(plan_memory.data(), nullptr);

  // Step 2 clips: the update takes each gradient as the CPU's scale_grads leaves it (a float
  // product) and must leave the device's gradients as they were.
  double grads_changed = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    const float grad_scale = step == 2 ? 0.37f : 1.f;
    std::vector<std::vector<float>> uploaded;
    for (size_t i = 0; i < specs.size(); ++i) {
      std::vector<float> g = in.normal(size_t(specs[i].numel), 0.1);
      uploaded.push_back(staged(g, specs[i].offset));
      grads[i].upload(uploaded.back());
      computes[i].poison();
      for (float& x : g) x *= grad_scale;
      AdamWHostTensor& h = host[i];
      const double decay = h.weight_decay ? 1.0 - lr * weight_decay : 1.0;
      reference::adamw_step(h.param.data(), g.data(), h.m.data(), h.v.data(), specs[i].numel, lr, beta1, beta2, eps,
                            decay, step);
    }
    plan.step(lr, beta1, beta2, eps, weight_decay, step, nullptr, grad_scale);
    sync();
    for (size_t i = 0; i < specs.size(); ++i) grads_changed += differing_elements(grads[i].download(), uploaded[i]);
  }
  r.add("adamw with a clipping factor: gradients left as they were (changed)" + t, "", grads_changed, 0.0);
  // The CPU's arithmetic in the CPU's order: the same bits.
  for (size_t i = 0; i < specs.size(); ++i) {
    const AdamWHostTensor& h = host[i];
    const int64_t o = specs[i].offset, numel = specs[i].numel;
    const std::string detail = shape("numel", {numel}, o) + (h.weight_decay ? " decay" : "");
    auto part = [o, numel](const std::vector<float>& all) {
      return std::vector<float>(all.begin() + o, all.begin() + o + numel);
    };
    const std::vector<float> p = part(params[i].download());
    r.add("adamw.param, bitwise vs CPU" + t, detail, differing_fraction(p, h.param), 0.0);
    r.add("adamw.m, bitwise vs CPU" + t, detail, differing_fraction(part(ms[i].download()), h.m), 0.0);
    r.add("adamw.v, bitwise vs CPU" + t, detail, differing_fraction(part(vs[i].download()), h.v), 0.0);
    if (h.has_compute) {
      const std::vector<C> all = computes[i].download();
      const std::vector<C> copy(all.begin() + o, all.begin() + o + numel);
      std::vector<C> expected(h.param.size());
      for (size_t k = 0; k < expected.size(); ++k) expected[k] = host_from_float<C>(h.param[k]);
      r.add("adamw.compute copy, bitwise" + t, detail, differing_fraction(copy, expected), 0.0);
    }
  }
  r.add("adamw plan refuses compute == param" + t, "", refused([&] {
          std::vector<AdamWTensor> bad = tensors;
          bad[2].compute = bad[2].param;
          AdamWPlan refused_plan(bad, false);
        }),
        0.0);
}

// ---- Gradient norm and clipping --------------------------------------------------------

void check_grad_norm(CheckInputs& in, Results& r) {
  struct Spec {
    int64_t numel, offset;
  };
  const std::vector<Spec> specs = {{1, 0}, {5, 0}, {4096, 0}, {4097, 1}, {1000003, 0}, {0, 0}};
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> grads;
  std::vector<GradNormTensor> tensors;
  auto upload_all = [&] {
    for (size_t i = 0; i < specs.size(); ++i) grads[i].upload(staged(host[i], specs[i].offset));
  };
  auto download_all = [&] {
    std::vector<float> all;
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::vector<float> g = grads[i].download();
      all.insert(all.end(), g.begin() + specs[i].offset, g.begin() + specs[i].offset + specs[i].numel);
    }
    return all;
  };
  double sum_ref = 0.0;
  std::vector<float> flat;  // every gradient, in order
  for (const Spec& s : specs) {
    host.push_back(in.normal(size_t(s.numel), 0.01));
    for (float g : host.back()) sum_ref += static_cast<double>(g) * g;
    flat.insert(flat.end(), host.back().begin(), host.back().end());
    grads.push_back(DeviceBuffer<float>(static_cast<size_t>(s.numel + s.offset + 1)));
  }
  for (size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({specs[i].numel ? grads[i].data() + specs[i].offset : nullptr, specs[i].numel});
  upload_all();
  GradNormPlan plan(tensors);
  DeviceBuffer<char> plan_memory(plan.device_bytes());
  plan.upload(plan_memory.data(), nullptr);

  DeviceBuffer<double> sum_sq(1);
  sum_sq.poison();
  plan.sum_squares(sum_sq.data(), nullptr);
  sync();
  const std::vector<double> first = sum_sq.download();
  r.add("grad_norm.sum_squares", "", relative_error(first, Values{sum_ref}), kDoubleSumTolerance);
  sum_sq.poison();
  plan.sum_squares(sum_sq.data(), nullptr);
  sync();
  r.add("grad_norm.sum_squares repeat, bitwise", "", differing_fraction(sum_sq.download(), first), 0.0);

  // clip to half the norm: every g times float(max_norm / norm), as the CPU does.
  const double norm = std::sqrt(first[0]);
  {
    const double max_norm = 0.5 * norm;
    const float s = static_cast<float>(max_norm / norm);
    std::vector<float> expected = flat;
    for (float& g : expected) g *= s;
    plan.clip(sum_sq.data(), max_norm, nullptr);
    sync();
    r.add("grad_norm.clip, bitwise", "max_norm = norm/2", differing_fraction(download_all(), expected), 0.0);
  }
  for (const double max_norm : {2.0 * norm, 0.0}) {  // above the norm, and "never": untouched
    upload_all();
    plan.clip(sum_sq.data(), max_norm, nullptr);
    sync();
    r.add("grad_norm.clip no-op, bitwise", max_norm > 0 ? "max_norm = 2·norm" : "max_norm = 0",
          differing_fraction(download_all(), flat), 0.0);
  }
  {
    upload_all();
    std::vector<float> expected = flat;
    for (float& g : expected) g *= 0.37f;
    plan.scale(0.37f, nullptr);
    sync();
    r.add("grad_norm.scale, bitwise", "s = 0.37", differing_fraction(download_all(), expected), 0.0);
  }
  {
    GradNormPlan none(std::vector<GradNormTensor>{});
    sum_sq.poison();
    none.sum_squares(sum_sq.data(), nullptr);
    sync();
    r.add("grad_norm.sum_squares of nothing", "", std::abs(sum_sq.download()[0]), 0.0);
  }
}

}  // namespace

void check_elementwise(CheckInputs& in, std::vector<OpCheck>& out) {
  Results r(out);
  check_rms_norm<float>(in, r);
  check_rms_norm<bf16>(in, r);
  check_rope<float>(in, r);
  check_rope<bf16>(in, r);
  check_swiglu<float>(in, r);
  check_swiglu<bf16>(in, r);
  check_cross_entropy<float>(in, r);
  check_cross_entropy<bf16>(in, r);
  check_cross_entropy_reduce(in, r);
  check_embedding<float>(in, r);
  check_embedding<bf16>(in, r);
  check_elementwise_ops<float>(in, r);
  check_elementwise_ops<bf16>(in, r);
  check_zero_ranges(in, r);
  check_copy_and_add_ranges(in, r);
  check_convert<float, bf16>(in, r);
  check_convert<bf16, float>(in, r);
  check_convert<float, float>(in, r);
  check_convert<bf16, bf16>(in, r);
  check_adamw<bf16>(in, r);
  check_adamw<float>(in, r);
  check_grad_norm(in, r);
}

}  // namespace mok::cuda
