#include "kernels/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kColumns = 128;      // threads per block: one column each
constexpr int64_t kChunk = 64;     // backward: sorted positions per chunk
constexpr int64_t kAlign = 256;    // workspace sub-buffers start on 256-byte boundaries

// Raw copy of row tokens[r] of W to row r of x, in packs of V elements.
template <typename T, int V>
__global__ void embedding_forward_kernel(const T* w, const int32_t* tokens, int64_t n, int64_t d, T* x) {
  const int64_t packs = d / V;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  if (p >= packs) return;
  for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
    const auto* src = reinterpret_cast<const Pack<T, V>*>(w + static_cast<int64_t>(tokens[r]) * d);
    reinterpret_cast<Pack<T, V>*>(x + r * d)[p] = src[p];
  }
}

__global__ void iota_kernel(int32_t* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<int32_t>(i);
}

// Stage 1. The sorted (token, position) list is cut into chunks of kChunk; a piece is a run of
// one token inside a chunk. Block (chunk, column tile) sums each piece's dx rows in position
// order for its columns. A piece holding a token's whole run adds into dw directly (starting
// from dw's old value, as the CPU adds row by row). A run crossing chunks leaves its first
// piece, with dw's old value, in tail[chunk] and a later chunk's first piece in head[chunk].
//   sorted_tokens, sorted_positions: (n);  head, tail: (chunks, d)
template <typename T>
__global__ void embedding_chunk_sums_kernel(const T* dx, const uint32_t* sorted_tokens,
                                            const int32_t* sorted_positions, int64_t n, int64_t d, float* dw,
                                            float* head, float* tail) {
  __shared__ uint32_t token[kChunk];
  __shared__ int32_t position[kChunk];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int count = static_cast<int>(i0 + kChunk < n ? kChunk : n - i0);
  for (int k = threadIdx.x; k < count; k += kColumns) {
    token[k] = sorted_tokens[i0 + k];
    position[k] = sorted_positions[i0 + k];
  }
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kColumns + threadIdx.x;
  if (c >= d) return;
  const bool has_prev = i0 > 0, has_next = i0 + count < n;
  const uint32_t prev = has_prev ? sorted_tokens[i0 - 1] : 0u;
  const uint32_t next = has_next ? sorted_tokens[i0 + count] : 0u;
  for (int k = 0; k < count;) {
    const uint32_t v = token[k];
    int e = k + 1;
    while (e < count && token[e] == v) ++e;
    const bool starts = k > 0 || !has_prev || prev != v;    // the token's run begins here
    const bool ends = e < count || !has_next || next != v;  // … and ends here
    float* dst = dw + static_cast<int64_t>(v) * d + c;
    float acc = starts ? *dst : 0.f;
    for (int q = k; q < e; ++q) acc += to_float(dx[static_cast<int64_t>(position[q]) * d + c]);
    if (starts && ends)
      *dst = acc;
    else if (!starts)
      head[static_cast<int64_t>(blockIdx.x) * d + c] = acc;
    else
      tail[static_cast<int64_t>(blockIdx.x) * d + c] = acc;
    k = e;
  }
}

// Stage 2. The chunk where a crossing run begins joins it: tail[chunk] + head[chunk+1] + … in
// chunk order, up to the chunk where the run ends, into dw.
__global__ void embedding_join_chunks_kernel(const uint32_t* sorted_tokens, int64_t n, int64_t d,
                                             const float* head, const float* tail, float* dw) {
  const int64_t chunk = blockIdx.x, i0 = chunk * kChunk, i1 = i0 + kChunk;
  if (i1 >= n) return;
  const uint32_t v = sorted_tokens[i1 - 1];
  if (sorted_tokens[i1] != v) return;                // the chunk's last run ends inside it
  if (i0 > 0 && sorted_tokens[i0 - 1] == v) return;  // the run began in an earlier chunk
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kColumns + threadIdx.x;
  if (c >= d) return;
  float acc = tail[chunk * d + c];
  for (int64_t j = chunk + 1;; ++j) {
    acc += head[j * d + c];
    const int64_t end = (j + 1) * kChunk;
    if (end >= n || sorted_tokens[end] != v) break;
  }
  dw[static_cast<int64_t>(v) * d + c] = acc;
}

int64_t align_up(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Bits that tell tokens in [0, vocab) apart: the radix sort looks at no others.
int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

// Byte offsets of the workspace's parts.
struct BackwardWorkspace {
  int64_t sort_scratch = 0, positions = 0, sorted_tokens = 0, sorted_positions = 0, head = 0, tail = 0, total = 0;
  size_t sort_scratch_bytes = 0;
};

BackwardWorkspace backward_workspace(int64_t n, int64_t vocab, int64_t d) {
  BackwardWorkspace w;
  if (n <= 0 || d <= 0) return w;
  if (n > INT_MAX) throw std::invalid_argument("embedding_backward: " + std::to_string(n) + " tokens (at most 2³¹−1)");
  MOK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, w.sort_scratch_bytes, static_cast<const uint32_t*>(nullptr),
                                                 static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                 static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
                                                 key_bits(vocab)));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int64_t at = 0;
  auto part = [&at](int64_t bytes) {
    const int64_t offset = at;
    at += align_up(bytes);
    return offset;
  };
  w.sort_scratch = part(static_cast<int64_t>(w.sort_scratch_bytes));
  w.positions = part(n * 4);
  w.sorted_tokens = part(n * 4);
  w.sorted_positions = part(n * 4);
  w.head = part(chunks * d * 4);
  w.tail = part(chunks * d * 4);
  w.total = at;
  return w;
}

}  // namespace

template <typename T>
void embedding_forward(const T* w, const int32_t* tokens, int64_t n, int64_t d, T* x, cudaStream_t stream) {
  if (n <= 0 || d <= 0) return;
  constexpr int V = kPack<T>;
  const unsigned rows = static_cast<unsigned>(n < 65535 ? n : 65535);
  if (d % V == 0 && is_aligned(w, 16) && is_aligned(x, 16)) {
    const dim3 grid(blocks_for(d / V, kColumns), rows);
    embedding_forward_kernel<T, V><<<grid, kColumns, 0, stream>>>(w, tokens, n, d, x);
  } else {
    const dim3 grid(blocks_for(d, kColumns), rows);
    embedding_forward_kernel<T, 1><<<grid, kColumns, 0, stream>>>(w, tokens, n, d, x);
  }
  MOK_CUDA_CHECK_LAUNCH();
}

size_t embedding_backward_workspace_bytes(int64_t n, int64_t vocab, int64_t d) {
  return static_cast<size_t>(backward_workspace(n, vocab, d).total);
}

template <typename T>
void embedding_backward(const T* dx, const int32_t* tokens, int64_t n, int64_t vocab, int64_t d, float* dw,
                        void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (n <= 0 || d <= 0) return;
  const BackwardWorkspace w = backward_workspace(n, vocab, d);
  if (ws_bytes < static_cast<size_t>(w.total))
    throw std::invalid_argument("embedding_backward: workspace of " + std::to_string(ws_bytes) + " bytes, needs " +
                                std::to_string(w.total) + " for n=" + std::to_string(n) + ", vocab=" +
                                std::to_string(vocab) + ", d=" + std::to_string(d));
  auto* base = static_cast<char*>(ws);
  auto* positions = reinterpret_cast<int32_t*>(base + w.positions);
  auto* sorted_tokens = reinterpret_cast<uint32_t*>(base + w.sorted_tokens);
  auto* sorted_positions = reinterpret_cast<int32_t*>(base + w.sorted_positions);
  auto* head = reinterpret_cast<float*>(base + w.head);
  auto* tail = reinterpret_cast<float*>(base + w.tail);

  iota_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(positions, n);
  MOK_CUDA_CHECK_LAUNCH();
  // Token ids are in [0, vocab), so their int32 bits sort as unsigned. Stable: equal tokens
  // keep position order.
  size_t scratch_bytes = w.sort_scratch_bytes;
  MOK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + w.sort_scratch, scratch_bytes,
                                                 reinterpret_cast<const uint32_t*>(tokens), sorted_tokens, positions,
                                                 sorted_positions, static_cast<int>(n), 0, key_bits(vocab), stream));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const dim3 grid(static_cast<unsigned>(chunks), blocks_for(d, kColumns));
  embedding_chunk_sums_kernel<T><<<grid, kColumns, 0, stream>>>(dx, sorted_tokens, sorted_positions, n, d, dw, head,
                                                                tail);
  MOK_CUDA_CHECK_LAUNCH();
  embedding_join_chunks_kernel<<<grid, kColumns, 0, stream>>>(sorted_tokens, n, d, head, tail, dw);
  MOK_CUDA_CHECK_LAUNCH();
}

template void embedding_forward<float>(const float*, const int32_t*, int64_t, int64_t, float*, cudaStream_t);
template void embedding_forward<bf16>(const bf16*, const int32_t*, int64_t, int64_t, bf16*, cudaStream_t);
template void embedding_backward<float>(const float*, const int32_t*, int64_t, int64_t, int64_t, float*, void*,
                                        size_t, cudaStream_t);
template void embedding_backward<bf16>(const bf16*, const int32_t*, int64_t, int64_t, int64_t, float*, void*,
                                       size_t, cudaStream_t);

}  // namespace mok::cuda
