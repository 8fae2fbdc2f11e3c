#include "kernels/gemm_lt.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"

namespace mok::cuda {
namespace {

cudaDataType_t cuda_type(GemmType t) { return t == GemmType::f32 ? CUDA_R_32F : CUDA_R_16BF; }

// Largest power of two ≤ 16 dividing the address: what the kernels may assume (16-byte
// vector loads and TMA need no more). Part of the plan key, so a problem's algorithm
// depends only on its own data.
int64_t pointer_alignment(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  int64_t align = 16;
  while (align > 1 && addr % uintptr_t(align) != 0) align /= 2;
  return align;
}

// Numerics a kernel may use (cublasLtNumericalImplFlags_t): fp32 accumulation always; for
// f32 inputs also fp32 multiplies (no TF32, no bf16 emulation), for parity with the CPU.
uint64_t allowed_numerics(GemmType ab) {
  uint64_t mask = ~uint64_t(0);
  mask &= ~uint64_t(CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F);
  if (ab == GemmType::f32)
    mask &= ~uint64_t(CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32 | CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F |
                      CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF);
  return mask;
}

std::string describe(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                     GemmType ab, GemmType c) {
  return std::string("C(") + std::to_string(m) + "," + std::to_string(n) + ") = " + (ta ? "Aᵀ" : "A") + "·" +
         (tb ? "Bᵀ" : "B") + " with k=" + std::to_string(k) + ", lda=" + std::to_string(lda) +
         ", ldb=" + std::to_string(ldb) + ", ldc=" + std::to_string(ldc) + ", " + gemm_type_name(ab) + "→" +
         gemm_type_name(c);
}

}  // namespace

const char* gemm_type_name(GemmType t) { return t == GemmType::f32 ? "f32" : "bf16"; }

LtGemm::LtGemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  MOK_CUBLAS_CHECK(cublasLtCreate(&handle_));
  if (workspace_bytes_) MOK_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  MOK_CUDA_CHECK(cudaEventCreateWithFlags(&stream_switch_, cudaEventDisableTiming));
}

LtGemm::~LtGemm() {
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.op);
  }
  if (stream_switch_) cudaEventDestroy(stream_switch_);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::order_after_previous_stream(cudaStream_t stream) {
  if (used_ && stream != last_stream_) {
    MOK_CUDA_CHECK(cudaEventRecord(stream_switch_, last_stream_));
    MOK_CUDA_CHECK(cudaStreamWaitEvent(stream, stream_switch_, 0));
  }
  last_stream_ = stream;
  used_ = true;
}

// Row-major C(m,n) = op(A)·op(B) is column-major Cᵀ(n,m) = op(B)ᵀ·op(A)ᵀ: the column-major
// call takes B first. Row-major B stored (k,n) [or (n,k) transposed] is column-major (n,k)
// [(k,n)] with the same leading dimension; likewise A and C.
const LtGemm::Plan& LtGemm::plan_for(const PlanKey& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const bool ta = key[0], tb = key[1];
  const int64_t m = key[2], n = key[3], k = key[4], lda = key[5], ldb = key[6], ldc = key[7];
  const auto ab = static_cast<GemmType>(key[8]), ct = static_cast<GemmType>(key[9]);
  Plan p;
  MOK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  MOK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  MOK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(ab), tb ? k : n, tb ? n : k, ldb));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(ab), ta ? m : k, ta ? k : m, lda));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, cuda_type(ct), n, m, ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  MOK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  // Split-K only with a separate fp32 reduction: no in-place (output-buffer) or output-type
  // reduction, whose order or precision is not the plain one.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  const uint64_t numerics = allowed_numerics(ab);
  const auto align_first = static_cast<uint32_t>(key[11]), align_second = static_cast<uint32_t>(key[10]),
             align_c = static_cast<uint32_t>(key[12]);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
    MOK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof value));
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
  prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction);
  prefer(CUBLASLT_MATMUL_PREF_IMPL_MASK, numerics);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_first);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_second);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
    throw std::runtime_error("LtGemm: cuBLASLt has no algorithm for " +
                             describe(ta, tb, m, n, k, lda, ldb, ldc, ab, ct) + " (alignment A " +
                             std::to_string(key[10]) + ", B " + std::to_string(key[11]) + ", C " +
                             std::to_string(key[12]) + " bytes): " + cublasGetStatusString(status));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::scale_only(int64_t m, int64_t n, float beta, void* c, int64_t ldc, GemmType c_type,
                        cudaStream_t stream) {
  if (beta == 1.f) return;
  const size_t es = gemm_type_bytes(c_type);
  if (beta == 0.f) {  // all-zero bytes are +0 in f32 and bf16
    MOK_CUDA_CHECK(cudaMemset2DAsync(c, size_t(ldc) * es, 0, size_t(n) * es, size_t(m), stream));
    return;
  }
  // C = beta·C through cuBLASLt's elementwise transform, in place (column-major (n, m)).
  cublasLtMatrixTransformDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  MOK_CUBLAS_CHECK(cublasLtMatrixTransformDescCreate(&desc, CUDA_R_32F));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, cuda_type(c_type), n, m, ldc));
  const float zero = 0.f;
  const cublasStatus_t status =
      cublasLtMatrixTransform(handle_, desc, &beta, c, layout, &zero, nullptr, nullptr, c, layout, stream);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatrixTransformDescDestroy(desc);
  MOK_CUBLAS_CHECK(status);
}

void LtGemm::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                  int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, GemmType ab_type,
                  GemmType c_type, cudaStream_t stream) {
  if (m < 0 || n < 0 || k < 0)
    throw std::invalid_argument("LtGemm: negative size in " +
                                describe(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_type, c_type));
  if (c_type == GemmType::bf16 && ab_type == GemmType::f32)
    throw std::invalid_argument("LtGemm: f32 inputs with a bf16 output are not supported (" +
                                describe(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_type, c_type) + ")");
  if (m == 0 || n == 0) return;
  if (ldc < n)
    throw std::invalid_argument("LtGemm: ldc < n in " +
                                describe(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_type, c_type));
  order_after_previous_stream(stream);
  if (k == 0 || alpha == 0.f) {
    scale_only(m, n, beta, c, ldc, c_type, stream);
    return;
  }
  if (lda < (trans_a ? m : k) || ldb < (trans_b ? k : n))
    throw std::invalid_argument("LtGemm: leading dimension smaller than a row in " +
                                describe(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_type, c_type));
  const PlanKey key{trans_a,
                    trans_b,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    static_cast<int64_t>(ab_type),
                    static_cast<int64_t>(c_type),
                    pointer_alignment(a),
                    pointer_alignment(b),
                    pointer_alignment(c)};
  const Plan& p = plan_for(key);
  MOK_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, b, p.a, a, p.b, &beta, c, p.c, c, p.c, &p.algo, workspace_,
                                  workspace_bytes_, stream));
}

}  // namespace mok::cuda
