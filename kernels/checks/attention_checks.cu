// Causal flash attention (kernels/flash_attention.h) against the double-precision core
// (core/backend/causal_attention.h), float and bf16, every head width, query counts around
// the tile sizes (1, 17, 128, 300, 1024) and several (batch, head) pairs. bf16 runs are
// compared with the reference on the bf16-rounded inputs. Per shape:
//   o, lse                     forward outputs
//   dq, dk, dv                 backward with the forward's o given (dq and dk are exactly
//                              zero in the reference at S = 1: there the error is taken
//                              relative to the whole dqkv, round-off being all there is)
//   dqkv(o=null)               backward with O recomputed in the workspace
//   bitwise                    a second forward and backward repeat the first bit for bit,
//                              and the o=null backward equals the o-given one bit for bit
//                              (reported: the fraction of elements that differ; must be 0)
#include "kernels/checks/attention_reference.h"
#include "kernels/checks/check_util.h"
#include "kernels/device_buffer.h"
#include "kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

namespace mok::cuda {
namespace {

template <typename T>
std::vector<T> to_element(const std::vector<float>& v);
template <>
std::vector<float> to_element<float>(const std::vector<float>& v) { return v; }
template <>
std::vector<bf16> to_element<bf16>(const std::vector<float>& v) { return to_bf16(v); }
std::vector<float> to_floats(const std::vector<float>& v) { return v; }
std::vector<float> to_floats(const std::vector<bf16>& v) { return from_bf16(v); }

struct AttentionShape {
  int B, S, H;
};

template <typename T>
void check_shape(CheckInputs& in, std::vector<OpCheck>& out, const char* type, int hd, AttentionShape shape) {
  const int B = shape.B, S = shape.S, H = shape.H;
  const size_t d = size_t(H) * hd, rows = size_t(B) * S;
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const double tol = kBf16 ? kBf16Tolerance : kFp32Tolerance;
  const double lse_tol = kBf16 ? kBf16LseTolerance : kFp32Tolerance;
  const std::string name = std::string("attn.") + type + ".hd" + std::to_string(hd) + ".S" + std::to_string(S);

  auto qkv = in.normal(rows * 3 * d), d_o = in.normal(rows * d);
  if (kBf16) {  // the reference sees exactly what the device sees
    qkv = round_bf16(qkv);
    d_o = round_bf16(d_o);
  }
  const AttentionReference ref = attention_reference(qkv, d_o, B, S, H, hd);

  DeviceBuffer<T> dev_qkv(to_element<T>(qkv)), dev_do(to_element<T>(d_o)), dev_o(rows * d), dev_dqkv(rows * 3 * d);
  DeviceBuffer<float> dev_lse(size_t(B) * H * S);
  DeviceBuffer<unsigned char> ws(flash_attention_backward_workspace_bytes(B, S, H, hd));
  auto forward = [&] {
    dev_o.poison();
    dev_lse.poison();
    flash_attention_forward<T>(dev_qkv.data(), B, S, H, hd, dev_o.data(), dev_lse.data(), nullptr);
    MOK_CUDA_CHECK(cudaDeviceSynchronize());
  };
  auto backward = [&](const T* o) {
    dev_dqkv.poison();
    ws.poison();  // the kernels must not rely on the workspace's contents
    flash_attention_backward<T>(dev_qkv.data(), dev_do.data(), dev_lse.data(), o, B, S, H, hd, dev_dqkv.data(),
                                ws.data(), ws.size(), nullptr);
    MOK_CUDA_CHECK(cudaDeviceSynchronize());
    return dev_dqkv.download();
  };

  forward();
  const std::vector<T> o1 = dev_o.download();
  const std::vector<float> lse1 = dev_lse.download();
  out.push_back({name + ".o", relative_error(to_floats(o1), ref.o), tol});
  out.push_back({name + ".lse", relative_error(lse1, ref.lse), lse_tol});

  const std::vector<T> g1 = backward(dev_o.data());
  const std::vector<float> g1f = to_floats(g1);
  const char* parts[3] = {"dq", "dk", "dv"};
  for (int p = 0; p < 3; ++p)
    out.push_back({name + "." + parts[p], part_error(g1f, ref.dqkv, 3 * d, p * d, d), tol});
  const std::vector<T> g0 = backward(nullptr);
  out.push_back({name + ".dqkv(o=null)", relative_error(to_floats(g0), ref.dqkv), tol});

  forward();
  const std::vector<T> o2 = dev_o.download();
  const std::vector<float> lse2 = dev_lse.download();
  const std::vector<T> g2 = backward(dev_o.data());
  const double differ = std::max({differing_fraction(o1, o2), differing_fraction(lse1, lse2),
                                  differing_fraction(g1, g2), differing_fraction(g0, g1)});
  out.push_back({name + ".bitwise", differ, 0.0});
}

template <typename T>
void check_type(CheckInputs& in, std::vector<OpCheck>& out, const char* type) {
  // Query counts: one row, under one tile, one bf16 forward block, ragged, many tiles.
  const AttentionShape shapes[] = {{3, 1, 2}, {2, 17, 3}, {2, 128, 2}, {1, 300, 3}, {2, 1024, 2}};
  for (int hd : {32, 64, 128})
    for (const AttentionShape& shape : shapes) check_shape<T>(in, out, type, hd, shape);
}

}  // namespace

void check_attention(CheckInputs& in, std::vector<OpCheck>& out) {
  check_type<float>(in, out, "fp32");
  check_type<bf16>(in, out, "bf16");
}

}  // namespace mok::cuda
