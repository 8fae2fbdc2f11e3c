#include "kernels/elementwise.h"

#include <algorithm>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/vector_pack.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond this

// out[i] = op(a[i], b[i], c[i]) over the first kInputs inputs, in packs of V elements; the
// last n mod V elements one per thread. Inputs are loaded before the store, so out may be
// one of them.
template <typename In, typename Out, int V, int kInputs, typename Op>
__global__ void map_kernel(Out* out, const In* a, const In* b, const In* c, int64_t n, Op op) {
  const int64_t packs = n / V;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (int64_t p = first; p < packs; p += static_cast<int64_t>(gridDim.x) * kThreads) {
    float va[V] = {}, vb[V] = {}, vc[V] = {}, r[V];
    if constexpr (kInputs > 0) load_pack<V>(a + p * V, va);
    if constexpr (kInputs > 1) load_pack<V>(b + p * V, vb);
    if constexpr (kInputs > 2) load_pack<V>(c + p * V, vc);
#pragma unroll
    for (int k = 0; k < V; ++k) r[k] = op(va[k], vb[k], vc[k]);
    store_pack<V>(out + p * V, r);
  }
  if constexpr (V > 1) {
    const int64_t i = packs * V + first;
    if (i < n) {
      float va = 0.f, vb = 0.f, vc = 0.f;
      if constexpr (kInputs > 0) va = to_float(a[i]);
      if constexpr (kInputs > 1) vb = to_float(b[i]);
      if constexpr (kInputs > 2) vc = to_float(c[i]);
      out[i] = from_float<Out>(op(va, vb, vc));
    }
  }
}

struct AddOp {  // y + x
  __device__ float operator()(float y, float x, float) const { return y + x; }
};
struct Add2Op {  // y + (a + b)
  __device__ float operator()(float y, float a, float b) const { return y + (a + b); }
};
struct ScaleOp {
  float f;
  __device__ float operator()(float x, float, float) const { return x * f; }
};
struct FillOp {
  float value;
  __device__ float operator()(float, float, float) const { return value; }
};
struct ConvertOp {
  __device__ float operator()(float x, float, float) const { return x; }
};

// Packs of 16 bytes of the narrower type (8 elements when bf16 is involved, else 4) when
// every pointer is aligned to its side of the pack; else one element at a time.
template <int kInputs, typename In, typename Out, typename Op>
void launch_map(Out* out, const In* a, const In* b, const In* c, int64_t n, Op op, cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int V = 16 / static_cast<int>(sizeof(In) < sizeof(Out) ? sizeof(In) : sizeof(Out));
  const int64_t in_bytes = V * static_cast<int64_t>(sizeof(In)), out_bytes = V * static_cast<int64_t>(sizeof(Out));
  bool packed = is_aligned(out, out_bytes);
  if (kInputs > 0) packed = packed && is_aligned(a, in_bytes);
  if (kInputs > 1) packed = packed && is_aligned(b, in_bytes);
  if (kInputs > 2) packed = packed && is_aligned(c, in_bytes);
  const int64_t items = packed ? n / V + 1 : n;  // + 1: at least one block for the tail
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((items + kThreads - 1) / kThreads, kMaxBlocks));
  if (packed)
    map_kernel<In, Out, V, kInputs><<<blocks, kThreads, 0, stream>>>(out, a, b, c, n, op);
  else
    map_kernel<In, Out, 1, kInputs><<<blocks, kThreads, 0, stream>>>(out, a, b, c, n, op);
  MOK_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void add_inplace(T* y, const T* x, int64_t n, cudaStream_t stream) {
  launch_map<2>(y, static_cast<const T*>(y), x, static_cast<const T*>(nullptr), n, AddOp{}, stream);
}

template <typename T>
void add2_inplace(T* y, const T* a, const T* b, int64_t n, cudaStream_t stream) {
  launch_map<3>(y, static_cast<const T*>(y), a, b, n, Add2Op{}, stream);
}

template <typename T>
void scale(const T* x, float f, T* out, int64_t n, cudaStream_t stream) {
  launch_map<1>(out, x, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), n, ScaleOp{f}, stream);
}

template <typename T>
void fill(T* x, float value, int64_t n, cudaStream_t stream) {
  launch_map<0>(x, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                n, FillOp{value}, stream);
}

template <typename S, typename D>
void convert(const S* src, D* dst, int64_t n, cudaStream_t stream) {
  if constexpr (std::is_same_v<S, D>) {
    if (n > 0) MOK_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(S), cudaMemcpyDeviceToDevice, stream));
  } else {
    launch_map<1>(dst, src, static_cast<const S*>(nullptr), static_cast<const S*>(nullptr), n, ConvertOp{}, stream);
  }
}

#define MOK_INSTANTIATE_ELEMENTWISE(T)                                           \
  template void add_inplace<T>(T*, const T*, int64_t, cudaStream_t);            \
  template void add2_inplace<T>(T*, const T*, const T*, int64_t, cudaStream_t); \
  template void scale<T>(const T*, float, T*, int64_t, cudaStream_t);           \
  template void fill<T>(T*, float, int64_t, cudaStream_t);
MOK_INSTANTIATE_ELEMENTWISE(float)
MOK_INSTANTIATE_ELEMENTWISE(bf16)
#undef MOK_INSTANTIATE_ELEMENTWISE

template void convert<float, bf16>(const float*, bf16*, int64_t, cudaStream_t);
template void convert<bf16, float>(const bf16*, float*, int64_t, cudaStream_t);
template void convert<float, float>(const float*, float*, int64_t, cudaStream_t);
template void convert<bf16, bf16>(const bf16*, bf16*, int64_t, cudaStream_t);

}  // namespace mok::cuda
