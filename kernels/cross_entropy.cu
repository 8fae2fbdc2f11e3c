#include "kernels/cross_entropy.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/fixed_order_reduce.cuh"

namespace mok::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kRowsPerPartial = 16 * kThreads;  // reduce: rows summed by one block

// One block per row: max, Σ exp(x − max), lse, then (optionally) the gradient in place.
template <typename T>
__global__ void cross_entropy_forward_kernel(T* logits, const int32_t* targets, int64_t vocab, bool write_grad,
                                             float* row_loss) {
  __shared__ float partial[kThreads / 32];
  T* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int32_t t = targets[blockIdx.x];
  if (t < 0) {
    if (write_grad)
      for (int64_t j = threadIdx.x; j < vocab; j += kThreads) x[j] = from_float<T>(0.f);
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.f;
    return;
  }
  const float xt = to_float(x[t]);  // read before any thread overwrites the row
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) m = fmaxf(m, to_float(x[j]));
  m = block_max<kThreads>(m, partial);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) s += expf(to_float(x[j]) - m);
  s = block_sum<kThreads>(s, partial);
  const float lse = m + logf(s);
  if (threadIdx.x == 0) row_loss[blockIdx.x] = lse - xt;
  if (write_grad)
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      const float p = expf(to_float(x[j]) - lse);
      x[j] = from_float<T>(j == t ? p - 1.f : p);
    }
}

// Block b sums rows [b·kRowsPerPartial, (b+1)·kRowsPerPartial): thread i takes rows i, i + 256, …
// in order, then the block adds the threads in a fixed tree.
__global__ void row_loss_partials_kernel(const float* row_loss, const int32_t* targets, int64_t n,
                                         double* loss_partial, long long* count_partial) {
  __shared__ double loss_warps[kThreads / 32];
  __shared__ long long count_warps[kThreads / 32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kRowsPerPartial;
  const int64_t end = begin + kRowsPerPartial < n ? begin + kRowsPerPartial : n;
  double loss = 0.0;
  long long count = 0;
  for (int64_t r = begin + threadIdx.x; r < end; r += kThreads) {
    loss += static_cast<double>(row_loss[r]);
    count += targets[r] >= 0;
  }
  loss = block_sum<kThreads>(loss, loss_warps);
  count = block_sum<kThreads>(count, count_warps);
  if (threadIdx.x == 0) {
    loss_partial[blockIdx.x] = loss;
    count_partial[blockIdx.x] = count;
  }
}

// One block: the partials in the same fixed pattern, written to the outputs (zeros when none).
__global__ void sum_partials_kernel(const double* loss_partial, const long long* count_partial, int64_t partials,
                                    double* loss_sum, int64_t* count) {
  __shared__ double loss_warps[kThreads / 32];
  __shared__ long long count_warps[kThreads / 32];
  double loss = 0.0;
  long long c = 0;
  for (int64_t b = threadIdx.x; b < partials; b += kThreads) {
    loss += loss_partial[b];
    c += count_partial[b];
  }
  loss = block_sum<kThreads>(loss, loss_warps);
  c = block_sum<kThreads>(c, count_warps);
  if (threadIdx.x == 0) {
    *loss_sum = loss;
    *count = c;
  }
}

int64_t partial_count(int64_t n) { return n > 0 ? (n + kRowsPerPartial - 1) / kRowsPerPartial : 0; }

}  // namespace

template <typename T>
void cross_entropy_forward(T* logits, const int32_t* targets, int64_t n, int64_t vocab, bool write_grad,
                           float* row_loss, cudaStream_t stream) {
  if (n <= 0) return;
  if (vocab <= 0) throw std::invalid_argument("cross_entropy_forward: vocabulary of " + std::to_string(vocab));
  if (n > 0x7fffffff) throw std::invalid_argument("cross_entropy_forward: " + std::to_string(n) + " rows");
  cross_entropy_forward_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, targets, vocab,
                                                                                     write_grad, row_loss);
  MOK_CUDA_CHECK_LAUNCH();
}

// (partials) doubles, then (partials) 64-bit counts.
size_t cross_entropy_reduce_workspace_bytes(int64_t n) {
  return static_cast<size_t>(partial_count(n)) * (sizeof(double) + sizeof(long long));
}

void cross_entropy_reduce(const float* row_loss, const int32_t* targets, int64_t n, double* loss_sum,
                          int64_t* count, void* ws, size_t ws_bytes, cudaStream_t stream) {
  const size_t need = cross_entropy_reduce_workspace_bytes(n);
  if (ws_bytes < need)
    throw std::invalid_argument("cross_entropy_reduce: workspace of " + std::to_string(ws_bytes) +
                                " bytes, needs " + std::to_string(need) + " for n=" + std::to_string(n));
  const int64_t partials = partial_count(n);
  auto* loss_partial = static_cast<double*>(ws);
  auto* count_partial = reinterpret_cast<long long*>(loss_partial + partials);
  if (partials > 0) {
    row_loss_partials_kernel<<<static_cast<unsigned>(partials), kThreads, 0, stream>>>(row_loss, targets, n,
                                                                                      loss_partial, count_partial);
    MOK_CUDA_CHECK_LAUNCH();
  }
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(loss_partial, count_partial, partials, loss_sum, count);
  MOK_CUDA_CHECK_LAUNCH();
}

template void cross_entropy_forward<float>(float*, const int32_t*, int64_t, int64_t, bool, float*, cudaStream_t);
template void cross_entropy_forward<bf16>(bf16*, const int32_t*, int64_t, int64_t, bool, float*, cudaStream_t);

}  // namespace mok::cuda
