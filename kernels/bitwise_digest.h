#pragma once
// bitwise_digest: a 64-bit fingerprint of a device buffer's bits, and how many of its 32-bit
// words are not zero, for telling whether two kernels wrote the same bits without keeping a
// copy of either output (LtGemm's tuning compares its candidates' outputs this way).
//
// The fingerprint sums a mixed value of each (word, index) pair with wrapping 64-bit integer
// adds: exact and order-free, so the same bits always give the same fingerprint; two
// different buffers collide with probability about 2⁻⁶⁴.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mok::cuda {

struct BitwiseDigest {
  uint64_t fingerprint = 0;
  uint64_t nonzero_words = 0;
  bool operator==(const BitwiseDigest& o) const {
    return fingerprint == o.fingerprint && nonzero_words == o.nonzero_words;
  }
};

// Digest of `bytes` bytes at `data` (4-byte aligned, bytes a multiple of 4) into `out` (a
// device BitwiseDigest, zeroed here first), on `stream`.
void bitwise_digest(const void* data, size_t bytes, BitwiseDigest* out, cudaStream_t stream);

}  // namespace mok::cuda
