#pragma once
// LtGemm: matrix products on the GPU through cuBLASLt, with the row-major semantics of the
// CPU reference (core/backend/gemm.h):
//
//   C(m, n) = alpha · op(A)(m, k) · op(B)(k, n) + beta · C
//   op(A) = A (m, k) or Aᵀ with A stored (k, m); likewise B.
//
// Element types: A and B both f32 or both bf16; C the type of A, or f32 with bf16 inputs
// (weight gradients accumulating into fp32 grads, router logits). Compute in fp32: true
// fp32 for f32 inputs (no TF32, for parity with the CPU), tensor cores for bf16.
//
// Determinism: each problem (shape, leading dimensions, types, transposes, pointer
// alignment) gets its algorithm once, from cuBLASLt's heuristic with a fixed workspace
// (owned here), fp32 accumulation, and split-K only with a separate fp32 reduction (never
// in place in the output type); then it is pinned: the same problem always runs the same
// kernel, so results repeat bitwise run to run on one GPU model and library version. Token
// counts change every step, so the heuristic is asked once per size class of the token
// dimension and its choice checked on each exact problem (gemm_lt.cpp, plan_for). The
// descriptors of each problem are cached with it: a repeated call costs one cublasLtMatmul
// on the host.
//
// Tuning (on unless set_tuning(false)): the heuristic's first choice is not always the
// fastest (the dense model's products: up to 1.14× between its first eight candidates, H200,
// docs/benchmarks.md). A bf16 problem whose shape is its own size class (the static shapes of
// the dense layers; token counts that vary by step are left alone) and whose output is only
// written (beta 0, or the residual read from a separate C in) is tuned at its first call: each
// candidate runs on the call's own operands, and the fastest whose output is bitwise the
// first choice's (compared by a digest of the bits, kernels/bitwise_digest.h) is pinned. So a
// tuned problem gives the bits an untuned one gives, whichever candidate wins its timing; a
// candidate that sums in another order (split-K) differs on real data and is never taken.
// The first call waits for its timings (a few milliseconds, once per problem).
//
// One object per device and stream owner; not thread-safe. The workspace is used in stream
// order: when a call comes on a different stream than the previous one, the new stream
// first waits for the old one (so the workspace is never shared by two running kernels).

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mok::cuda {

struct BitwiseDigest;  // kernels/bitwise_digest.h

enum class GemmType { f32, bf16 };

inline size_t gemm_type_bytes(GemmType t) { return t == GemmType::f32 ? 4 : 2; }
const char* gemm_type_name(GemmType t);

class LtGemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;  // 32 MiB

  // Creates the cuBLASLt handle and allocates the workspace on the current device.
  explicit LtGemm(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // C = alpha·op(A)·op(B) + beta·C (row-major, leading dimensions in elements). m, n or k
  // may be 0: nothing to do for m·n = 0; C = beta·C for k = 0 or alpha = 0 (A and B are then
  // not read). beta = 0: C is only written (NaN in C does not propagate). c_in: the C that
  // beta scales is read from c_in (same layout and type as C) instead: C = alpha·op(A)·op(B)
  // + beta·C_in in one pass (a residual add in the epilogue).
  // Asynchronous on `stream`; throws std::invalid_argument on bad sizes, std::runtime_error
  // when cuBLASLt finds no algorithm or a call fails.
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
            int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, GemmType ab_type,
            GemmType c_type, cudaStream_t stream, const void* c_in = nullptr);

  size_t workspace_bytes() const { return workspace_bytes_; }
  // Problems seen so far (each with its pinned algorithm), and heuristic queries made (one
  // per size class, plus one per problem its class's algorithm does not fit).
  size_t cached_plans() const { return plans_.size(); }
  size_t heuristic_queries() const { return heuristic_queries_; }

  // Tuning of the problems met from now on (see above); on by default.
  void set_tuning(bool on) { tuning_ = on; }
  bool tuning() const { return tuning_; }
  // Problems tuned so far, and how many of them now run another candidate than the first.
  size_t tuned_problems() const { return tuned_problems_; }
  size_t tuned_to_another() const { return tuned_to_another_; }

  // For measurement only (mok-gpu-check --timings gemm): plan the problems met from now on
  // with the heuristic's candidate `rank` (0, the default, is its first choice) and drop the
  // plans made so far. A problem with fewer candidates throws as one with none would.
  void use_candidate(int rank);
  // The algorithm the last gemm() call ran, as cuBLASLt's configuration numbers
  // ("algo 66 tile 18 stages 20 split-k 1 ..."), or "" before the first call.
  std::string last_algorithm() const;

 private:
  // transposes, m, n, k, lda, ldb, ldc, types, alignment of the A, B, C pointers (bytes, ≤ 16)
  using PlanKey = std::array<int64_t, 13>;
  struct Descriptors {  // of the column-major call (B first)
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  };
  struct Plan {
    Descriptors d;
    cublasLtMatmulAlgo_t algo{};
  };
  // The operands of the call that plans a problem, which tuning runs the candidates on.
  struct Operands {
    const void* a;
    const void* b;
    void* c;
    const void* c_in;  // null: beta scales C in place
    float alpha, beta;
    cudaStream_t stream;
  };
  static Descriptors make_descriptors(const PlanKey& key);
  static void destroy(Descriptors& d);
  static PlanKey size_class_of(const PlanKey& key);
  std::vector<cublasLtMatmulAlgo_t> candidates(const PlanKey& key, const Descriptors& d, int count);
  bool heuristic(const PlanKey& key, const Descriptors& d, cublasLtMatmulAlgo_t& algo);
  const Plan& plan_for(const PlanKey& key, const Operands& call);
  bool tunable(const PlanKey& key, const Operands& call) const;
  void tune(const PlanKey& key, Plan& p, const Operands& call);
  void scale_only(int64_t m, int64_t n, float beta, void* c, int64_t ldc, GemmType c_type,
                  cudaStream_t stream);
  void order_after_previous_stream(cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<PlanKey, Plan> plans_;                         // exact problems
  std::map<PlanKey, cublasLtMatmulAlgo_t> class_algos_;  // the heuristic's choice per size class
  size_t heuristic_queries_ = 0;
  int candidate_rank_ = 0;
  bool tuning_ = true;
  size_t tuned_problems_ = 0, tuned_to_another_ = 0;
  BitwiseDigest* digest_ = nullptr;  // device: one digest, tuning's comparisons
  cudaEvent_t tune_start_ = nullptr, tune_stop_ = nullptr;
  const Plan* last_plan_ = nullptr;
  cudaStream_t last_stream_ = nullptr;
  bool used_ = false;
  cudaEvent_t stream_switch_ = nullptr;
};

}  // namespace mok::cuda
