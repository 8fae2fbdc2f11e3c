#include "kernels/grouped_gemm.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/grouped_tile_list.cuh"

namespace mok::cuda {
namespace {

constexpr int kMaxGroups = GroupedGemm::kMaxGroups;

// The device pointer arrays of cublasGemmGroupedBatchedEx, passed by value as launch
// arguments (24 KiB: CUDA ≥ 12.1 takes up to 32 KiB of arguments), so no host buffer has to
// live until the copy runs and the call can be captured in a graph.
struct PointerTable {
  int count;
  const void* a[kMaxGroups];
  const void* b[kMaxGroups];
  void* c[kMaxGroups];
};

// out (3 · kMaxGroups): the A, B and C arrays.
__global__ void write_pointer_table_kernel(const PointerTable table, void** out) {
  for (int i = threadIdx.x; i < table.count; i += blockDim.x) {
    out[i] = const_cast<void*>(table.a[i]);
    out[kMaxGroups + i] = const_cast<void*>(table.b[i]);
    out[2 * kMaxGroups + i] = table.c[i];
  }
}

cudaDataType_t cuda_type(GemmType t) { return t == GemmType::f32 ? CUDA_R_32F : CUDA_R_16BF; }

void check_sizes(const char* what, int groups, int64_t n, int64_t k) {
  if (n < 0 || k < 0)
    throw std::invalid_argument(std::string("GroupedGemm::") + what + ": negative size (n " + std::to_string(n) +
                                ", k " + std::to_string(k) + ")");
  if (groups < 0 || groups > kMaxGroups)
    throw std::invalid_argument(std::string("GroupedGemm::") + what + ": " + std::to_string(groups) +
                                " groups, must be in [0, " + std::to_string(kMaxGroups) + "]");
}

void check_offsets(const char* what, int groups, const int64_t* off, int64_t n, int64_t k) {
  check_sizes(what, groups, n, k);
  if (groups == 0) return;
  if (!off) throw std::invalid_argument(std::string("GroupedGemm::") + what + ": no offsets");
  if (off[0] < 0) throw std::invalid_argument(std::string("GroupedGemm::") + what + ": negative first offset");
  for (int g = 0; g < groups; ++g)
    if (off[g + 1] < off[g])
      throw std::invalid_argument(std::string("GroupedGemm::") + what + ": offsets decrease at group " +
                                  std::to_string(g) + " (" + std::to_string(off[g]) + " → " +
                                  std::to_string(off[g + 1]) + ")");
}

// What the host can check of device offsets: the sizes, that there are offsets, M ≥ 0.
void check_device_offsets(const char* what, int groups, const int64_t* device_offsets, int64_t rows, int64_t n,
                          int64_t k) {
  check_sizes(what, groups, n, k);
  if (groups > 0 && !device_offsets) throw std::invalid_argument(std::string("GroupedGemm::") + what + ": no offsets");
  if (rows < 0 || (groups == 0 && rows > 0))
    throw std::invalid_argument(std::string("GroupedGemm::") + what + ": " + std::to_string(rows) + " rows in " +
                                std::to_string(groups) + " groups");
}

const char* byte_ptr(const void* p, int64_t elements, GemmType t) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(gemm_type_bytes(t));
}

// The kernel's call of the products, without its offsets.
GroupedKernelCall rows_call(bool trans_b, int groups, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                            const void* b, int64_t b_group_stride, float beta, void* c, int64_t ldc) {
  GroupedKernelCall call;
  call.form = trans_b ? GroupedKernelForm::rows_bt : GroupedKernelForm::rows;
  call.groups = groups;
  call.n = n, call.k = k;
  call.alpha = alpha, call.beta = beta;
  call.a = a, call.lda = lda;
  call.b = b, call.ldb = trans_b ? k : n, call.b_group_stride = b_group_stride;
  call.c = c, call.ldc = ldc;
  return call;
}

GroupedKernelCall weight_grad_call(int groups, int64_t k, int64_t n, float alpha, const void* a, int64_t lda,
                                   const void* dy, int64_t ldy, void* dw, int64_t dw_group_stride, float beta) {
  GroupedKernelCall call;
  call.form = GroupedKernelForm::weight_grad;
  call.groups = groups;
  call.n = n, call.k = k;
  call.alpha = alpha, call.beta = beta;
  call.a = a, call.lda = lda;
  call.b = dy, call.ldb = ldy;
  call.c = dw, call.ldc = n, call.c_group_stride = dw_group_stride;
  return call;
}

}  // namespace

const char* grouped_gemm_method_name(GroupedGemmMethod method) {
  switch (method) {
    case GroupedGemmMethod::loop: return "loop";
    case GroupedGemmMethod::streams: return "streams";
    case GroupedGemmMethod::cublas: return "cublas";
    case GroupedGemmMethod::kernel: return "kernel";
  }
  return "?";
}

GroupedGemm::GroupedGemm(LtGemm& lt, GroupedGemmMethod method, int side_streams) : lt_(lt), method_(method) {
  MOK_CUDA_CHECK(cudaEventCreateWithFlags(&stream_switch_, cudaEventDisableTiming));
  if (method_ == GroupedGemmMethod::streams) {
    if (side_streams < 1) throw std::invalid_argument("GroupedGemm: side_streams must be ≥ 1");
    MOK_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    for (int s = 0; s < side_streams; ++s) {
      cudaStream_t st = nullptr;
      MOK_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      side_streams_.push_back(st);
      cudaEvent_t ev = nullptr;
      MOK_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
      joins_.push_back(ev);
      // Same workspace size as `lt`: the heuristic then pins the same algorithm per problem,
      // so loop and streams give the same bits (tuning keeps them: it pins only candidates with
      // the first choice's bits). Tuning as `lt` has it.
      side_lt_.push_back(std::make_unique<LtGemm>(lt.workspace_bytes()));
      side_lt_.back()->set_tuning(lt.tuning());
    }
  } else if (method_ == GroupedGemmMethod::cublas) {
    MOK_CUBLAS_CHECK(cublasCreate(&blas_));
    MOK_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));  // no TF32
    MOK_CUBLAS_CHECK(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
    MOK_CUDA_CHECK(cudaMalloc(&blas_workspace_, lt.workspace_bytes()));
    MOK_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, lt.workspace_bytes()));
    MOK_CUDA_CHECK(cudaMalloc(&device_pointers_, 3 * kMaxGroups * sizeof(void*)));
  } else if (method_ == GroupedGemmMethod::kernel) {
    int device = 0;
    MOK_CUDA_CHECK(cudaGetDevice(&device));
    MOK_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
    grouped_gemm_kernel_prepare();
    MOK_CUDA_CHECK(cudaMalloc(&device_list_, sizeof(GroupedTileList)));
  }
}

GroupedGemm::~GroupedGemm() {
  side_lt_.clear();
  for (cudaStream_t s : side_streams_) cudaStreamDestroy(s);
  for (cudaEvent_t e : joins_) cudaEventDestroy(e);
  if (fork_) cudaEventDestroy(fork_);
  if (stream_switch_) cudaEventDestroy(stream_switch_);
  if (device_pointers_) cudaFree(device_pointers_);
  if (device_list_) cudaFree(device_list_);
  if (blas_) cublasDestroy(blas_);
  if (blas_workspace_) cudaFree(blas_workspace_);
}

void GroupedGemm::order_after_previous_stream(cudaStream_t stream) {
  if (used_ && stream != last_stream_) {
    MOK_CUDA_CHECK(cudaEventRecord(stream_switch_, last_stream_));
    MOK_CUDA_CHECK(cudaStreamWaitEvent(stream, stream_switch_, 0));
  }
  last_stream_ = stream;
  used_ = true;
}

void GroupedGemm::rows(bool trans_b, int groups, const int64_t* host_offsets, int64_t n, int64_t k, float alpha,
                       const void* a, int64_t lda, const void* b, int64_t b_group_stride, float beta, void* c,
                       int64_t ldc, GemmType ab_type, GemmType c_type, cudaStream_t stream) {
  check_offsets("rows", groups, host_offsets, n, k);
  if (method_ == GroupedGemmMethod::kernel && ab_type == GemmType::bf16 && c_type == GemmType::bf16) {
    GroupedKernelCall call = rows_call(trans_b, groups, n, k, alpha, a, lda, b, b_group_stride, beta, c, ldc);
    call.host_offsets = host_offsets;
    if (run_kernel(call, stream)) return;
  }
  std::vector<Problem> problems;
  for (int g = 0; g < groups; ++g) {
    const int64_t m = host_offsets[g + 1] - host_offsets[g];
    if (m == 0) continue;
    problems.push_back({g, false, trans_b, m, n, k, byte_ptr(a, host_offsets[g] * lda, ab_type), lda,
                        byte_ptr(b, g * b_group_stride, ab_type), trans_b ? k : n,
                        const_cast<char*>(byte_ptr(c, host_offsets[g] * ldc, c_type)), ldc});
  }
  run(problems, alpha, beta, ab_type, c_type, stream);
}

void GroupedGemm::weight_grad(int groups, const int64_t* host_offsets, int64_t k, int64_t n, float alpha,
                              const void* a, int64_t lda, const void* dy, int64_t ldy, float* dw,
                              int64_t dw_group_stride, GemmType ab_type, cudaStream_t stream) {
  weight_grad_into(groups, host_offsets, k, n, alpha, a, lda, dy, ldy, dw, dw_group_stride, 1.f, ab_type,
                   GemmType::f32, stream);
}

void GroupedGemm::weight_grad_into(int groups, const int64_t* host_offsets, int64_t k, int64_t n, float alpha,
                                   const void* a, int64_t lda, const void* dy, int64_t ldy, void* dw,
                                   int64_t dw_group_stride, float beta, GemmType ab_type, GemmType c_type,
                                   cudaStream_t stream) {
  check_offsets("weight_grad", groups, host_offsets, n, k);
  if (method_ == GroupedGemmMethod::kernel && ab_type == GemmType::bf16 && c_type == GemmType::f32) {
    GroupedKernelCall call = weight_grad_call(groups, k, n, alpha, a, lda, dy, ldy, dw, dw_group_stride, beta);
    call.host_offsets = host_offsets;
    if (run_kernel(call, stream)) return;
  }
  std::vector<Problem> problems;
  for (int g = 0; g < groups; ++g) {
    const int64_t m = host_offsets[g + 1] - host_offsets[g];
    if (m == 0) continue;  // dW_g += nothing
    problems.push_back({g, true, false, k, n, m, byte_ptr(a, host_offsets[g] * lda, ab_type), lda,
                        byte_ptr(dy, host_offsets[g] * ldy, ab_type), ldy,
                        const_cast<char*>(byte_ptr(dw, g * dw_group_stride, c_type)), n});
  }
  run(problems, alpha, beta, ab_type, c_type, stream);
}

bool GroupedGemm::rows_device(bool trans_b, int groups, const int64_t* device_offsets, int64_t rows, int64_t n,
                              int64_t k, float alpha, const void* a, int64_t lda, const void* b,
                              int64_t b_group_stride, float beta, void* c, int64_t ldc, GemmType ab_type,
                              GemmType c_type, cudaStream_t stream) {
  check_device_offsets("rows_device", groups, device_offsets, rows, n, k);
  if (method_ != GroupedGemmMethod::kernel || ab_type != GemmType::bf16 || c_type != GemmType::bf16) return false;
  GroupedKernelCall call = rows_call(trans_b, groups, n, k, alpha, a, lda, b, b_group_stride, beta, c, ldc);
  call.device_offsets = device_offsets;
  call.rows = rows;
  return run_kernel(call, stream);
}

bool GroupedGemm::weight_grad_into_device(int groups, const int64_t* device_offsets, int64_t rows, int64_t k,
                                          int64_t n, float alpha, const void* a, int64_t lda, const void* dy,
                                          int64_t ldy, void* dw, int64_t dw_group_stride, float beta,
                                          GemmType ab_type, GemmType c_type, cudaStream_t stream) {
  check_device_offsets("weight_grad_into_device", groups, device_offsets, rows, n, k);
  if (method_ != GroupedGemmMethod::kernel || ab_type != GemmType::bf16 || c_type != GemmType::f32) return false;
  GroupedKernelCall call = weight_grad_call(groups, k, n, alpha, a, lda, dy, ldy, dw, dw_group_stride, beta);
  call.device_offsets = device_offsets;
  call.rows = rows;
  return run_kernel(call, stream);
}

// With host offsets nothing of the kernel's call outlives the launch (the tile list is its
// argument), so there is no ordering to keep with calls on other streams. With device offsets
// the list is built in device_list_, which the previous call's kernels may still be reading on
// another stream: order after it. What the Hopper kernel refuses (another GPU, k = 0, a shared
// B) runs on the mma.sync kernel's tile of the same shape.
bool GroupedGemm::run_kernel(GroupedKernelCall call, cudaStream_t stream) {
  if (call.device_offsets) call.device_list = device_list_;
  GroupedKernelTile tile = kernel_tile_;
  if (narrow_tiles_ && call.form != GroupedKernelForm::weight_grad && call.groups > 0) {
    // Decode-sized: at most 16 rows a non-empty segment on average (one narrow row tile), and
    // the wide tiles of min(groups, M) segments fewer than the SMs. Only M is known with device
    // offsets, so both count from M and the groups: a recorded step keeps its choice.
    const int64_t rows = call.device_offsets ? call.rows : call.host_offsets[call.groups];
    const int64_t segments = std::min<int64_t>(call.groups, rows);
    const int64_t cols = grouped_kernel_tile_cols(tile);
    const int64_t wide_tiles = segments * ((call.n + cols - 1) / cols);
    if (rows > 0 && rows <= int64_t(grouped_kernel_tile_rows(GroupedKernelTile::m16n64)) * segments &&
        wide_tiles < sm_count_)
      tile = GroupedKernelTile::m16n64;
  }
  std::string refusal = grouped_kernel_refusal(call, tile);
  if (!refusal.empty() && tile == GroupedKernelTile::m128n256_wgmma) {
    tile = GroupedKernelTile::m128n256;
    refusal = grouped_kernel_refusal(call, tile);
  }
  if (!refusal.empty()) return false;
  if (call.device_offsets) order_after_previous_stream(stream);
  grouped_gemm_kernel(call, tile, stream);
  ++kernel_calls_;
  if (tile == GroupedKernelTile::m128n256_wgmma) ++wgmma_calls_;
  if (tile == GroupedKernelTile::m16n64 && kernel_tile_ != GroupedKernelTile::m16n64) ++narrow_calls_;
  return true;
}

void GroupedGemm::run(const std::vector<Problem>& problems, float alpha, float beta, GemmType ab_type,
                      GemmType c_type, cudaStream_t stream) {
  if (problems.empty()) return;
  order_after_previous_stream(stream);
  if (method_ == GroupedGemmMethod::streams) {
    run_streams(problems, alpha, beta, ab_type, c_type, stream);
    return;
  }
  if (method_ == GroupedGemmMethod::cublas && !cublas_declined(ab_type, c_type)) {
    if (run_cublas(problems, alpha, beta, ab_type, c_type, stream) == CUBLAS_STATUS_SUCCESS) return;
    declined_[static_cast<int>(ab_type)][static_cast<int>(c_type)] = true;
  }
  for (const Problem& p : problems)
    lt_.gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, alpha, p.a, p.lda, p.b, p.ldb, beta, p.c, p.ldc, ab_type, c_type,
             stream);
}

// Each problem goes to the side stream with the least work so far (multiply-adds; ties to
// the lower stream), in group order: a fixed assignment for given offsets.
void GroupedGemm::run_streams(const std::vector<Problem>& problems, float alpha, float beta, GemmType ab_type,
                              GemmType c_type, cudaStream_t stream) {
  const int streams = static_cast<int>(side_streams_.size());
  std::vector<double> work(streams, 0.0);
  std::vector<int> stream_of(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    int best = 0;
    for (int s = 1; s < streams; ++s)
      if (work[s] < work[best]) best = s;
    stream_of[i] = best;
    work[best] += double(problems[i].m) * problems[i].n * problems[i].k;
  }
  MOK_CUDA_CHECK(cudaEventRecord(fork_, stream));
  for (int s = 0; s < streams; ++s)
    if (work[s] > 0) MOK_CUDA_CHECK(cudaStreamWaitEvent(side_streams_[s], fork_, 0));
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    const int s = stream_of[i];
    side_lt_[s]->gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, alpha, p.a, p.lda, p.b, p.ldb, beta, p.c, p.ldc, ab_type,
                      c_type, side_streams_[s]);
  }
  for (int s = 0; s < streams; ++s) {
    if (work[s] == 0) continue;
    MOK_CUDA_CHECK(cudaEventRecord(joins_[s], side_streams_[s]));
    MOK_CUDA_CHECK(cudaStreamWaitEvent(stream, joins_[s], 0));
  }
}

// Column-major, like LtGemm: each row-major C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ.
cublasStatus_t GroupedGemm::run_cublas(const std::vector<Problem>& problems, float alpha, float beta,
                                       GemmType ab_type, GemmType c_type, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(problems.size());
  if (c_type == GemmType::bf16 && ab_type == GemmType::f32)
    throw std::invalid_argument("GroupedGemm: f32 inputs with a bf16 output are not supported");
  std::vector<cublasOperation_t> trans_first(count), trans_second(count);
  std::vector<int64_t> m(count), n(count), k(count), ld_first(count), ld_second(count), ldc(count), size(count, 1);
  std::vector<float> alphas(count, alpha), betas(count, beta);
  PointerTable table;
  table.count = static_cast<int>(count);
  for (int64_t i = 0; i < count; ++i) {
    const Problem& p = problems[i];
    if (p.lda < (p.trans_a ? p.m : p.k) || p.ldb < (p.trans_b ? p.k : p.n) || p.ldc < p.n)
      throw std::invalid_argument("GroupedGemm: leading dimension smaller than a row in group " +
                                  std::to_string(p.group));
    trans_first[i] = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    trans_second[i] = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    m[i] = p.n;
    n[i] = p.m;
    k[i] = p.k;
    ld_first[i] = p.ldb;
    ld_second[i] = p.lda;
    ldc[i] = p.ldc;
    table.a[i] = p.b;
    table.b[i] = p.a;
    table.c[i] = p.c;
  }
  write_pointer_table_kernel<<<1, 256, 0, stream>>>(table, device_pointers_);
  MOK_CUDA_CHECK_LAUNCH();
  const void* const* first = const_cast<const void* const*>(device_pointers_);
  const void* const* second = const_cast<const void* const*>(device_pointers_ + kMaxGroups);
  void* const* out = device_pointers_ + 2 * kMaxGroups;
  MOK_CUBLAS_CHECK(cublasSetStream(blas_, stream));
  const cublasStatus_t status = cublasGemmGroupedBatchedEx_64(
      blas_, trans_first.data(), trans_second.data(), m.data(), n.data(), k.data(), alphas.data(), first,
      cuda_type(ab_type), ld_first.data(), second, cuda_type(ab_type), ld_second.data(), betas.data(), out,
      cuda_type(c_type), ldc.data(), count, size.data(), CUBLAS_COMPUTE_32F);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) MOK_CUBLAS_CHECK(status);
  return status;
}

}  // namespace mok::cuda
