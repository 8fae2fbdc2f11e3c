#pragma once
// GroupedGemm: the matrix products of stacked experts over their token segments.
//
// Experts are stacked, W (E, k, n). The MoE layer sorts its (token, slot) pairs by expert,
// so expert g's rows are the contiguous segment [off[g], off[g+1]) of the row matrices.
// The offsets are host values for every method; the kernel method also takes them in device
// memory (rows_device, weight_grad_into_device), so that the per-expert counts need not cross
// to the host in the middle of an MoE layer and the step can be one CUDA graph. Two
// products, row-major, leading dimensions in elements:
//
//   rows:         C[rows g] = alpha·A[rows g](m_g, k)·op(B_g) + beta·C[rows g]
//                 op(B_g) = B_g (k, n), or B_gᵀ with B_g stored (n, k)   (forward; dX)
//   weight_grad:  dW_g (k, n) += alpha·A[rows g]ᵀ·dY[rows g]              (dW, fp32)
//
// Empty groups compute nothing (weight_grad leaves their dW_g as it is). The methods differ
// in how the groups share the GPU; every one is deterministic (fixed kernels and workspace,
// no atomics in the sums):
//   loop     one LtGemm call per group in order, on the caller's stream
//   streams  groups spread over side streams (each with its own LtGemm of the same
//            workspace size, so the same pinned algorithm per group and the same bits as
//            loop), joined back into the caller's stream: small groups run side by side
//   cublas   one cublasGemmGroupedBatchedEx call (cuBLAS's own grouped GEMM, fixed
//            workspace, no atomics); its device pointer arrays are written by a small
//            kernel from launch arguments, so nothing host-side has to outlive the call.
//            A type combination cuBLAS answers NOT_SUPPORTED for (it may list no bf16 → f32)
//            runs as loop from then on, and cublas_declined() says so
//   kernel   the project's grouped kernel (kernels/grouped_gemm_kernel.h): every group in one
//            launch, each output tile computed by one CTA in a fixed order. It takes bf16 → bf16
//            rows and bf16 → f32 weight gradients whose sizes and strides are multiples of 8
//            elements on 16-byte aligned pointers; anything else (f32 parity runs, odd strides,
//            weight gradients into bf16) runs as loop. kernel_calls() counts the calls it took
// The timings (kernels/checks/gemm_timings.cpp) measure all four at the benchmark shapes.
//
// Device offsets: the kernel method builds its tile list from them on the stream, into a buffer
// this object owns (kernels/grouped_tile_list.cuh); a call on another stream than the
// previous one first waits for the previous stream, so a list still being read is not
// rewritten. Nothing of such a call needs the host (no sync, no allocation, no copy): it can be
// captured in a graph, whose replays compute with the offsets the device holds then, bit for
// bit as the host-offset call would on those offsets (within a capture keep the object on the
// capturing stream: a wait on an event recorded outside the capture cannot be captured). What the kernel cannot take (another
// method, other types, a refusal) is not run: the call returns false, and the caller reads
// the offsets to the host and calls rows / weight_grad_into.
//
// One object per device and stream owner, not thread-safe, like LtGemm. All device memory
// (side workspaces, pointer arrays, the kernel's tile list) is allocated at construction.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm_lt.h"
#include "kernels/grouped_gemm_kernel.h"

namespace mok::cuda {

enum class GroupedGemmMethod { loop, streams, cublas, kernel };
const char* grouped_gemm_method_name(GroupedGemmMethod method);

class GroupedGemm {
 public:
  static constexpr int kMaxGroups = 1024;
  static_assert(kMaxGroups <= kGroupedKernelMaxGroups, "the kernel takes every group count");
  static constexpr int kDefaultSideStreams = 4;

  // `lt` runs the loop method (and is not owned). The streams method owns `side_streams`
  // LtGemm objects (one workspace each); the cublas method a cuBLAS handle and workspace; the
  // kernel method nothing (it raises the kernel's shared-memory limit on the current device).
  explicit GroupedGemm(LtGemm& lt, GroupedGemmMethod method = GroupedGemmMethod::streams,
                       int side_streams = kDefaultSideStreams);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  GroupedGemmMethod method() const { return method_; }
  // cublas method: cuBLAS refused this type combination, which therefore runs as loop.
  bool cublas_declined(GemmType ab_type, GemmType c_type) const {
    return declined_[static_cast<int>(ab_type)][static_cast<int>(c_type)];
  }
  // kernel method: the calls the grouped kernel took (the others ran as loop), those of them
  // that ran on the Hopper kernel (tile m128n256_wgmma; what it refuses runs on m128n256), and
  // the tile (128×256 unless set; every tile is timed in gemm_timings.cpp).
  size_t kernel_calls() const { return kernel_calls_; }
  size_t wgmma_calls() const { return wgmma_calls_; }
  GroupedKernelTile kernel_tile() const { return kernel_tile_; }
  void set_kernel_tile(GroupedKernelTile tile) { kernel_tile_ = tile; }
  // Decode-sized calls on the narrow tile: a rows-form call of at most 16 rows a segment on
  // average (M over min(groups, M) segments: a row or a few per expert when decoding) whose
  // segments would give the kernel tile fewer output tiles than the GPU has SMs runs on the
  // 16×64 tile instead, which gives the same bits (off unless set; CudaOps sets it,
  // MOK_GROUPED_NARROW=off keeps the kernel tile). narrow_calls(): the calls that ran on it so.
  void set_narrow_tiles(bool on) { narrow_tiles_ = on; }
  size_t narrow_calls() const { return narrow_calls_; }

  // host_offsets (groups + 1): non-decreasing, host_offsets[0] = 0. b_group_stride: elements
  // between B_g and B_{g+1}. B_g's leading dimension is its row length (n, or k with trans_b).
  void rows(bool trans_b, int groups, const int64_t* host_offsets, int64_t n, int64_t k, float alpha,
            const void* a, int64_t lda, const void* b, int64_t b_group_stride, float beta, void* c,
            int64_t ldc, GemmType ab_type, GemmType c_type, cudaStream_t stream);

  // a (M, k), dy (M, n) with M = host_offsets[groups]; dw (groups, k, n) fp32 with row length
  // n and dw_group_stride elements between groups.
  void weight_grad(int groups, const int64_t* host_offsets, int64_t k, int64_t n, float alpha, const void* a,
                   int64_t lda, const void* dy, int64_t ldy, float* dw, int64_t dw_group_stride,
                   GemmType ab_type, cudaStream_t stream);
  // The same products written (beta 0) or accumulated (beta 1) into dw of any GEMM output
  // type: with c_type bf16, cuBLAS's grouped GEMM can take them (it declines bf16 → f32), and
  // the caller adds the bf16 block into the fp32 gradients. Blocks of empty groups are not
  // touched.
  void weight_grad_into(int groups, const int64_t* host_offsets, int64_t k, int64_t n, float alpha, const void* a,
                        int64_t lda, const void* dy, int64_t ldy, void* dw, int64_t dw_group_stride, float beta,
                        GemmType ab_type, GemmType c_type, cudaStream_t stream);

  // rows and weight_grad_into with the offsets in device memory (groups + 1, non-decreasing,
  // offsets[0] ≥ 0, offsets[groups] ≤ rows when the call runs on the stream — rows past it are
  // left as they are (RowSegments::leading) — the kernel traps
  // otherwise). rows (M) is known on the host: it sizes the grid. True: the grouped kernel
  // runs the call on `stream`. False: nothing was done (not the kernel method, types other
  // than bf16 → bf16 rows or bf16 → f32 weight gradients, or what the kernel refuses); run
  // the host-offset method instead. Bad sizes throw std::invalid_argument, as there.
  bool rows_device(bool trans_b, int groups, const int64_t* device_offsets, int64_t rows, int64_t n, int64_t k,
                   float alpha, const void* a, int64_t lda, const void* b, int64_t b_group_stride, float beta,
                   void* c, int64_t ldc, GemmType ab_type, GemmType c_type, cudaStream_t stream);
  bool weight_grad_into_device(int groups, const int64_t* device_offsets, int64_t rows, int64_t k, int64_t n,
                               float alpha, const void* a, int64_t lda, const void* dy, int64_t ldy, void* dw,
                               int64_t dw_group_stride, float beta, GemmType ab_type, GemmType c_type,
                               cudaStream_t stream);

 private:
  // One group's row-major product for LtGemm::gemm.
  struct Problem {
    int group;
    bool trans_a, trans_b;
    int64_t m, n, k;
    const void* a;
    int64_t lda;
    const void* b;
    int64_t ldb;
    void* c;
    int64_t ldc;
  };
  void run(const std::vector<Problem>& problems, float alpha, float beta, GemmType ab_type, GemmType c_type,
           cudaStream_t stream);
  void run_streams(const std::vector<Problem>& problems, float alpha, float beta, GemmType ab_type,
                   GemmType c_type, cudaStream_t stream);
  // The call's status: success, or NOT_SUPPORTED for the types (other failures throw).
  cublasStatus_t run_cublas(const std::vector<Problem>& problems, float alpha, float beta, GemmType ab_type,
                            GemmType c_type, cudaStream_t stream);

  void order_after_previous_stream(cudaStream_t stream);
  // kernel method: launches `call` when the kernel takes it; false (nothing done) otherwise.
  // With device offsets the call gets this object's list buffer and is ordered after the
  // previous stream.
  bool run_kernel(GroupedKernelCall call, cudaStream_t stream);

  LtGemm& lt_;
  GroupedGemmMethod method_;
  // streams: side streams, their LtGemm objects, and the fork/join events
  std::vector<cudaStream_t> side_streams_;
  std::vector<std::unique_ptr<LtGemm>> side_lt_;
  cudaEvent_t fork_ = nullptr;
  std::vector<cudaEvent_t> joins_;
  // cublas: handle, its fixed workspace, device pointer arrays (3 · kMaxGroups: A, B, C)
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  void** device_pointers_ = nullptr;
  bool declined_[2][2] = {{false, false}, {false, false}};  // [ab_type][c_type]
  // kernel: its tile, the tile list of device-offset calls (device memory), the calls it took
  GroupedKernelTile kernel_tile_ = GroupedKernelTile::m128n256;
  GroupedTileList* device_list_ = nullptr;
  size_t kernel_calls_ = 0;
  size_t wgmma_calls_ = 0;
  bool narrow_tiles_ = false;
  size_t narrow_calls_ = 0;
  int sm_count_ = 0;  // the current device's, at construction
  // the pointer arrays and the device tile list are rewritten per call: a new stream waits
  // for the previous one
  cudaStream_t last_stream_ = nullptr;
  bool used_ = false;
  cudaEvent_t stream_switch_ = nullptr;
};

}  // namespace mok::cuda
