#pragma once
// Size classes of the caching allocators (the host's BlockCache, a GPU's
// CudaCachingAllocator): a request is served by a block of its class, so that blocks freed by
// one step serve the next one's requests of nearly the same size. Up to 4 KiB the class is
// the request rounded up to `small_align` bytes; above, one of eight classes per power of two
// (the request rounded up to a multiple of 1/8 of the power of two below it: waste ≤ 1/8).

#include <cstdint>

namespace mok {

constexpr int64_t size_class_bytes(int64_t bytes, int64_t small_align) {
  if (bytes <= 4096) return (bytes + small_align - 1) / small_align * small_align;
  int64_t p = 4096;
  while (p * 2 <= bytes) p *= 2;
  const int64_t step = p / 8;  // ≥ 512 B; a multiple of 4 KiB pages from 32 KiB on
  return (bytes + step - 1) / step * step;
}

// The GPU allocator's alignment of small blocks (cudaMalloc's own is 256 B).
inline constexpr int64_t kDeviceBlockAlign = 256;

}  // namespace mok
