// cuDNN's fused causal attention (kernels/cudnn_attention.h) against the double-precision core
// (core/backend/causal_attention.h), bf16, on bf16-rounded random inputs, the same tolerances as
// the project's flash kernels (attention_checks.cu). Per shape:
//   o, lse         forward outputs
//   dq, dk, dv     backward from the forward's o and lse
//   bitwise        a second forward and backward repeat the first bit for bit (the fraction
//                  of elements that differ; must be 0)
// and the backward in chunks of one (sequence, head) against the whole batch in one call (bitwise).
// A shape cuDNN has no engine for is reported as a failed ".plan" check with cuDNN's reason.
#include "kernels/checks/attention_reference.h"
#include "kernels/checks/check_util.h"
#include "kernels/device_buffer.h"

#ifdef MOK_HAVE_CUDNN
#include <cudnn.h>

#include "kernels/cudnn_attention.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace mok::cuda {

#ifdef MOK_HAVE_CUDNN
namespace {

void check_shape(CudnnAttention& fused, CheckInputs& in, std::vector<OpCheck>& out, int B, int S, int H, int hd) {
  const size_t d = size_t(H) * hd, rows = size_t(B) * S;
  const std::string name = "attn.cudnn.hd" + std::to_string(hd) + ".S" + std::to_string(S);
  const auto qkv = round_bf16(in.normal(rows * 3 * d)), d_o = round_bf16(in.normal(rows * d));
  const AttentionReference ref = attention_reference(qkv, d_o, B, S, H, hd);

  DeviceBuffer<bf16> dev_qkv(to_bf16(qkv)), dev_do(to_bf16(d_o)), dev_o(rows * d), dev_dqkv(rows * 3 * d);
  DeviceBuffer<float> dev_lse(size_t(B) * H * S);
  size_t fwd_bytes = 0, bwd_bytes = 0;
  try {
    fwd_bytes = fused.forward_workspace_bytes(B, S, H, hd);
    bwd_bytes = fused.backward_workspace_bytes(B, S, H, hd);
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", name.c_str(), e.what());
    out.push_back({name + ".plan", INFINITY, 0.0});
    return;
  }
  DeviceBuffer<unsigned char> fwd_ws(std::max<size_t>(fwd_bytes, 1)), bwd_ws(bwd_bytes);
  auto run = [&](std::vector<bf16>& o, std::vector<float>& lse, std::vector<bf16>& g) {
    dev_o.poison();
    dev_lse.poison();
    dev_dqkv.poison();
    bwd_ws.poison();
    fused.forward(dev_qkv.data(), B, S, H, hd, dev_o.data(), dev_lse.data(), fwd_ws.data(), fwd_bytes, nullptr);
    fused.backward(dev_qkv.data(), dev_do.data(), dev_lse.data(), dev_o.data(), B, S, H, hd, dev_dqkv.data(),
                   bwd_ws.data(), bwd_ws.size(), nullptr);
    MOK_CUDA_CHECK(cudaDeviceSynchronize());
    o = dev_o.download();
    lse = dev_lse.download();
    g = dev_dqkv.download();
  };
  std::vector<bf16> o1, g1, o2, g2;
  std::vector<float> lse1, lse2;
  try {
    run(o1, lse1, g1);
    run(o2, lse2, g2);
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", name.c_str(), e.what());
    out.push_back({name + ".run", INFINITY, 0.0});
    return;
  }
  out.push_back({name + ".o", relative_error(from_bf16(o1), ref.o), kBf16Tolerance});
  out.push_back({name + ".lse", relative_error(lse1, ref.lse), kBf16LseTolerance});
  const std::vector<float> g1f = from_bf16(g1);
  const char* parts[3] = {"dq", "dk", "dv"};
  for (int p = 0; p < 3; ++p)
    out.push_back({name + "." + parts[p], part_error(g1f, ref.dqkv, 3 * d, p * d, d), kBf16Tolerance});
  const double differ =
      std::max({differing_fraction(o1, o2), differing_fraction(lse1, lse2), differing_fraction(g1, g2)});
  out.push_back({name + ".bitwise", differ, 0.0});
}

// Backward of B = 4 sequences in one call against one call per (sequence, head).
void check_chunks(CheckInputs& in, std::vector<OpCheck>& out, int S, int H, int hd) {
  const int B = 4;
  const size_t d = size_t(H) * hd, rows = size_t(B) * S;
  const std::string name = "attn.cudnn.hd" + std::to_string(hd) + ".S" + std::to_string(S) + ".chunks";
  CudnnAttention whole(~size_t(0)), single(1);
  DeviceBuffer<bf16> qkv(to_bf16(in.normal(rows * 3 * d))), d_o(to_bf16(in.normal(rows * d))), o(rows * d),
      dqkv(rows * 3 * d);
  DeviceBuffer<float> lse(size_t(B) * H * S);
  try {
    DeviceBuffer<unsigned char> fwd_ws(std::max<size_t>(whole.forward_workspace_bytes(B, S, H, hd), 1));
    whole.forward(qkv.data(), B, S, H, hd, o.data(), lse.data(), fwd_ws.data(), fwd_ws.size(), nullptr);
    std::vector<bf16> g[2];
    CudnnAttention* runs[2] = {&whole, &single};
    for (int i = 0; i < 2; ++i) {
      DeviceBuffer<unsigned char> ws(runs[i]->backward_workspace_bytes(B, S, H, hd));
      dqkv.poison();
      runs[i]->backward(qkv.data(), d_o.data(), lse.data(), o.data(), B, S, H, hd, dqkv.data(), ws.data(), ws.size(),
                        nullptr);
      MOK_CUDA_CHECK(cudaDeviceSynchronize());
      g[i] = dqkv.download();
    }
    std::printf("%s: %d sequences × %d heads a call against %d × %d\n", name.c_str(),
                whole.backward_chunk(B, S, H).sequences, whole.backward_chunk(B, S, H).heads,
                single.backward_chunk(B, S, H).sequences, single.backward_chunk(B, S, H).heads);
    out.push_back({name, differing_fraction(g[0], g[1]), 0.0});
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", name.c_str(), e.what());
    out.push_back({name, INFINITY, 0.0});
  }
}

}  // namespace

void check_cudnn_attention(CheckInputs& in, std::vector<OpCheck>& out) {
  const std::string why = CudnnAttention::unavailable_reason();
  if (!why.empty()) {
    std::printf("cuDNN attention not checked: %s\n", why.c_str());
    out.push_back({"attn.cudnn.available", INFINITY, 0.0});
    return;
  }
  CudnnAttention fused;
  for (int hd : {64, 128})
    for (const int S : {17, 128, 300, 1024}) check_shape(fused, in, out, 2, S, 3, hd);
  check_chunks(in, out, 1024, 3, 64);
  std::printf("cuDNN attention: cuDNN %zu, forward %s, backward %s\n", cudnnGetVersion(),
              fused.forward_engine().c_str(), fused.backward_engine().c_str());
}
#else
void check_cudnn_attention(CheckInputs&, std::vector<OpCheck>&) {
  std::printf("cuDNN attention not checked: this build has no cuDNN\n");
}
#endif

}  // namespace mok::cuda
