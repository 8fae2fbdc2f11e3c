#pragma once
// The block map of a multi-tensor kernel (AdamW, gradient norm): one launch over many tensors,
// block b working on elements [begin, begin + chunk) of tensor `tensor`. Built once on the
// host for a fixed list of tensors and uploaded with it.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mok::cuda {

struct TensorChunk {
  int32_t tensor;
  int32_t unused;  // keeps `begin` 8-byte aligned, the same on host and device
  int64_t begin;
};

// Chunks of `chunk` elements over each tensor of numels[i] elements, tensors in order.
inline std::vector<TensorChunk> tensor_chunk_table(const std::vector<int64_t>& numels, int64_t chunk) {
  std::vector<TensorChunk> table;
  for (size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] < 0) throw std::invalid_argument("tensor " + std::to_string(i) + " has " +
                                                   std::to_string(numels[i]) + " elements");
    for (int64_t b = 0; b < numels[i]; b += chunk) table.push_back({static_cast<int32_t>(i), 0, b});
  }
  if (table.size() > 0x7fffffffu) throw std::invalid_argument("more than 2³¹−1 chunks in one launch");
  return table;
}

inline size_t align_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace mok::cuda
