#pragma once
// The double-precision causal attention of the core (core/backend/causal_attention.h, built
// into mok_nn_f64) behind plain vectors, so that CUDA sources compiled as C++17 need no
// C++20 core header. Shapes as in kernels/flash_attention.h.

#include <vector>

namespace mok::cuda {

struct AttentionReference {
  std::vector<double> o;     // (B·S, H·hd)
  std::vector<double> lse;   // (B, H, S)
  std::vector<double> dqkv;  // (B·S, 3·H·hd)
};

// Forward and backward on qkv (B·S, 3·H·hd) and d_o (B·S, H·hd), in double, on all cores.
AttentionReference attention_reference(const std::vector<float>& qkv, const std::vector<float>& d_o, int B,
                                       int S, int H, int hd);

}  // namespace mok::cuda
