#include "kernels/cuda_ops.h"

#include "core/backend/exec_context.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/backend/rope.h"
#include "core/model/parameter.h"
#include "core/routing/locality_policy.h"
#include "core/util/environment_choice.h"
#include "kernels/adamw.h"
#include "kernels/add_ranges.h"
#include "kernels/cached_attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_step_graph.h"
#ifdef MOK_HAVE_CUDNN
#include "kernels/cudnn_attention.h"
#endif
#include "kernels/dropped_pairs.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/flash_attention.h"
#include "kernels/gemm_lt.h"
#include "kernels/grad_norm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/grouped_gemm_wgmma.h"
#include "kernels/low_rank.h"
#include "kernels/moe_routing.h"
#include "kernels/mok_plan.h"
#include "kernels/pinned_readings.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/row_quantize.h"
#include "kernels/step_recording.h"
#include "kernels/swiglu.h"
#include "kernels/transpose_add.h"

namespace mok::cuda {

using mok::DType;
using mok::Tensor;

namespace {

// Runs f.template operator()<T>() for the element type of an activation tensor.
template <typename F>
void by_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::bf16: f.template operator()<bf16>(); return;
    default:
      throw std::invalid_argument(std::string(op) + ": CUDA computes in f32 or bf16, not " + mok::dtype_name(t));
  }
}

GemmType gemm_type(const Tensor& t, const char* op) {
  if (t.dtype() == DType::f32) return GemmType::f32;
  if (t.dtype() == DType::bf16) return GemmType::bf16;
  throw std::invalid_argument(std::string(op) + ": a matrix of " + mok::dtype_name(t.dtype()));
}

void same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": " + a.describe() + " and " + b.describe() + " differ in type");
}

// Labels of the op profiler: matrix products by shape, where most of a step's time goes.
std::string gemm_label(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& c) {
  return std::string("gemm ") + (trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " + std::to_string(m) + "x" +
         std::to_string(n) + "x" + std::to_string(k) + " " + mok::dtype_name(a.dtype()) + "->" +
         mok::dtype_name(c.dtype());
}

std::string grouped_label(const char* op, const mok::RowSegments& segments, const Tensor& a) {
  return std::string(op) + " " + std::to_string(segments.groups()) + " groups, " + std::to_string(segments.rows()) +
         " rows x " + std::to_string(a.dim(1));
}

// "quantize_rows 16384x768 4-bit": the op profile's label for a low-bit copy of that shape.
std::string low_bit_label(const char* op, int64_t rows, int64_t cols, int bits) {
  return std::string(op) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " " + std::to_string(bits) +
         "-bit";
}

}  // namespace

struct CudaOps::DeviceRope {
  Tensor cos, sin;  // (max_positions, hd/2) f32
  int max_positions = 0, hd = 0;
};

template <typename Plan>
struct CudaOps::PlanCache {
  std::vector<const void*> key;  // the tensors' addresses the plan was built for
  std::unique_ptr<Plan> plan;
  Tensor memory;                 // the plan's device copy
};

CudaOps::CudaOps(int device) : device_(device) {
  // Switches (docs/gpu.md), read first so that a refused value leaves nothing allocated:
  // MOK_GROUPED_KERNEL=mma keeps the expert products on the mma.sync kernel on a Hopper GPU too
  // (elsewhere it is the only one); MOK_GROUPED_NARROW=off keeps decode-sized expert products on
  // the wide tiles (the same bits); MOK_ATTENTION=own keeps bf16 attention on the project's
  // flash kernels; MOK_GEMM_TUNING=off pins the heuristic's first choice for every product
  // (the same bits; for measuring what tuning gains).
  const std::string grouped_choice = environment_choice("MOK_GROUPED_KERNEL", {"wgmma", "mma"});
  const std::string narrow_choice = environment_choice("MOK_GROUPED_NARROW", {"on", "off"});
  const std::string attention_choice = environment_choice("MOK_ATTENTION", {"cudnn", "own"});
  const std::string tuning_choice = environment_choice("MOK_GEMM_TUNING", {"on", "off"});
  segments_on_device_ = environment_choice("MOK_GROUPED_SEGMENTS", {"device", "host"}) != "host";
  MOK_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  MOK_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  name_ = "cuda:" + std::to_string(device) + " " + prop.name;
  MOK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  allocator_ = std::make_unique<CudaCachingAllocator>(device, stream_);
  readings_ = std::make_unique<PinnedReadings>(stream_);
  lt_ = std::make_unique<LtGemm>();
  lt_->set_tuning(tuning_choice != "off");
  grouped_streams_ = std::make_unique<GroupedGemm>(*lt_, GroupedGemmMethod::streams, 2);
  grouped_kernel_ = std::make_unique<GroupedGemm>(*lt_, GroupedGemmMethod::kernel);
  grouped_kernel_is_wgmma_ = grouped_choice != "mma" && grouped_wgmma_available();
  grouped_kernel_->set_kernel_tile(grouped_kernel_is_wgmma_ ? GroupedKernelTile::m128n256_wgmma
                                                            : GroupedKernelTile::m128n128);
  grouped_kernel_->set_narrow_tiles(narrow_choice != "off");
  adamw_ = std::make_unique<PlanCache<AdamWPlan>>();
  profiler_ = std::make_unique<OpProfiler>(stream_);
  allocator_->set_profiler(profiler_.get());
#ifdef MOK_HAVE_CUDNN
  if (attention_choice != "own") {
    try {
      cudnn_attention_ = std::make_unique<CudnnAttention>();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mok: cuDNN attention unavailable (%s); using the project's attention kernels\n", e.what());
    }
  }
#else
  (void)attention_choice;  // no cuDNN: the project's kernels either way
#endif
}

CudaOps::~CudaOps() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  cudnn_attention_.reset();
  ropes_.clear();
  adamw_.reset();
  grad_norms_.clear();
  allocator_->set_profiler(nullptr);
  profiler_.reset();
  grouped_streams_.reset();
  grouped_kernel_.reset();
  lt_.reset();
  allocator_.reset();
  cudaStreamDestroy(stream_);
}

std::unique_ptr<mok::StepGraph> CudaOps::make_step_graph() { return std::make_unique<CudaStepGraph>(*this); }

void CudaOps::set_recording(StepRecording* recording) {
  recording_ = recording;
  allocator_->set_recording(recording);
}

void CudaOps::synchronize() { MOK_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaOps::bind_thread() { MOK_CUDA_CHECK(cudaSetDevice(device_)); }

OpProfiler::Scope CudaOps::profile(const char* op) {
  return profiler_->scope([op] { return std::string(op); });
}

std::string CudaOps::op_profile_report(const std::string& title, int steps, double wall_s, int top) {
  profiler_->set_enabled(false);
  return format_op_profile(profiler_->collect(), title, steps, wall_s, top);
}

Tensor CudaOps::scratch(size_t bytes) {
  return Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::u8, *allocator_);
}

Tensor CudaOps::routed_fractions(const Tensor& load, double pairs) {
  if (load.dtype() != DType::i64) throw std::invalid_argument("router: the load must be i64, not " + load.shape_string());
  Tensor f = Tensor::empty({load.numel()}, DType::f32, *allocator_);
  cuda::routed_fractions(load.ptr<int64_t>(), static_cast<int>(load.numel()), pairs, f.ptr<float>(), stream_);
  return f;
}

Tensor CudaOps::upload_positions(const std::vector<int>& pos0) {
  static_assert(sizeof(int) == sizeof(int32_t), "positions are copied as i32");
  Tensor positions = Tensor::empty({static_cast<int64_t>(pos0.size())}, DType::i32, *allocator_);
  positions.copy_from_host(pos0.data(), positions.bytes());  // from pos0's own memory (cuda_ops.h)
  return positions;
}

std::shared_ptr<mok::HostReading> CudaOps::read_later(const Tensor& t) {
  if (!recording_) return readings_->read(t.raw(), static_cast<size_t>(t.bytes()));
  // A read-back of the recording: its pinned memory holds each replay's values.
  class RecordedReading final : public mok::HostReading {
   public:
    RecordedReading(const StepRecording& recording, size_t index, size_t bytes)
        : recording_(recording), index_(index), bytes_(bytes) {}
    size_t bytes() const override { return bytes_; }
    const void* data() override { return recording_.read_back(index_); }

   private:
    const StepRecording& recording_;
    size_t index_, bytes_;
  };
  const size_t bytes = static_cast<size_t>(t.bytes());
  return std::make_shared<RecordedReading>(*recording_, recording_->copy_to_host(t.raw(), bytes, stream_), bytes);
}

Tensor CudaOps::upload_remote_mask(const std::vector<uint8_t>* local, int experts) {
  if (!local) return {};
  std::vector<uint8_t> remote(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) remote[e] = (*local)[e] ? 0 : 1;
  Tensor t = Tensor::empty({experts}, DType::u8, *allocator_);
  t.copy_from_host(remote.data(), t.bytes());
  return t;
}

// --- matrix products

// Which grouped method runs a product, from the timings of kernels/checks/gemm_timings.cpp
// on an H200 (docs/benchmarks.md). With many small segments (64 experts of ~2 000 rows) one
// launch of the project's grouped kernel beats a cuBLASLt call per segment, which is
// launch-bound. With a few large ones (8 experts of ~4 000 rows) the Hopper kernel (TMA +
// wgmma) still wins the row products (0.086 against 0.109 ms on the down projection), but
// cuBLASLt over two side streams wins the weight gradients (0.120 against 0.155 ms: 192 tiles
// of 64 reduction steps fill 1.45 waves of the 132 multiprocessors), and the mma.sync kernel
// loses both. fp32 products (parity runs) take cuBLASLt. This choice is for offsets on the
// host; offsets left on the device (dropless routing) go to the grouped kernel whatever the
// group count (grouped_gemm below). A range of a pass (RowSegments::range) goes by the whole
// pass's count: the methods round differently, and a pass run range by range must give the
// bits of the whole pass (the chunked dispatchers).
constexpr int kGroupsForTheKernel = 32;

GroupedGemm& CudaOps::grouped_for(GemmType ab_type, int groups, bool weight_grad) {
  if (ab_type != GemmType::bf16) return *grouped_streams_;
  if (groups >= kGroupsForTheKernel) return *grouped_kernel_;
  return grouped_kernel_is_wgmma_ && !weight_grad ? *grouped_kernel_ : *grouped_streams_;
}

void CudaOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                   int64_t lda, const Tensor& b, int64_t ldb, double beta, Tensor& c, int64_t ldc) {
  const auto timed = profiler_->scope([&] { return gemm_label(trans_a, trans_b, m, n, k, a, c); });
  same_dtype(a, b, "gemm");
  lt_->gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a.raw(), lda, b.raw(), ldb, static_cast<float>(beta),
            c.raw(), ldc, gemm_type(a, "gemm"), gemm_type(c, "gemm"), stream_);
}

void CudaOps::gemm_add(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                       int64_t lda, const Tensor& b, int64_t ldb, const Tensor& r, Tensor& c) {
  const auto timed = profiler_->scope([&] { return gemm_label(trans_a, trans_b, m, n, k, a, c) + " +R"; });
  same_dtype(a, b, "gemm_add");
  same_dtype(c, r, "gemm_add");
  if (r.numel() != m * n || c.numel() != m * n)
    throw std::invalid_argument("gemm_add: R " + r.shape_string() + " and C " + c.shape_string() + " are not " +
                                std::to_string(m) + " x " + std::to_string(n));
  lt_->gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a.raw(), lda, b.raw(), ldb, 1.0f, c.raw(), n,
            gemm_type(a, "gemm_add"), gemm_type(c, "gemm_add"), stream_, r.raw());
}

// Offsets still on the device go to the grouped kernel as they are (no wait); where it cannot
// take the call (fp32 parity runs, odd strides) they are read first.
void CudaOps::grouped_gemm(bool trans_b, const mok::RowSegments& segments, const Tensor& a, const Tensor& b,
                           double beta, Tensor& c) {
  const auto timed = profiler_->scope([&] { return grouped_label("grouped_gemm", segments, a); });
  same_dtype(a, b, "grouped_gemm");
  const int groups = segments.groups();
  const int64_t k = a.dim(1), n = c.dim(1);
  const GemmType ab = gemm_type(a, "grouped_gemm"), ct = gemm_type(c, "grouped_gemm");
  if (!segments.on_host() &&
      grouped_kernel_->rows_device(trans_b, groups, segments.device().ptr<int64_t>(), segments.rows(), n, k, 1.0f,
                                   a.raw(), k, b.raw(), k * n, static_cast<float>(beta), c.raw(), n, ab, ct, stream_))
    return;
  grouped_for(ab, segments.pass_groups(), false)
      .rows(trans_b, groups, segments.host().data(), n, k, 1.0f, a.raw(), k, b.raw(), k * n, static_cast<float>(beta),
            c.raw(), n, ab, ct, stream_);
}

void CudaOps::grouped_weight_grad(const mok::RowSegments& segments, const Tensor& a, const Tensor& dy, Tensor& dw) {
  const auto timed = profiler_->scope([&] { return grouped_label("grouped_weight_grad", segments, a); });
  same_dtype(a, dy, "grouped_weight_grad");
  const int groups = segments.groups();
  const int64_t k = a.dim(1), n = dy.dim(1);
  const GemmType ab = gemm_type(a, "grouped_weight_grad");
  if (!segments.on_host() &&
      grouped_kernel_->weight_grad_into_device(groups, segments.device().ptr<int64_t>(), segments.rows(), k, n, 1.0f,
                                               a.raw(), k, dy.raw(), n, dw.ptr<float>(), k * n, 1.0f, ab,
                                               GemmType::f32, stream_))
    return;
  grouped_for(ab, segments.pass_groups(), true)
      .weight_grad(groups, segments.host().data(), k, n, 1.0f, a.raw(), k, dy.raw(), n, dw.ptr<float>(), k * n, ab,
                   stream_);
}

// --- elementwise

void CudaOps::add_(Tensor& y, const Tensor& x) {
  const auto timed = profile("add_");
  same_dtype(y, x, "add_");
  by_type(y.dtype(), "add_", [&]<typename T>() {
    add_inplace<T>(static_cast<T*>(y.raw()), static_cast<const T*>(x.raw()), y.numel(), stream_);
  });
}

void CudaOps::add_each(const std::vector<AddPair>& pairs) {
  std::vector<cuda::DeviceAddRange> ranges;
  for (const AddPair& p : pairs) {
    if (p.y->dtype() == DType::f32 && p.x->dtype() == DType::f32 && p.y->numel() == p.x->numel())
      ranges.push_back({p.y->ptr<float>(), p.x->ptr<float>(), p.y->numel()});
    else
      add_(*p.y, *p.x);  // names a mismatch, or adds another dtype
  }
  if (ranges.empty()) return;
  const auto timed = profile("add_each");
  cuda::add_ranges(ranges, stream_);
}

void CudaOps::add2_(Tensor& y, const Tensor& a, const Tensor& b) {
  const auto timed = profile("add2_");
  same_dtype(y, a, "add2_");
  same_dtype(y, b, "add2_");
  by_type(y.dtype(), "add2_", [&]<typename T>() {
    add2_inplace<T>(static_cast<T*>(y.raw()), static_cast<const T*>(a.raw()), static_cast<const T*>(b.raw()),
                    y.numel(), stream_);
  });
}

void CudaOps::scale(const Tensor& x, double f, Tensor& out) {
  const auto timed = profile("scale");
  same_dtype(x, out, "scale");
  by_type(x.dtype(), "scale", [&]<typename T>() {
    cuda::scale<T>(static_cast<const T*>(x.raw()), static_cast<float>(f), static_cast<T*>(out.raw()), x.numel(),
                   stream_);
  });
}

void CudaOps::add_transposed_(Tensor& y, const Tensor& x) {
  const auto timed = profile("add_transposed_");
  transpose_add(y.ptr<float>(), x.ptr<float>(), y.dim(0), y.dim(1), stream_);
}

void CudaOps::convert(const Tensor& src, Tensor& dst) {
  const auto timed = profile("convert");
  if (src.numel() != dst.numel()) throw std::invalid_argument("convert: " + src.describe() + " into " + dst.describe());
  by_type(src.dtype(), "convert", [&]<typename S>() {
    by_type(dst.dtype(), "convert", [&]<typename D>() {
      cuda::convert<S, D>(static_cast<const S*>(src.raw()), static_cast<D*>(dst.raw()), src.numel(), stream_);
    });
  });
}

// --- layers' kernels

void CudaOps::rms_norm_forward(const Tensor& x, const Tensor& g, double eps, Tensor& y, Tensor* rstd) {
  const auto timed = profile("rms_norm_forward");
  const int64_t d = g.numel(), n = x.numel() / d;
  by_type(x.dtype(), "rms_norm_forward", [&]<typename T>() {
    cuda::rms_norm_forward<T>(static_cast<const T*>(x.raw()), static_cast<const T*>(g.raw()), static_cast<float>(eps),
                              n, d, static_cast<T*>(y.raw()), rstd ? rstd->ptr<float>() : nullptr, stream_);
  });
}

void CudaOps::rms_norm_apply(const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& y) {
  const auto timed = profile("rms_norm_apply");
  const int64_t d = g.numel(), n = x.numel() / d;
  by_type(x.dtype(), "rms_norm_apply", [&]<typename T>() {
    cuda::rms_norm_apply<T>(static_cast<const T*>(x.raw()), static_cast<const T*>(g.raw()), rstd.ptr<float>(), n, d,
                            static_cast<T*>(y.raw()), stream_);
  });
}

void CudaOps::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& dx,
                                Tensor& dg) {
  const auto timed = profile("rms_norm_backward");
  rms_norm_backward_into(dy, x, g, rstd, nullptr, dx, dg);
}

void CudaOps::rms_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd,
                                    const Tensor& r, Tensor& dx, Tensor& dg) {
  const auto timed = profile("rms_norm_backward");
  same_dtype(dx, r, "rms_norm_backward_add");
  if (r.numel() != dx.numel())
    throw std::invalid_argument("rms_norm_backward_add: residual " + r.shape_string() + " and dx " +
                                dx.shape_string() + " differ in size");
  rms_norm_backward_into(dy, x, g, rstd, &r, dx, dg);
}

void CudaOps::rms_norm_backward_into(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd,
                                     const Tensor* r, Tensor& dx, Tensor& dg) {
  const int64_t d = g.numel(), n = x.numel() / d;
  const size_t bytes = rms_norm_backward_workspace_bytes(n, d);
  Tensor ws = scratch(bytes);
  by_type(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    cuda::rms_norm_backward<T>(static_cast<const T*>(dy.raw()), static_cast<const T*>(x.raw()),
                               static_cast<const T*>(g.raw()), rstd.ptr<float>(), n, d, static_cast<T*>(dx.raw()),
                               dg.ptr<float>(), ws.raw(), bytes, stream_,
                               r ? static_cast<const T*>(r->raw()) : nullptr);
  });
}

const CudaOps::DeviceRope& CudaOps::rope_table(const mok::RopeTable& table) {
  auto& slot = ropes_[table.id()];
  if (!slot) {
    mok::ScopedMemoryTracker internal(internal_tracker_);
    slot = std::make_unique<DeviceRope>();
    slot->max_positions = table.max_positions();
    slot->hd = table.head_dim();
    const int64_t count = static_cast<int64_t>(table.max_positions()) * (table.head_dim() / 2);
    std::vector<float> c(table.cos_row(0), table.cos_row(0) + count), s(table.sin_row(0), table.sin_row(0) + count);
    slot->cos = Tensor::empty({count}, DType::f32, *allocator_);
    slot->sin = Tensor::empty({count}, DType::f32, *allocator_);
    slot->cos.copy_from_host(c.data(), slot->cos.bytes());
    slot->sin.copy_from_host(s.data(), slot->sin.bytes());
  }
  return *slot;
}

void CudaOps::rope_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const mok::RopeTable& table,
                    bool inverse) {
  const auto timed = profile("rope_");
  if (rows > 0 && pos0 + std::min<int64_t>(seq, rows) > table.max_positions())
    throw std::invalid_argument("RoPE: position beyond max_seq_len " + std::to_string(table.max_positions()));
  const DeviceRope& r = rope_table(table);
  by_type(x.dtype(), "rope_", [&]<typename T>() {
    rope_apply<T>(static_cast<T*>(x.raw()), rows, ld, heads, seq, pos0, r.cos.ptr<float>(), r.sin.ptr<float>(), r.hd,
                  inverse, stream_);
  });
}

// Every sequence in one launch, the positions copied from pos0's memory (in a recorded decode
// step, the session's positions, refilled before each replay: core/backend/step_graph.h).
void CudaOps::rope_at_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, const std::vector<int>& pos0,
                       const mok::RopeTable& table, bool inverse) {
  const auto timed = profile("rope_");
  const int64_t sequences = static_cast<int64_t>(pos0.size());
  if (rows <= 0) return;
  if (seq <= 0 || rows > sequences * seq)
    throw std::invalid_argument("RoPE: " + std::to_string(rows) + " rows for " + std::to_string(sequences) +
                                " sequences of " + std::to_string(seq));
  for (int p : pos0)
    if (p < 0 || p + std::min<int64_t>(seq, rows) > table.max_positions())
      throw std::invalid_argument("RoPE: position beyond max_seq_len " + std::to_string(table.max_positions()));
  Tensor positions = upload_positions(pos0);
  const DeviceRope& r = rope_table(table);
  by_type(x.dtype(), "rope_", [&]<typename T>() {
    rope_apply<T>(static_cast<T*>(x.raw()), rows, ld, heads, seq, 0, r.cos.ptr<float>(), r.sin.ptr<float>(), r.hd,
                  inverse, stream_, positions.ptr<int32_t>());
  });
}

CudnnAttention* CudaOps::cudnn_attention() { return cudnn_attention_.get(); }

void CudaOps::attention_forward(const Tensor& qkv, int batch, int seq, int heads, int hd, Tensor& o, Tensor* lse) {
  const auto timed = profile("attention_forward");
#ifdef MOK_HAVE_CUDNN
  // With no lse wanted (inference, a checkpointed block's first pass) the fused forward still
  // runs, into a scratch lse: the same output bits as a forward that keeps it.
  if (CudnnAttention* fused = cudnn_attention(); fused && qkv.dtype() == DType::bf16 && batch > 0 && seq > 0) {
    size_t bytes = 0;
    try {
      bytes = fused->forward_workspace_bytes(batch, seq, heads, hd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mok: cuDNN attention refused %d×%d×%d×%d (%s); using the project's kernels\n", batch, seq,
                   heads, hd, e.what());
      cudnn_attention_.reset();
      fused = nullptr;
    }
    if (fused) {
      Tensor ws = bytes ? scratch(bytes) : Tensor();
      Tensor lse_scratch = lse ? Tensor() : scratch(size_t(batch) * heads * seq * sizeof(float));
      fused->forward(static_cast<const bf16*>(qkv.raw()), batch, seq, heads, hd, static_cast<bf16*>(o.raw()),
                     lse ? lse->ptr<float>() : static_cast<float*>(lse_scratch.raw()), bytes ? ws.raw() : nullptr,
                     bytes, stream_);
      return;
    }
  }
#endif
  by_type(qkv.dtype(), "attention_forward", [&]<typename T>() {
    flash_attention_forward<T>(static_cast<const T*>(qkv.raw()), batch, seq, heads, hd, static_cast<T*>(o.raw()),
                               lse ? lse->ptr<float>() : nullptr, stream_);
  });
}

void CudaOps::attention_backward(const Tensor& qkv, const Tensor& d_o, const Tensor& lse, const Tensor* o, int batch,
                                 int seq, int heads, int hd, Tensor& dqkv) {
  const auto timed = profile("attention_backward");
#ifdef MOK_HAVE_CUDNN
  if (CudnnAttention* fused = cudnn_attention(); fused && qkv.dtype() == DType::bf16 && batch > 0 && seq > 0) {
    size_t bytes = 0, forward_bytes = 0;
    try {
      bytes = fused->backward_workspace_bytes(batch, seq, heads, hd);
      if (!o) forward_bytes = fused->forward_workspace_bytes(batch, seq, heads, hd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mok: cuDNN attention backward refused %d×%d×%d×%d (%s); using the project's kernels\n",
                   batch, seq, heads, hd, e.what());
      cudnn_attention_.reset();
      fused = nullptr;
    }
    if (fused) {
      // Without the forward's output, the same fused forward makes it again (the bits it gave).
      Tensor o_again, lse_again;
      const bf16* o_used = o ? static_cast<const bf16*>(o->raw()) : nullptr;
      if (!o_used) {
        o_again = scratch(size_t(batch) * seq * heads * hd * sizeof(bf16));
        lse_again = scratch(size_t(batch) * heads * seq * sizeof(float));
        Tensor fws = forward_bytes ? scratch(forward_bytes) : Tensor();
        fused->forward(static_cast<const bf16*>(qkv.raw()), batch, seq, heads, hd, static_cast<bf16*>(o_again.raw()),
                       static_cast<float*>(lse_again.raw()), forward_bytes ? fws.raw() : nullptr, forward_bytes,
                       stream_);
        o_used = static_cast<const bf16*>(o_again.raw());
      }
      Tensor ws = scratch(bytes);
      fused->backward(static_cast<const bf16*>(qkv.raw()), static_cast<const bf16*>(d_o.raw()), lse.ptr<float>(),
                      o_used, batch, seq, heads, hd, static_cast<bf16*>(dqkv.raw()), ws.raw(), bytes, stream_);
      return;
    }
  }
#endif
  const size_t bytes = flash_attention_backward_workspace_bytes(batch, seq, heads, hd);
  Tensor ws = scratch(bytes);
  by_type(qkv.dtype(), "attention_backward", [&]<typename T>() {
    flash_attention_backward<T>(static_cast<const T*>(qkv.raw()), static_cast<const T*>(d_o.raw()), lse.ptr<float>(),
                                o ? static_cast<const T*>(o->raw()) : nullptr, batch, seq, heads, hd, static_cast<T*>(dqkv.raw()), ws.raw(), bytes, stream_);
  });
}

void CudaOps::attention_cached(const Tensor& qkv, int n, const std::vector<Tensor*>& k_cache,
                               const std::vector<Tensor*>& v_cache, const std::vector<int>& pos0, int heads, int hd,
                               Tensor& o) {
  const auto timed = profile("attention_cached");
  const int batch = static_cast<int>(k_cache.size());
  if (batch == 0) return;
  // Two uploads: the caches' addresses (k then v), and the positions straight from pos0's memory
  // (in a recorded decode step the session's positions, refilled before each replay).
  std::vector<uint64_t> table(2 * static_cast<size_t>(batch), 0);
  for (int b = 0; b < batch; ++b) {
    table[b] = reinterpret_cast<uint64_t>(k_cache[b]->raw());
    table[batch + b] = reinterpret_cast<uint64_t>(v_cache[b]->raw());
  }
  Tensor dev = scratch(table.size() * sizeof(uint64_t));
  dev.copy_from_host(table.data(), static_cast<int64_t>(table.size() * sizeof(uint64_t)));
  Tensor positions = upload_positions(pos0);
  const auto* base = static_cast<const uint64_t*>(dev.raw());
  int max_len = 0;
  const auto on16 = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0; };
  bool aligned = on16(qkv) && on16(o);  // then rows move as 16-byte packs
  for (int b = 0; b < batch; ++b) {
    max_len = std::max(max_len, static_cast<int>(k_cache[b]->dim(0)));
    aligned = aligned && on16(*k_cache[b]) && on16(*v_cache[b]);
  }
  by_type(qkv.dtype(), "attention_cached", [&]<typename T>() {
    const int64_t floats = cuda::cached_attention_scratch_floats<T>(int64_t(batch) * n * heads, max_len, hd);
    Tensor partials = scratch(static_cast<size_t>(floats) * sizeof(float));
    cuda::cached_attention<T>(static_cast<const T*>(qkv.raw()), batch, n, reinterpret_cast<T* const*>(base),
                              reinterpret_cast<T* const*>(base + batch), positions.ptr<int32_t>(), max_len, heads, hd,
                              aligned, floats > 0 ? static_cast<float*>(partials.raw()) : nullptr,
                              static_cast<T*>(o.raw()), stream_);
  });
}

void CudaOps::swiglu_forward(const Tensor& a, Tensor& h) {
  const auto timed = profile("swiglu_forward");
  const int64_t n = a.dim(0), f = a.dim(1) / 2;
  by_type(a.dtype(), "swiglu_forward", [&]<typename T>() {
    cuda::swiglu_forward<T>(static_cast<const T*>(a.raw()), n, f, static_cast<T*>(h.raw()), stream_);
  });
}

void CudaOps::swiglu_backward(const Tensor& a, const Tensor& dh, Tensor& da) {
  const auto timed = profile("swiglu_backward");
  const int64_t n = a.dim(0), f = a.dim(1) / 2;
  by_type(a.dtype(), "swiglu_backward", [&]<typename T>() {
    cuda::swiglu_backward<T>(static_cast<const T*>(a.raw()), static_cast<const T*>(dh.raw()), n, f,
                             static_cast<T*>(da.raw()), stream_);
  });
}

void CudaOps::swiglu_backward_gated(const Tensor& a, Tensor&& h, Tensor& dh, const Tensor& s, Tensor& dgate,
                                    Tensor& da) {
  const auto timed = profile("swiglu_backward_gated");
  h.reset();  // rebuilt from a inside the kernel (the same bits): its memory goes back now
  const int64_t n = a.dim(0), f = a.dim(1) / 2;
  if (s.numel() != n || s.dtype() != DType::f32 || dgate.numel() != n || dgate.dtype() != DType::f32)
    throw std::invalid_argument("swiglu_backward_gated: gates " + s.shape_string() + " and their gradient " +
                                dgate.shape_string() + " for " + std::to_string(n) + " rows (f32)");
  same_dtype(a, dh, "swiglu_backward_gated");
  by_type(a.dtype(), "swiglu_backward_gated", [&]<typename T>() {
    cuda::swiglu_backward_gated<T>(static_cast<const T*>(a.raw()), static_cast<const T*>(dh.raw()), s.ptr<float>(),
                                   n, f, static_cast<T*>(da.raw()), dgate.ptr<float>(), stream_);
  });
}

mok::CrossEntropySum CudaOps::cross_entropy(Tensor& logits, const int32_t* targets, bool write_grad) {
  const auto timed = profile("cross_entropy");
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  int64_t scored = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] >= vocab)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(targets[r]) +
                                  " outside the vocabulary of " + std::to_string(vocab));
    scored += targets[r] >= 0;
  }
  Tensor ids = Tensor::empty({n}, DType::i32, *allocator_);
  ids.copy_from_host(targets, ids.bytes());
  Tensor row_loss = Tensor::empty({n}, DType::f32, *allocator_);
  by_type(logits.dtype(), "cross_entropy", [&]<typename T>() {
    cross_entropy_forward<T>(static_cast<T*>(logits.raw()), ids.ptr<int32_t>(), n, vocab, write_grad,
                             row_loss.ptr<float>(), stream_);
  });
  Tensor sums = Tensor::empty({16}, DType::u8, *allocator_);  // double loss sum, int64 count
  auto* base = static_cast<uint8_t*>(sums.raw());
  const size_t bytes = cross_entropy_reduce_workspace_bytes(n);
  Tensor ws = scratch(bytes);
  cross_entropy_reduce(row_loss.ptr<float>(), ids.ptr<int32_t>(), n, reinterpret_cast<double*>(base),
                       reinterpret_cast<int64_t*>(base + 8), ws.raw(), bytes, stream_);
  if (recording_) {  // the sums are read after each replay (core/backend/step_graph.h)
    recording_->cross_entropy.push_back(recording_->copy_to_host(base, 16, stream_));
    return {std::numeric_limits<double>::quiet_NaN(), scored};
  }
  uint8_t host[16];
  sums.copy_to_host(host, 16);
  mok::CrossEntropySum out;
  std::memcpy(&out.loss_sum, host, 8);
  std::memcpy(&out.count, host + 8, 8);
  return out;
}

void CudaOps::embedding_forward(const Tensor& w, const Tensor& tokens, Tensor& x) {
  const auto timed = profile("embedding_forward");
  by_type(w.dtype(), "embedding_forward", [&]<typename T>() {
    cuda::embedding_forward<T>(static_cast<const T*>(w.raw()), tokens.ptr<int32_t>(), tokens.numel(), w.dim(1),
                               static_cast<T*>(x.raw()), stream_);
  });
}

void CudaOps::embedding_backward(const Tensor& dx, const Tensor& tokens, Tensor& dw) {
  const auto timed = profile("embedding_backward");
  const int64_t n = tokens.numel(), vocab = dw.dim(0), d = dw.dim(1);
  const size_t bytes = embedding_backward_workspace_bytes(n, vocab, d);
  Tensor ws = scratch(bytes);
  by_type(dx.dtype(), "embedding_backward", [&]<typename T>() {
    cuda::embedding_backward<T>(static_cast<const T*>(dx.raw()), tokens.ptr<int32_t>(), n, vocab, d, dw.ptr<float>(),
                                ws.raw(), bytes, stream_);
  });
}

// --- routing and dispatch

void CudaOps::router_softmax_topk(const Tensor& logits, int k, const mok::LocalityPolicy* locality, Tensor& probs,
                                  Tensor& lse, Tensor& expert, Tensor& gate) {
  const auto timed = profile("router_softmax_topk");
  const int64_t n = logits.dim(0);
  const int E = static_cast<int>(logits.dim(1));
  cuda::RouterLocality loc;
  if (locality && locality->enabled()) {
    if (static_cast<int>(locality->local.size()) != E)
      throw std::invalid_argument("routing: a locality mask of " + std::to_string(locality->local.size()) +
                                  " experts for a router of " + std::to_string(E));
    loc.enabled = true;
    loc.margin = locality->margin;
    for (int e = 0; e < E && e < kMaxRouterExperts; ++e)
      if (locality->local[e]) loc.local[e / 32] |= 1u << (e % 32);
  }
  if (E > kMaxRouterExperts || k > kMaxRouterTopK)
    throw std::invalid_argument("routing on CUDA takes up to " + std::to_string(kMaxRouterExperts) + " experts and top-" +
                                std::to_string(kMaxRouterTopK) + "; asked " + std::to_string(E) + ", top-" +
                                std::to_string(k));
  cuda::router_softmax_topk(logits.ptr<float>(), n, E, k, probs.ptr<float>(), lse.ptr<float>(),
                            expert.ptr<int32_t>(), gate.ptr<float>(), stream_, loc);
}

mok::PairOrder CudaOps::sort_pairs(Tensor& expert, int experts, int64_t capacity, bool all_routed) {
  const auto timed = profile("sort_pairs");
  const int64_t pairs = expert.numel();
  const int E = experts;
  SortedPairs sorted = launch_sort_pairs(expert, E, capacity);
  mok::PairOrder out;
  out.row_of_pair = std::move(sorted.row_of_pair);
  out.load = sorted.counts.view(0, {E});
  if (all_routed && capacity == 0 && segments_on_device_) {
    // Every pair is a row: the host needs no count (row_segments.h).
    out.segments = mok::RowSegments(std::move(sorted.offsets), pairs);
    out.order = std::move(sorted.order);
    return out;
  }
  std::vector<int64_t> host(2 * static_cast<size_t>(E), 0);
  sorted.counts.copy_to_host(host.data(), sorted.counts.bytes());  // the per-expert counts: the one wait of the layer
  std::vector<int64_t> off(E + 1, 0);
  int64_t routed = 0;
  for (int e = 0; e < E; ++e) {
    off[e + 1] = off[e] + host[E + e];
    routed += host[e];
  }
  const int64_t kept = off[E];
  out.dropped = routed - kept;
  out.segments = mok::RowSegments(std::move(off));
  out.order = sorted.order.view(0, {kept});
  if (out.dropped > 0) mark_dropped_pairs(expert.ptr<int32_t>(), out.row_of_pair.ptr<int32_t>(), pairs, stream_);
  return out;
}

mok::PairOrder CudaOps::sort_pairs_counted(Tensor& expert, int experts, const std::vector<int64_t>& counts) {
  const auto timed = profile("sort_pairs_counted");
  std::vector<int64_t> off = counted_offsets(counts, experts, expert.numel());
  SortedPairs sorted = launch_sort_pairs(expert, experts, 0);
  mok::PairOrder out;
  out.row_of_pair = std::move(sorted.row_of_pair);
  out.load = sorted.counts.view(0, {experts});
  out.order = sorted.order.view(0, {off[experts]});
  out.segments = mok::RowSegments(std::move(off));
  return out;
}

CudaOps::SortedPairs CudaOps::launch_sort_pairs(Tensor& expert, int experts, int64_t capacity) {
  const int64_t pairs = expert.numel();
  const int E = experts;
  SortedPairs out;
  out.order = Tensor::empty({pairs}, DType::i32, *allocator_);
  out.row_of_pair = Tensor::empty({pairs}, DType::i32, *allocator_);
  // load, kept (E each); offsets (E + 1): written by the sort (zeros when there are no pairs)
  const auto make = [&](int64_t n) {
    return pairs > 0 ? Tensor::empty({n}, DType::i64, *allocator_) : Tensor::zeros({n}, DType::i64, *allocator_);
  };
  out.counts = make(2 * static_cast<int64_t>(E));
  out.offsets = make(static_cast<int64_t>(E) + 1);
  if (pairs > 0) {
    const size_t bytes = moe_sort_pairs_workspace_bytes(pairs, E);
    Tensor ws = scratch(bytes);
    moe_sort_pairs(expert.ptr<int32_t>(), pairs, E, capacity, out.order.ptr<int32_t>(), out.row_of_pair.ptr<int32_t>(),
                   out.counts.ptr<int64_t>(), out.counts.ptr<int64_t>() + E, ws.raw(), bytes, stream_,
                   out.offsets.ptr<int64_t>());
  }
  return out;
}

void CudaOps::router_loss_sums(const Tensor& probs, const Tensor& lse, const Tensor& load, double pairs,
                               const std::vector<uint8_t>* local, Tensor& sums) {
  const auto timed = profile("router_loss_sums");
  const int64_t n = probs.dim(0);
  const int E = static_cast<int>(probs.dim(1));
  Tensor f_dev = routed_fractions(load, pairs);
  Tensor remote = upload_remote_mask(local, E);
  const size_t bytes = router_losses_workspace_bytes(n, E);
  Tensor ws = scratch(bytes);
  router_losses(probs.ptr<float>(), lse.ptr<float>(), f_dev.ptr<float>(),
                local ? static_cast<const uint8_t*>(remote.raw()) : nullptr, n, E, sums.ptr<double>(), ws.raw(), bytes,
                stream_);
}

void CudaOps::router_backward(const Tensor& probs, const Tensor& lse, const Tensor& choice, const Tensor& dgate,
                              const Tensor& load, double pairs, const std::vector<uint8_t>* local, double aux_w,
                              double z_w, double loc_w, Tensor& dlogits) {
  const auto timed = profile("router_backward");
  const int64_t n = probs.dim(0);
  const int E = static_cast<int>(probs.dim(1));
  const int k = static_cast<int>(choice.numel() / std::max<int64_t>(n, 1));
  Tensor f_dev = routed_fractions(load, pairs);
  Tensor remote = upload_remote_mask(local, E);
  cuda::router_backward(probs.ptr<float>(), lse.ptr<float>(), choice.ptr<int32_t>(), dgate.ptr<float>(),
                        f_dev.ptr<float>(), local ? static_cast<const uint8_t*>(remote.raw()) : nullptr, n, E, k,
                        static_cast<float>(aux_w), static_cast<float>(z_w), static_cast<float>(loc_w),
                        dlogits.ptr<float>(), stream_);
}

void CudaOps::gather_rows(const Tensor& src, const Tensor& order, int k, Tensor& out) {
  const auto timed = profile("gather_rows");
  same_dtype(src, out, "gather_rows");
  // i32 rows (index tables) move as their bits, through the f32 kernel: it only copies.
  by_type(src.dtype() == DType::i32 ? DType::f32 : src.dtype(), "gather_rows", [&]<typename T>() {
    cuda::gather_rows<T>(static_cast<const T*>(src.raw()), order.ptr<int32_t>(), k, order.numel(), src.dim(1),
                         static_cast<T*>(out.raw()), stream_);
  });
}

void CudaOps::gather_rows_scaled(const Tensor& src, const Tensor& order, int k, const Tensor& s, Tensor& out,
                                 Tensor& scaled) {
  const auto timed = profile("gather_rows_scaled");
  if (s.numel() != order.numel() || s.dtype() != DType::f32)
    throw std::invalid_argument("gather_rows_scaled: scales " + s.shape_string() + " for " +
                                std::to_string(order.numel()) + " rows (f32)");
  by_type(src.dtype(), "gather_rows_scaled", [&]<typename T>() {
    cuda::gather_rows<T>(static_cast<const T*>(src.raw()), order.ptr<int32_t>(), k, order.numel(), src.dim(1),
                         static_cast<T*>(out.raw()), stream_, s.ptr<float>(), static_cast<T*>(scaled.raw()));
  });
}

void CudaOps::combine_pairs(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n, int k,
                            Tensor& out) {
  const auto timed = profile("combine_pairs");
  by_type(out.dtype(), "combine_pairs", [&]<typename T>() {
    cuda::combine_pairs<T>(static_cast<const T*>(rows.raw()), row_of_pair.ptr<int32_t>(),
                           gate ? gate->ptr<float>() : nullptr, n, k, out.dim(1), static_cast<T*>(out.raw()), stream_);
  });
}

void CudaOps::combine_pairs_add(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n, int k,
                                const Tensor& residual, Tensor& out) {
  const auto timed = profile("combine_pairs_add");
  same_dtype(out, residual, "combine_pairs_add");
  by_type(out.dtype(), "combine_pairs_add", [&]<typename T>() {
    cuda::combine_pairs<T>(static_cast<const T*>(rows.raw()), row_of_pair.ptr<int32_t>(),
                           gate ? gate->ptr<float>() : nullptr, n, k, out.dim(1), static_cast<T*>(out.raw()), stream_,
                           static_cast<const T*>(residual.raw()));
  });
}

void CudaOps::pairs_to_rows(const Tensor& per_pair, const Tensor& order, Tensor& per_row) {
  const auto timed = profile("pairs_to_rows");
  pair_values_to_rows(per_pair.ptr<float>(), order.ptr<int32_t>(), order.numel(), per_row.ptr<float>(), stream_);
}

void CudaOps::rows_to_pairs(const Tensor& per_row, const Tensor& order, Tensor& per_pair) {
  const auto timed = profile("rows_to_pairs");
  rows_to_pair_values(per_row.ptr<float>(), order.ptr<int32_t>(), order.numel(), per_pair.numel(),
                      per_pair.ptr<float>(), stream_);
}

void CudaOps::scatter_positions(const Tensor& index, int32_t base, Tensor& out) {
  const auto timed = profile("scatter_positions");
  cuda::scatter_positions(index.ptr<int32_t>(), index.numel(), base, out.ptr<int32_t>(), stream_);
}

void CudaOps::slot_share_counts(const Tensor& expert, const Tensor& owner, int k, Tensor& counts) {
  const auto timed = profile("slot_share_counts");
  cuda::slot_share_counts(expert.ptr<int32_t>(), owner.ptr<int32_t>(), expert.numel() / k, k,
                          static_cast<int>(owner.numel()), counts.ptr<int32_t>(), stream_);
}

void CudaOps::shadow_decisions(const Tensor& counts, const Tensor& owner, int self, int k, const mok::ShadowRule& rule,
                               Tensor& rows, Tensor& dest) {
  const auto timed = profile("shadow_decisions");
  cuda::shadow_decisions(counts.ptr<int32_t>(), owner.ptr<int32_t>(), static_cast<int>(owner.numel()), k, self, rule,
                         rows.ptr<double>(), dest.ptr<int32_t>(), stream_);
}

mok::ShipRows CudaOps::ship_rows(const Tensor& expert, const Tensor& gate, const Tensor& dest,
                                 const Tensor& local_index, int k, int ranks, bool every_row,
                                 const mok::ShipChunks* chunks) {
  const auto timed = profile("ship_rows");
  check_ship_chunks(chunks, ranks, every_row, "ship_rows");
  const int64_t n = expert.numel() / k;
  mok::ShipRows out;
  const auto make_rows = [&](int64_t total) {
    out.token = Tensor::empty({total}, DType::i32, *allocator_);
    out.head_pair = Tensor::empty({total}, DType::i32, *allocator_);
    out.entry = Tensor::empty({total, k}, DType::i32, *allocator_);
    out.gate = Tensor::empty({total, k}, DType::f32, *allocator_);
    out.pair = Tensor::empty({total, k}, DType::i32, *allocator_);
  };
  if (every_row) {  // n rows per destination: nothing to count, nothing to wait for
    out.rows.assign(static_cast<size_t>(ranks), n);
    make_rows(n * ranks);
    cuda::ship_rows_fill_every(expert.ptr<int32_t>(), gate.ptr<float>(), dest.ptr<int32_t>(),
                               local_index.ptr<int32_t>(), n, k, ranks, out.token.ptr<int32_t>(),
                               out.head_pair.ptr<int32_t>(), out.entry.ptr<int32_t>(), out.gate.ptr<float>(),
                               out.pair.ptr<int32_t>(), stream_);
    return out;
  }
  // Counts first (they size the outputs and cross to the host), then the rows.
  const size_t ws_bytes = ship_rows_workspace_bytes(n, ranks);
  Tensor ws = scratch(ws_bytes);
  // rows (R), then with chunks the chunk counts (2·C·R): one read brings both.
  const int64_t cells = chunks ? 2 * static_cast<int64_t>(chunks->chunks) * ranks : 0;
  Tensor rows = Tensor::empty({ranks + cells}, DType::i64, *allocator_);
  cuda::ship_rows_count(expert.ptr<int32_t>(), dest.ptr<int32_t>(), n, k, ranks, ws.raw(), ws_bytes,
                        rows.ptr<int64_t>(), stream_);
  Tensor locals;
  if (chunks) {
    locals = Tensor::empty({ranks}, DType::i32, *allocator_);
    locals.copy_from_host(chunks->locals.data(), locals.bytes());
    cuda::ship_chunk_counts(expert.ptr<int32_t>(), dest.ptr<int32_t>(), local_index.ptr<int32_t>(),
                            locals.ptr<int32_t>(), n, k, ranks, chunks->chunks, rows.ptr<int64_t>() + ranks, stream_);
  }
  std::vector<int64_t> read(static_cast<size_t>(ranks + cells), 0);
  rows.copy_to_host(read.data(), rows.bytes());
  out.rows.assign(read.begin(), read.begin() + ranks);
  if (chunks) {
    out.chunk_lo.assign(read.begin() + ranks, read.begin() + ranks + cells / 2);
    out.chunk_hi.assign(read.begin() + ranks + cells / 2, read.end());
  }
  int64_t total = 0;
  for (int64_t r : out.rows) total += r;
  make_rows(total);
  if (total > 0)
    cuda::ship_rows_fill(expert.ptr<int32_t>(), gate.ptr<float>(), dest.ptr<int32_t>(), local_index.ptr<int32_t>(), n,
                         k, ranks, ws.raw(), out.token.ptr<int32_t>(), out.head_pair.ptr<int32_t>(),
                         out.entry.ptr<int32_t>(), out.gate.ptr<float>(), out.pair.ptr<int32_t>(), stream_);
  return out;
}

void CudaOps::row_chunk_keys(const Tensor& entry, const std::vector<int64_t>& rows_per_rank,
                             const mok::ShipChunks& chunks, Tensor& key_lo, Tensor& key_hi) {
  const auto timed = profile("row_chunk_keys");
  const int R = static_cast<int>(rows_per_rank.size());
  check_ship_chunks(&chunks, R, false, "row_chunk_keys");
  std::vector<int64_t> offsets(static_cast<size_t>(R) + 1, 0);
  for (int q = 0; q < R; ++q) offsets[q + 1] = offsets[q] + rows_per_rank[q];
  const int64_t rows = entry.rank() > 0 ? entry.dim(0) : 0;
  if (offsets[R] != rows)
    throw std::invalid_argument("row_chunk_keys: " + std::to_string(offsets[R]) + " rows per rank for " +
                                std::to_string(rows) + " rows of entries");
  if (rows == 0) return;
  Tensor off = Tensor::empty({R + 1}, DType::i64, *allocator_);
  off.copy_from_host(offsets.data(), off.bytes());
  Tensor locals = Tensor::empty({R}, DType::i32, *allocator_);
  locals.copy_from_host(chunks.locals.data(), locals.bytes());
  cuda::row_chunk_keys(entry.ptr<int32_t>(), rows, static_cast<int>(entry.numel() / rows), off.ptr<int64_t>(),
                       locals.ptr<int32_t>(), R, chunks.chunks, key_lo.ptr<int32_t>(), key_hi.ptr<int32_t>(), stream_);
}

void CudaOps::replace_negative(Tensor& entry, int32_t pad) {
  const auto timed = profile("replace_negative");
  cuda::replace_negative(entry.ptr<int32_t>(), entry.numel(), pad, stream_);
}

void CudaOps::unroute_group(const Tensor& entry, int32_t group, Tensor& row_of_pair) {
  const auto timed = profile("unroute_group");
  if (row_of_pair.numel() != entry.numel())
    throw std::invalid_argument("unroute_group: " + std::to_string(row_of_pair.numel()) + " rows for " +
                                std::to_string(entry.numel()) + " entries");
  cuda::unroute_group(entry.ptr<int32_t>(), entry.numel(), group, row_of_pair.ptr<int32_t>(), stream_);
}

void CudaOps::row_dot(const Tensor& a, const Tensor& b, Tensor& out) {
  const auto timed = profile("row_dot");
  same_dtype(a, b, "row_dot");
  by_type(a.dtype(), "row_dot", [&]<typename T>() {
    cuda::row_dot<T>(static_cast<const T*>(a.raw()), static_cast<const T*>(b.raw()), a.dim(0), a.dim(1),
                     out.ptr<float>(), stream_);
  });
}

void CudaOps::scale_rows(const Tensor& x, const Tensor& s, Tensor& out) {
  const auto timed = profile("scale_rows");
  by_type(x.dtype(), "scale_rows", [&]<typename T>() {
    cuda::scale_rows<T>(static_cast<const T*>(x.raw()), s.ptr<float>(), x.dim(0), x.dim(1), static_cast<T*>(out.raw()),
                        stream_);
  });
}

// --- low-bit copies

void CudaOps::quantize_rows(const Tensor& x, const mok::QuantizeOptions& options, Tensor& codes, Tensor& scales,
                            Tensor* error_terms) {
  const int64_t cols = x.dim(-1), rows = cols ? x.numel() / cols : 0;
  const auto timed = profiler_->scope([&] { return low_bit_label("quantize_rows", rows, cols, options.bits); });
  const cuda::RowQuantizeParams p{options.bits, options.stochastic, options.seed, options.stream};
  Tensor workspace = scratch(cuda::quantize_rows_workspace_bytes(rows, error_terms != nullptr));
  double* terms = error_terms ? error_terms->ptr<double>() : nullptr;
  by_type(x.dtype(), "quantize_rows", [&]<typename T>() {
    cuda::quantize_rows<T>(static_cast<const T*>(x.raw()), rows, cols, p, codes.ptr<uint8_t>(), scales.ptr<float>(),
                           terms, workspace.raw(), stream_);
  });
}

void CudaOps::dequantize_rows(const Tensor& codes, const Tensor& scales, int bits, Tensor& out) {
  const int64_t cols = out.dim(-1), rows = cols ? out.numel() / cols : 0;
  const auto timed = profiler_->scope([&] { return low_bit_label("dequantize_rows", rows, cols, bits); });
  by_type(out.dtype(), "dequantize_rows", [&]<typename T>() {
    cuda::dequantize_rows<T>(codes.ptr<uint8_t>(), scales.ptr<float>(), rows, cols, bits, static_cast<T*>(out.raw()),
                             stream_);
  });
}

// --- low-rank copies (f32 factors whatever the compute dtype)

void CudaOps::gaussian_fill(Tensor& out, double variance, uint64_t seed, uint64_t stream) {
  const auto timed = profile("gaussian_fill");
  cuda::gaussian_fill(out.ptr<float>(), out.numel(), std::sqrt(variance), seed, stream, stream_);
}

void CudaOps::orthonormalize_columns(Tensor& y) {
  const auto timed = profile("orthonormalize_columns");
  const int64_t rows = y.dim(0), cols = rows ? y.numel() / rows : 0;
  Tensor workspace = scratch(cuda::orthonormalize_workspace_bytes(rows, cols));
  cuda::orthonormalize_columns(y.ptr<float>(), rows, cols, workspace.raw(), stream_);
}

void CudaOps::projection_error_terms(const Tensor& x, const Tensor& kept, const Tensor* extra, Tensor& terms) {
  const auto timed = profile("projection_error_terms");
  Tensor workspace = scratch(cuda::error_terms_workspace_bytes());
  cuda::projection_error_terms(x.ptr<float>(), x.numel(), kept.ptr<float>(), kept.numel(),
                               extra ? extra->ptr<double>() : nullptr, terms.ptr<double>(), workspace.raw(), stream_);
}

void CudaOps::sampled_error_terms(const Tensor& x, int64_t stride, const Tensor& x_hat, Tensor& terms) {
  const auto timed = profile("sampled_error_terms");
  const int64_t cols = x_hat.dim(-1), rows = cols ? x_hat.numel() / cols : 0;
  Tensor workspace = scratch(cuda::error_terms_workspace_bytes());
  cuda::sampled_error_terms(x.ptr<float>(), stride, x_hat.ptr<float>(), rows, cols, terms.ptr<double>(),
                            workspace.raw(), stream_);
}

// --- optimizer

AdamWPlan& CudaOps::adamw_plan(const std::vector<mok::Parameter*>& params, std::vector<Tensor>& m,
                               std::vector<Tensor>& v) {
  std::vector<const void*> key;
  for (size_t i = 0; i < params.size(); ++i) {
    key.push_back(params[i]->value.raw());
    key.push_back(m[i].raw());
  }
  PlanCache<AdamWPlan>& c = *adamw_;
  if (!c.plan || c.key != key) {
    std::vector<AdamWTensor> tensors;
    bool bf16_copies = false;
    for (size_t i = 0; i < params.size(); ++i) {
      mok::Parameter& p = *params[i];
      if (!p.compute_copy.empty()) bf16_copies = p.compute_copy.dtype() == DType::bf16;
      tensors.push_back({p.value.ptr<float>(), p.grad.ptr<float>(), m[i].ptr<float>(), v[i].ptr<float>(),
                         p.compute_copy.empty() ? nullptr : p.compute_copy.raw(), p.value.numel(),
                         p.weight_decay ? 1 : 0});
    }
    c.plan = std::make_unique<AdamWPlan>(tensors, bf16_copies);
    mok::ScopedMemoryTracker internal(internal_tracker_);
    c.memory = scratch(c.plan->device_bytes());
    c.plan->upload(c.memory.raw(), stream_);
    c.key = std::move(key);
  }
  return *c.plan;
}

void CudaOps::adamw_step(const std::vector<mok::Parameter*>& params, std::vector<Tensor>& m, std::vector<Tensor>& v,
                         const mok::AdamWStep& st) {
  const auto timed = profile("adamw_step");
  adamw_plan(params, m, v).step(st.lr, st.beta1, st.beta2, st.eps, st.weight_decay, st.t, stream_,
                                static_cast<float>(st.grad_scale));  // as scale_grads rounds it
}

GradNormPlan& CudaOps::grad_norm_plan(const std::vector<mok::Parameter*>& params) {
  std::vector<const void*> key;
  for (const mok::Parameter* p : params) key.push_back(p->grad.raw());
  constexpr size_t kKeep = 4;
  for (auto& cached : grad_norms_)
    if (cached->key == key) return *cached->plan;
  if (grad_norms_.size() == kKeep) grad_norms_.erase(grad_norms_.begin());  // the oldest
  grad_norms_.push_back(std::make_unique<PlanCache<GradNormPlan>>());
  PlanCache<GradNormPlan>& c = *grad_norms_.back();
  {
    std::vector<GradNormTensor> tensors;
    for (mok::Parameter* p : params) tensors.push_back({p->grad.ptr<float>(), p->grad.numel()});
    c.plan = std::make_unique<GradNormPlan>(tensors);
    mok::ScopedMemoryTracker internal(internal_tracker_);
    c.memory = scratch(c.plan->device_bytes());
    c.plan->upload(c.memory.raw(), stream_);
    c.key = std::move(key);
  }
  return *c.plan;
}

double CudaOps::grad_norm_sq(const std::vector<mok::Parameter*>& params) {
  const auto timed = profile("grad_norm_sq");
  Tensor sum = Tensor::empty({1}, DType::f64, *allocator_);
  grad_norm_plan(params).sum_squares(sum.ptr<double>(), stream_);
  double host = 0.0;
  sum.copy_to_host(&host, sizeof host);
  return host;
}

void CudaOps::scale_grads(const std::vector<mok::Parameter*>& params, double s) {
  const auto timed = profile("scale_grads");
  grad_norm_plan(params).scale(static_cast<float>(s), stream_);
}

void CudaOps::refresh_compute_copies(const std::vector<mok::Parameter*>& params) {
  const auto timed = profile("refresh_compute_copies");
  for (mok::Parameter* p : params)
    if (!p->compute_copy.empty() && p->has_master()) convert(p->value, p->compute_copy);  // else the copy is the value
}

CudaOps& cuda_ops_of(const mok::ExecContext& context, const char* who) {
  auto* ops = dynamic_cast<CudaOps*>(&context.ops());
  if (!ops) throw std::logic_error(std::string(who) + ": " + context.device().str() + " is not a CUDA context");
  return *ops;
}

}  // namespace mok::cuda
