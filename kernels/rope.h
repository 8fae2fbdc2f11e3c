#pragma once
// Rotary position embedding (CUDA), the semantics of core/backend/rope.h: within each head of
// width hd, element i pairs with i + hd/2 and the pair turns by the angle of its position.
//   x: (rows, ld) T, turned in place: `heads` consecutive heads of width hd at the start of each
//      row; row r sits at position pos0 + r % seq. Columns past heads·hd are left alone.
//   cos, sin: (max_positions, hd/2) float on the device (RopeTable's rows).
// inverse = the transposed turn (backward). seq_pos0, when given: (rows / seq) i32 on the
// device, the first position of each sequence (row r at seq_pos0[r / seq] + r % seq, pos0
// unused), read when the kernel runs (a recorded decode step's positions). The caller checks
// the positions against max_positions, as the CPU does (this kernel does not know the
// table's length).

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

template <typename T>
void rope_apply(T* x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const float* cos,
                const float* sin, int hd, bool inverse, cudaStream_t stream, const int32_t* seq_pos0 = nullptr);

}  // namespace mok::cuda
