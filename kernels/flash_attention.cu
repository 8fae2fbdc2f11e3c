// Causal flash attention: argument checks, the backward workspace, the D = rowsum(dO ∘ O)
// pre-pass, and the dispatch to the kernels of each element type (flash_attention_launch.h).
#include "kernels/cuda_check.h"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_launch.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mok::cuda {
namespace {

constexpr int kRowDotThreads = 256;

// D[b, h, i] = Σ_c dO[b·S + i, h·hd + c] · O[b·S + i, h·hd + c], one warp per (token, head);
// lane sums in column order, then a fixed butterfly: the same bits on every run.
template <typename T>
__global__ void attention_row_dot_kernel(const T* d_o, const T* o, int S, int H, int hd, float* d,
                                         long long tokens_heads) {
  const long long w = (static_cast<long long>(blockIdx.x) * kRowDotThreads + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= tokens_heads) return;  // uniform over the warp
  const long long token = w / H;
  const int h = static_cast<int>(w % H);
  const long long off = token * H * hd + static_cast<long long>(h) * hd;
  float s = 0.f;
  for (int c = lane; c < hd; c += 32) s += to_float(d_o[off + c]) * to_float(o[off + c]);
  for (int step = 16; step > 0; step >>= 1) s += __shfl_xor_sync(0xffffffffu, s, step);
  if (lane == 0) {
    const long long b = token / S, i = token % S;
    d[(b * H + h) * S + i] = s;
  }
}

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }
size_t d_bytes(int B, int S, int H) { return align256(sizeof(float) * size_t(B) * H * S); }

void check_shape(int B, int S, int H, int hd, const char* op) {
  if (B < 0 || S < 0 || H < 1)
    throw std::invalid_argument(std::string(op) + ": bad shape B=" + std::to_string(B) + " S=" +
                                std::to_string(S) + " H=" + std::to_string(H));
  if (hd != 32 && hd != 64 && hd != 128)
    throw std::invalid_argument(std::string(op) + ": head width " + std::to_string(hd) +
                                " not supported (32, 64 or 128)");
}

// 16-byte vector loads and cp.async need 16-byte aligned rows: base pointers aligned and
// row strides (multiples of hd ≥ 32 elements) keep every row aligned.
void check_aligned(const void* p, const char* what, const char* op, size_t bytes = 16) {
  if (reinterpret_cast<uintptr_t>(p) % bytes)
    throw std::invalid_argument(std::string(op) + ": " + what + " is not " + std::to_string(bytes) +
                                "-byte aligned");
}

}  // namespace

size_t flash_attention_backward_workspace_bytes(int B, int S, int H, int hd) {
  return d_bytes(B, S, H) + align256(sizeof(float) * size_t(B) * S * H * hd);
}

template <typename T>
void flash_attention_forward(const T* qkv, int B, int S, int H, int hd, T* o, float* lse,
                             cudaStream_t stream) {
  const char* op = "flash_attention_forward";
  check_shape(B, S, H, hd, op);
  if (B == 0 || S == 0) return;
  check_aligned(qkv, "qkv", op);
  check_aligned(o, "o", op);
  check_aligned(lse, "lse", op, 4);
  launch_flash_forward(qkv, B, S, H, hd, o, lse, stream);
}

template <typename T>
void flash_attention_backward(const T* qkv, const T* d_o, const float* lse, const T* o, int B, int S,
                              int H, int hd, T* dqkv, void* ws, size_t ws_bytes, cudaStream_t stream) {
  const char* op = "flash_attention_backward";
  check_shape(B, S, H, hd, op);
  if (B == 0 || S == 0) return;
  const size_t need = flash_attention_backward_workspace_bytes(B, S, H, hd);
  if (!ws || ws_bytes < need)
    throw std::invalid_argument(std::string(op) + ": workspace of " + std::to_string(ws_bytes) +
                                " bytes, needs " + std::to_string(need));
  if (!lse) throw std::invalid_argument(std::string(op) + ": lse is required");
  check_aligned(qkv, "qkv", op);
  check_aligned(d_o, "d_o", op);
  check_aligned(dqkv, "dqkv", op);
  check_aligned(ws, "workspace", op);
  if (o) check_aligned(o, "o", op);
  check_aligned(lse, "lse", op, 4);

  float* d = static_cast<float*>(ws);  // (B, H, S)
  const T* o_used = o;
  if (!o) {  // recompute O with the forward kernel: the bits the forward gave
    T* o_ws = reinterpret_cast<T*>(static_cast<char*>(ws) + d_bytes(B, S, H));
    launch_flash_forward(qkv, B, S, H, hd, o_ws, nullptr, stream);
    o_used = o_ws;
  }
  const long long tokens_heads = static_cast<long long>(B) * S * H;
  attention_row_dot_kernel<T><<<blocks_for(tokens_heads * 32, kRowDotThreads), kRowDotThreads, 0, stream>>>(
      d_o, o_used, S, H, hd, d, tokens_heads);
  MOK_CUDA_CHECK_LAUNCH();
  launch_flash_backward_dkdv(qkv, d_o, lse, d, B, S, H, hd, dqkv, stream);
  launch_flash_backward_dq(qkv, d_o, lse, d, B, S, H, hd, dqkv, stream);
}

template void flash_attention_forward<float>(const float*, int, int, int, int, float*, float*, cudaStream_t);
template void flash_attention_forward<bf16>(const bf16*, int, int, int, int, bf16*, float*, cudaStream_t);
template void flash_attention_backward<float>(const float*, const float*, const float*, const float*, int, int,
                                              int, int, float*, void*, size_t, cudaStream_t);
template void flash_attention_backward<bf16>(const bf16*, const bf16*, const float*, const bf16*, int, int, int,
                                             int, bf16*, void*, size_t, cudaStream_t);

}  // namespace mok::cuda
