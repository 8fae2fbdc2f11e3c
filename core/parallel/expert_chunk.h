#pragma once
// The chunk of a rank's local expert when its experts are cut into C consecutive groups
// (the overlap of transfer and compute, core/parallel/chunk_layout.h): ⌊l·C/L⌋, so every
// chunk gets ⌊L/C⌋ or ⌈L/C⌉ experts (none when L < C). Host and device (the GPU plan's kernels,
// kernels/mok_plan.cu) share it, so both cut the same way.

#include <cstdint>

#if defined(__CUDACC__)
#define MOK_EXPERT_CHUNK_HD __host__ __device__
#else
#define MOK_EXPERT_CHUNK_HD
#endif

namespace mok {

// l: local expert index in [0, L); L experts on the rank; C chunks.
MOK_EXPERT_CHUNK_HD inline int expert_chunk(int l, int L, int C) {
  return static_cast<int>(static_cast<int64_t>(l) * C / L);
}

}  // namespace mok
