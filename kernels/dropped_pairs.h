#pragma once
// Marks the pairs a capacity limit dropped: expert[p] = −1 where row_of_pair[p] < 0 (CUDA),
// so a routing decision says −1 for them as the CPU router's does.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

void mark_dropped_pairs(int32_t* expert, const int32_t* row_of_pair, int64_t pairs, cudaStream_t stream);

}  // namespace mok::cuda
