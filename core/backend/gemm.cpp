#include "core/backend/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, real alpha, const real* a,
               int64_t lda, const real* b, int64_t ldb, real beta, real* c, int64_t ldc) {
  const auto opa = ta ? CblasTrans : CblasNoTrans;
  const auto opb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (sizeof(real) == sizeof(float)) {
    cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, alpha, reinterpret_cast<const float*>(a), lda,
                reinterpret_cast<const float*>(b), ldb, beta, reinterpret_cast<float*>(c), ldc);
  } else {
    cblas_dgemm(CblasRowMajor, opa, opb, m, n, k, alpha, reinterpret_cast<const double*>(a), lda,
                reinterpret_cast<const double*>(b), ldb, beta, reinterpret_cast<double*>(c), ldc);
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real* a,
          int64_t lda, const real* b, int64_t ldb, real beta, real* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  single_threaded_blas();
  if (k == 0) {  // BLAS leaves C untouched for k = 0 only when beta = 1; make it explicit
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == real(0) ? real(0) : beta * c[i * ldc + j];
    return;
  }
  parallel_for(m, kGemmRowBlock, [&](int64_t r0, int64_t r1) {
    // Rows r0..r1 of op(A): for A stored (m,k) they start at row r0; for Aᵀ at column r0.
    const real* a_block = trans_a ? a + r0 : a + r0 * lda;
    blas_gemm(trans_a, trans_b, r1 - r0, n, k, alpha, a_block, lda, b, ldb, beta, c + r0 * ldc, ldc);
  });
}

void matmul(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  gemm(false, false, m, n, k, real(1), a, k, b, n, accumulate ? real(1) : real(0), c, n);
}
void matmul_tn(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  gemm(true, false, m, n, k, real(1), a, m, b, n, accumulate ? real(1) : real(0), c, n);
}
void matmul_nt(const real* a, const real* b, real* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  gemm(false, true, m, n, k, real(1), a, k, b, k, accumulate ? real(1) : real(0), c, n);
}

MOK_NN_END
