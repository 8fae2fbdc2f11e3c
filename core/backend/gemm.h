#pragma once
// Matrix products on the CPU through OpenBLAS, row-major, with results that do not depend
// on the thread count: OpenBLAS itself runs single-threaded and we split the rows of C into
// fixed blocks of kGemmRowBlock (a split that depends only on m), one block per task.
//
//   C(m, n) = alpha · op(A)(m, k) · op(B)(k, n) + beta · C
//   op(A) = A (m, k) or Aᵀ with A stored (k, m); likewise B.

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

constexpr int64_t kGemmRowBlock = 64;

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real* a,
          int64_t lda, const real* b, int64_t ldb, real beta, real* c, int64_t ldc);

// Contiguous shortcuts: lda/ldb/ldc from the stored shapes.
//   matmul:     C(m,n) = A(m,k)·B(k,n)        (+ C if accumulate)
//   matmul_tn:  C(m,n) = A(k,m)ᵀ·B(k,n)       (+ C if accumulate)
//   matmul_nt:  C(m,n) = A(m,k)·B(n,k)ᵀ       (+ C if accumulate)
void matmul(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate = false);
void matmul_tn(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate = false);
void matmul_nt(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate = false);

MOK_NN_END
