#include "kernels/gemm_lt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bitwise_digest.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_types.h"
#include "kernels/elementwise.h"

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
  for (auto& [key, plan] : plans_) destroy(plan.d);
  if (tune_start_) cudaEventDestroy(tune_start_);
  if (tune_stop_) cudaEventDestroy(tune_stop_);
  if (digest_) cudaFree(digest_);
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
LtGemm::Descriptors LtGemm::make_descriptors(const PlanKey& key) {
  const bool ta = key[0], tb = key[1];
  const int64_t m = key[2], n = key[3], k = key[4], lda = key[5], ldb = key[6], ldc = key[7];
  const auto ab = static_cast<GemmType>(key[8]), ct = static_cast<GemmType>(key[9]);
  Descriptors d;
  MOK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  MOK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  MOK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, cuda_type(ab), tb ? k : n, tb ? n : k, ldb));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, cuda_type(ab), ta ? m : k, ta ? k : m, lda));
  MOK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, cuda_type(ct), n, m, ldc));
  return d;
}

void LtGemm::destroy(Descriptors& d) {
  if (d.a) cublasLtMatrixLayoutDestroy(d.a);
  if (d.b) cublasLtMatrixLayoutDestroy(d.b);
  if (d.c) cublasLtMatrixLayoutDestroy(d.c);
  if (d.op) cublasLtMatmulDescDestroy(d.op);
  d = Descriptors{};
}

// The heuristic's first `count` candidates for the problem of `key` (described by `d`) that
// it says run, in its order; fewer (or none) when it has fewer.
std::vector<cublasLtMatmulAlgo_t> LtGemm::candidates(const PlanKey& key, const Descriptors& d, int count) {
  ++heuristic_queries_;
  cublasLtMatmulPreference_t pref = nullptr;
  MOK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  // Split-K only with a separate fp32 reduction: not in place in the output buffer, whose
  // type (bf16) would round every partial sum.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  const uint64_t numerics = allowed_numerics(static_cast<GemmType>(key[8]));
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
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(count, 1)));
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, d.op, d.a, d.b, d.c, d.c, pref, static_cast<int>(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> out;
  if (status != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < found; ++i)
    if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS && results[size_t(i)].workspaceSize <= workspace_bytes_)
      out.push_back(results[size_t(i)].algo);
  return out;
}

// The heuristic's first choice for the problem of `key` (candidate_rank_ for measurement), or
// false.
bool LtGemm::heuristic(const PlanKey& key, const Descriptors& d, cublasLtMatmulAlgo_t& algo) {
  const std::vector<cublasLtMatmulAlgo_t> found = candidates(key, d, candidate_rank_ + 1);
  if (found.size() <= static_cast<size_t>(candidate_rank_)) return false;
  algo = found[static_cast<size_t>(candidate_rank_)];
  return true;
}

// Token counts change every step (rows per expert, or the reduction length of a weight
// gradient), so the heuristic is asked for a size class, not the exact size: the dimension
// that is a row count of the stored operands (m unless A is transposed; k when A is and B is
// not) is rounded up to 8 classes per octave (16384, 768, 2304 stay as they are; 4100 →
// 4608). Rounding up keeps the class's workspace need ≥ the exact one's, and leading
// dimensions stay valid. The class's algorithm is then checked on the exact problem
// (cublasLtMatmulAlgoCheck); if it does not fit, the exact problem gets its own heuristic
// choice. Either way a given problem always runs the same algorithm.
namespace {
int64_t size_class(int64_t x) {
  if (x <= 8) return x;
  int64_t step = 1;
  while (step * 16 <= x) step *= 2;
  return (x + step - 1) / step * step;
}
}  // namespace

LtGemm::PlanKey LtGemm::size_class_of(const PlanKey& key) {
  PlanKey c = key;
  const bool ta = key[0], tb = key[1];
  if (!ta) c[2] = size_class(key[2]);
  if (ta && !tb) c[4] = size_class(key[4]);
  return c;
}

const LtGemm::Plan& LtGemm::plan_for(const PlanKey& key, const Operands& call) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const PlanKey cls = size_class_of(key);
  auto chosen = class_algos_.find(cls);
  if (chosen == class_algos_.end()) {
    Descriptors d = make_descriptors(cls);
    cublasLtMatmulAlgo_t algo{};
    const bool found = heuristic(cls, d, algo);
    destroy(d);
    if (found) chosen = class_algos_.emplace(cls, algo).first;
  }
  Plan p;
  p.d = make_descriptors(key);
  bool ready = false;
  if (chosen != class_algos_.end()) {
    cublasLtMatmulHeuristicResult_t check{};
    ready = cublasLtMatmulAlgoCheck(handle_, p.d.op, p.d.a, p.d.b, p.d.c, p.d.c, &chosen->second, &check) ==
                CUBLAS_STATUS_SUCCESS &&
            check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes_;
    if (ready) p.algo = chosen->second;
  }
  if (!ready) ready = heuristic(key, p.d, p.algo);
  if (!ready) {
    destroy(p.d);
    const bool ta = key[0], tb = key[1];
    throw std::runtime_error("LtGemm: cuBLASLt has no algorithm for " +
                             describe(ta, tb, key[2], key[3], key[4], key[5], key[6], key[7],
                                      static_cast<GemmType>(key[8]), static_cast<GemmType>(key[9])) +
                             " (alignment A " + std::to_string(key[10]) + ", B " + std::to_string(key[11]) + ", C " +
                             std::to_string(key[12]) + " bytes)");
  }
  if (tunable(key, call)) {
    try {
      tune(key, p, call);
    } catch (...) {
      destroy(p.d);
      throw;
    }
  }
  return plans_.emplace(key, p).first->second;
}

namespace {
constexpr int kTuneCandidates = 8;       // the heuristic's first eight: where the fastest was found
constexpr float kTuneTimedMs = 1.f;      // timed runs per candidate: about this much work,
constexpr int kTuneMinRepeats = 3;       // at least this many runs and at most
constexpr int kTuneMaxRepeats = 32;      // this many (after one untimed run)
constexpr double kTuneMargin = 0.02;     // another candidate must be 2 % faster to be taken

// Bytes from C's first element to its last (m rows of n, ldc apart): what a digest compares.
size_t output_span_bytes(int64_t m, int64_t n, int64_t ldc, GemmType c) {
  return size_t((m - 1) * ldc + n) * gemm_type_bytes(c);
}
}  // namespace

bool LtGemm::tunable(const PlanKey& key, const Operands& call) const {
  const size_t span = output_span_bytes(key[2], key[3], key[7], static_cast<GemmType>(key[9]));
  // Not inside a recorded CUDA graph: timing waits for the device (the first choice is kept;
  // the candidates give its bits anyway).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MOK_CUDA_CHECK(cudaStreamIsCapturing(call.stream, &capture));
  return capture == cudaStreamCaptureStatusNone && tuning_ && candidate_rank_ == 0 &&
         static_cast<GemmType>(key[8]) == GemmType::bf16 &&
         size_class_of(key) == key && (call.beta == 0.f || call.c_in) && span % 4 == 0 &&
         reinterpret_cast<uintptr_t>(call.c) % 4 == 0;
}

// Runs each candidate on the call's operands (C written each time, A, B and C in only read),
// keeps those whose output digest equals the first choice's, and pins the fastest of them.
void LtGemm::tune(const PlanKey& key, Plan& p, const Operands& call) {
  std::vector<cublasLtMatmulAlgo_t> tried{p.algo};
  for (const cublasLtMatmulAlgo_t& algo : candidates(key, p.d, kTuneCandidates))
    if (std::memcmp(&algo, &p.algo, sizeof algo) != 0) tried.push_back(algo);
  if (tried.size() < 2) return;
  if (!digest_) {
    MOK_CUDA_CHECK(cudaMalloc(&digest_, sizeof(BitwiseDigest)));
    MOK_CUDA_CHECK(cudaEventCreate(&tune_start_));
    MOK_CUDA_CHECK(cudaEventCreate(&tune_stop_));
  }
  const size_t span = output_span_bytes(key[2], key[3], key[7], static_cast<GemmType>(key[9]));
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(handle_, p.d.op, &call.alpha, call.b, p.d.a, call.a, p.d.b, &call.beta,
                          call.c_in ? call.c_in : call.c, p.d.c, call.c, p.d.c, &algo, workspace_, workspace_bytes_,
                          call.stream) == CUBLAS_STATUS_SUCCESS;
  };
  auto digest = [&] {
    bitwise_digest(call.c, span, digest_, call.stream);
    BitwiseDigest host;
    MOK_CUDA_CHECK(cudaMemcpyAsync(&host, digest_, sizeof host, cudaMemcpyDeviceToHost, call.stream));
    MOK_CUDA_CHECK(cudaStreamSynchronize(call.stream));
    return host;
  };
  int repeats = kTuneMinRepeats;
  auto timed_ms = [&](const cublasLtMatmulAlgo_t& algo) {  // per run
    MOK_CUDA_CHECK(cudaEventRecord(tune_start_, call.stream));
    for (int r = 0; r < repeats; ++r) run(algo);
    MOK_CUDA_CHECK(cudaEventRecord(tune_stop_, call.stream));
    MOK_CUDA_CHECK(cudaEventSynchronize(tune_stop_));
    float ms = 0.f;
    MOK_CUDA_CHECK(cudaEventElapsedTime(&ms, tune_start_, tune_stop_));
    return ms / static_cast<float>(repeats);
  };
  if (!run(tried[0])) return;
  const BitwiseDigest first = digest();
  // an output mostly of zeros (an untrained gradient, say) cannot tell two summation orders apart
  if (first.nonzero_words * 2 < span / 4) return;
  ++tuned_problems_;
  // small products get more runs, so that launch jitter does not pick the candidate
  const float one_run = timed_ms(tried[0]);
  repeats = std::clamp(static_cast<int>(std::ceil(kTuneTimedMs / std::max(one_run, 1e-3f))), kTuneMinRepeats,
                       kTuneMaxRepeats);
  size_t best = 0;
  float best_ms = timed_ms(tried[0]);
  for (size_t i = 1; i < tried.size(); ++i) {
    if (!run(tried[i]) || !(digest() == first)) continue;
    const float ms = timed_ms(tried[i]);
    if (ms < best_ms * (1.0 - kTuneMargin)) {
      best = i;
      best_ms = ms;
    }
  }
  MOK_CUDA_CHECK(cudaGetLastError());
  if (best != 0) {
    p.algo = tried[best];
    ++tuned_to_another_;
  }
}

void LtGemm::use_candidate(int rank) {
  if (rank < 0) throw std::invalid_argument("LtGemm::use_candidate: negative rank");
  for (auto& [key, plan] : plans_) destroy(plan.d);
  plans_.clear();
  class_algos_.clear();
  last_plan_ = nullptr;
  candidate_rank_ = rank;
}

std::string LtGemm::last_algorithm() const {
  if (!last_plan_) return "";
  struct Field {
    const char* name;
    cublasLtMatmulAlgoConfigAttributes_t attribute;
  };
  const Field fields[] = {{"algo", CUBLASLT_ALGO_CONFIG_ID},
                          {"tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
                          {"stages", CUBLASLT_ALGO_CONFIG_STAGES_ID},
                          {"split-k", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
                          {"reduction", CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME},
                          {"swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING},
                          {"custom", CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION},
                          {"cluster", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID}};
  std::string out;
  for (const Field& f : fields) {
    // The attributes are 16- to 32-bit and the size must be exact: asked first, then read
    // into the low bytes of a zeroed 64-bit value (little-endian).
    size_t size = 0, written = 0;
    uint64_t value = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&last_plan_->algo, f.attribute, nullptr, 0, &size) !=
            CUBLAS_STATUS_SUCCESS ||
        size == 0 || size > sizeof value ||
        cublasLtMatmulAlgoConfigGetAttribute(&last_plan_->algo, f.attribute, &value, size, &written) !=
            CUBLAS_STATUS_SUCCESS)
      continue;
    out += (out.empty() ? "" : " ") + std::string(f.name) + " " + std::to_string(value);
  }
  return out;
}

void LtGemm::scale_only(int64_t m, int64_t n, float beta, void* c, int64_t ldc, GemmType c_type,
                        cudaStream_t stream) {
  if (beta == 1.f) return;
  const size_t es = gemm_type_bytes(c_type);
  if (beta == 0.f) {  // all-zero bytes are +0 in f32 and bf16
    MOK_CUDA_CHECK(cudaMemset2DAsync(c, size_t(ldc) * es, 0, size_t(n) * es, size_t(m), stream));
    return;
  }
  // C = beta·C with the elementwise scale kernel: one call over C when its rows are
  // contiguous, else one per row (k = 0 or alpha = 0 only: never on a training path).
  auto scale_rows = [&](void* p, int64_t count) {
    if (c_type == GemmType::f32) {
      scale<float>(static_cast<float*>(p), beta, static_cast<float*>(p), count, stream);
    } else {
      scale<bf16>(static_cast<bf16*>(p), beta, static_cast<bf16*>(p), count, stream);
    }
  };
  if (ldc == n) {
    scale_rows(c, m * n);
  } else {
    for (int64_t r = 0; r < m; ++r) scale_rows(static_cast<char*>(c) + size_t(r) * ldc * es, n);
  }
}

void LtGemm::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                  int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, GemmType ab_type,
                  GemmType c_type, cudaStream_t stream, const void* c_in) {
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
  if (c_in == c) c_in = nullptr;
  if (k == 0 || alpha == 0.f) {
    if (c_in && beta != 0.f) {  // C = beta·C_in: copy, then scale in place
      const size_t es = gemm_type_bytes(c_type);
      MOK_CUDA_CHECK(cudaMemcpy2DAsync(c, size_t(ldc) * es, c_in, size_t(ldc) * es, size_t(n) * es, size_t(m),
                                       cudaMemcpyDeviceToDevice, stream));
    }
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
                    std::min(pointer_alignment(c), c_in ? pointer_alignment(c_in) : int64_t(16))};
  const Plan& p = plan_for(key, Operands{a, b, c, c_in, alpha, beta, stream});
  last_plan_ = &p;
  MOK_CUBLAS_CHECK(cublasLtMatmul(handle_, p.d.op, &alpha, b, p.d.a, a, p.d.b, &beta, c_in ? c_in : c, p.d.c, c,
                                  p.d.c, &p.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace mok::cuda
