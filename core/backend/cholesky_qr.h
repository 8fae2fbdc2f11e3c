#pragma once
// CholeskyQR2: orthonormal columns from Gram matrices, the GPU's way (kernels/low_rank.cu runs
// the same steps as kernels). Here on the host, so the algorithm is tested on the CPU; the CPU
// backend itself orthonormalizes by Householder (core/backend/qr.h).
//
// Twice: G = yᵀ·y in double (rows summed in blocks of kCholeskyQrGramRows, then the blocks in
// order); G = RᵀR by Cholesky in double, where a column whose remaining pivot is at most
// kCholeskyQrDependentColumn²·G_jj (numerically a combination of earlier columns) is dropped;
// y = y·R⁻¹ in double, a dropped column set to zero. Result: the nonzero columns are
// orthonormal and span range(y) to rounding, so y·yᵀ projects onto range(y).

#include <cstdint>

#include "core/real.h"

namespace mok {
constexpr double kCholeskyQrDependentColumn = 1e-5;
constexpr int64_t kCholeskyQrGramRows = 256;
}  // namespace mok

MOK_NN_BEGIN

// y (rows, cols) row-major, rows ≥ cols.
void cholesky_qr2(real* y, int64_t rows, int64_t cols);

MOK_NN_END
