#pragma once
// The owner's step of a fixed-order all-reduce (core/parallel/data_plane.h): the R copies of
// its chunk, laid out (R, len) back to back, added in rank order 0, 1, …, R−1 in double and
// rounded once into out (len). The same rule as the host reduction, so the sum does not
// depend on timing, on R's grouping, or on the device.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

void sum_rank_parts(const float* parts, int ranks, int64_t len, float* out, cudaStream_t stream);
void sum_rank_parts(const double* parts, int ranks, int64_t len, double* out, cudaStream_t stream);

}  // namespace mok::cuda
