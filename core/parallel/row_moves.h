#pragma once
// Moving rows between layouts on the rank's device, for the multi-rank dispatchers: host index
// lists go up once, then the rank's gather ops (core/backend/ops.h) do the work. Each uploads
// through ExecContext::current().

#include <cstdint>
#include <vector>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

// Host values on the current context's device, 1-D.
Tensor upload_i32(const std::vector<int32_t>& values);
Tensor upload_real(const std::vector<real>& values);

// out[i] = rows[index[i]]: rows of a 2-D tensor, or values of a 1-D one; index (i32) on the device.
Tensor gather_by(const Tensor& rows, const Tensor& index);
// out[i] = src[index[i] / div] for a 2-D src and a host index (pair indices with div = k).
Tensor gather_by(const Tensor& src, const std::vector<int64_t>& index, int div);

// Rows [first, first + count) of a (rows, d) tensor, sharing its storage.
Tensor row_block(const Tensor& t, int64_t first, int64_t count);

// A permutation of rows and its inverse, on the device; both empty when it is the identity
// (no gather needed).
struct RowPermutation {
  Tensor forward;  // out[i] = in[forward[i]]
  Tensor inverse;  // undoes it
  Tensor apply(Tensor rows) const;
  Tensor undo(Tensor rows) const;
};
RowPermutation make_row_permutation(const std::vector<int32_t>& forward);

MOK_NN_END
