#pragma once
// CudaOps: the Ops table of one CUDA device (core/backend/ops.h), over the kernels of
// kernels/ and cuBLASLt. Everything is enqueued on the rank's one compute stream, in the
// order the layers call; the host waits only where a value must reach it: the loss of each
// forward, the gradient norm of each step, and a MoE layer's counts only where it drops
// pairs or its products cannot take the offsets on the device (fp32); router losses and
// expert loads are read after the step (read_later). A recorded step
// (kernels/cuda_step_graph.h) reads its loss after each replay instead.
//
// Element types: activations and compute copies f32 or bf16 (the context's compute dtype),
// everything else f32 (i32 for ids). Scratch space comes from the caching allocator per call
// and goes back when the call returns (stream order makes that safe). What repeats every
// step is built once: RoPE tables on the device, the optimizer's and the gradient norm's
// launch plans (rebuilt when the parameter set changes).

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

#include "core/backend/ops.h"
#include "core/tensor/memory_tracker.h"
#include "kernels/cuda_caching_allocator.h"
#include "kernels/op_profiler.h"

MOK_NN_BEGIN
class ExecContext;
MOK_NN_END

namespace mok::cuda {

class CudnnAttention;

class LtGemm;
class GroupedGemm;
enum class GemmType;
class AdamWPlan;
class GradNormPlan;
class StepRecording;
class PinnedReadings;

class CudaOps final : public mok::Ops {
 public:
  // Binds `device` on the calling thread and creates the stream, cuBLASLt state and allocator.
  explicit CudaOps(int device);
  ~CudaOps() override;

  mok::Device device() const override { return mok::Device::cuda(device_); }
  mok::Allocator& allocator() override { return *allocator_; }
  std::string name() const override { return name_; }
  void synchronize() override;
  void bind_thread() override;
  cudaStream_t stream() const { return stream_; }
  CudaCachingAllocator& caching_allocator() { return *allocator_; }
  // Device time per op, off unless enabled (kernels/op_profiler.h).
  OpProfiler& profiler() { return *profiler_; }
  void start_op_profile() override { profiler_->set_enabled(true); }
  // A CUDA graph of a step's work (kernels/cuda_step_graph.h).
  std::unique_ptr<mok::StepGraph> make_step_graph() override;
  // While a step is being recorded (non-null): the allocator records its copies and hands
  // out the graph's blocks, and cross_entropy leaves its sums for `recording` to read back.
  void set_recording(StepRecording* recording);
  // MOK_GROUPED_SEGMENTS=host makes every MoE layer read its expert counts (a wait per layer,
  // and no recorded MoE steps); by default a dropless sort leaves its offsets on the device.
  bool grouped_segments_on_device() const override { return segments_on_device_; }
  // Queued into pinned memory (kernels/pinned_readings.h); while recording, a read-back of
  // the recording, valid after each replay.
  std::shared_ptr<mok::HostReading> read_later(const mok::Tensor& t) override;
  std::string op_profile_report(const std::string& title, int steps, double wall_s, int top) override;

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const mok::Tensor& a,
            int64_t lda, const mok::Tensor& b, int64_t ldb, double beta, mok::Tensor& c, int64_t ldc) override;
  void gemm_add(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const mok::Tensor& a,
                int64_t lda, const mok::Tensor& b, int64_t ldb, const mok::Tensor& r, mok::Tensor& c) override;
  void grouped_gemm(bool trans_b, const mok::RowSegments& segments, const mok::Tensor& a, const mok::Tensor& b,
                    double beta, mok::Tensor& c) override;
  void grouped_weight_grad(const mok::RowSegments& segments, const mok::Tensor& a, const mok::Tensor& dy,
                           mok::Tensor& dw) override;

  void add_(mok::Tensor& y, const mok::Tensor& x) override;
  // f32 pairs in one launch (kernels/add_ranges.h), any other pair by add_.
  void add_each(const std::vector<AddPair>& pairs) override;
  void add2_(mok::Tensor& y, const mok::Tensor& a, const mok::Tensor& b) override;
  void scale(const mok::Tensor& x, double f, mok::Tensor& out) override;
  void add_transposed_(mok::Tensor& y, const mok::Tensor& x) override;
  void convert(const mok::Tensor& src, mok::Tensor& dst) override;

  void rms_norm_forward(const mok::Tensor& x, const mok::Tensor& g, double eps, mok::Tensor& y,
                        mok::Tensor* rstd) override;
  void rms_norm_apply(const mok::Tensor& x, const mok::Tensor& g, const mok::Tensor& rstd, mok::Tensor& y) override;
  void rms_norm_backward(const mok::Tensor& dy, const mok::Tensor& x, const mok::Tensor& g, const mok::Tensor& rstd,
                         mok::Tensor& dx, mok::Tensor& dg) override;
  void rms_norm_backward_add(const mok::Tensor& dy, const mok::Tensor& x, const mok::Tensor& g,
                             const mok::Tensor& rstd, const mok::Tensor& r, mok::Tensor& dx, mok::Tensor& dg) override;
  void rope_(mok::Tensor& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const mok::RopeTable& table,
             bool inverse) override;
  void rope_at_(mok::Tensor& x, int64_t rows, int64_t ld, int heads, int seq, const std::vector<int>& pos0,
                const mok::RopeTable& table, bool inverse) override;
  void attention_forward(const mok::Tensor& qkv, int batch, int seq, int heads, int hd, mok::Tensor& o,
                         mok::Tensor* lse) override;
  void attention_backward(const mok::Tensor& qkv, const mok::Tensor& d_o, const mok::Tensor& lse, const mok::Tensor* o,
                          int batch, int seq, int heads, int hd, mok::Tensor& dqkv) override;
  void attention_cached(const mok::Tensor& qkv, int n, const std::vector<mok::Tensor*>& k_cache,
                        const std::vector<mok::Tensor*>& v_cache, const std::vector<int>& pos0, int heads, int hd,
                        mok::Tensor& o) override;
  void swiglu_forward(const mok::Tensor& a, mok::Tensor& h) override;
  void swiglu_backward(const mok::Tensor& a, const mok::Tensor& dh, mok::Tensor& da) override;
  void swiglu_backward_gated(const mok::Tensor& a, mok::Tensor&& h, mok::Tensor& dh, const mok::Tensor& s,
                             mok::Tensor& dgate, mok::Tensor& da) override;
  mok::CrossEntropySum cross_entropy(mok::Tensor& logits, const int32_t* targets, bool write_grad) override;
  void embedding_forward(const mok::Tensor& w, const mok::Tensor& tokens, mok::Tensor& x) override;
  void embedding_backward(const mok::Tensor& dx, const mok::Tensor& tokens, mok::Tensor& dw) override;

  void router_softmax_topk(const mok::Tensor& logits, int k, const mok::LocalityPolicy* locality, mok::Tensor& probs,
                           mok::Tensor& lse, mok::Tensor& expert, mok::Tensor& gate) override;
  mok::PairOrder sort_pairs(mok::Tensor& expert, int experts, int64_t capacity, bool all_routed) override;
  mok::PairOrder sort_pairs_counted(mok::Tensor& expert, int experts, const std::vector<int64_t>& counts) override;
  void router_loss_sums(const mok::Tensor& probs, const mok::Tensor& lse, const mok::Tensor& load, double pairs,
                        const std::vector<uint8_t>* local, mok::Tensor& sums) override;
  void router_backward(const mok::Tensor& probs, const mok::Tensor& lse, const mok::Tensor& choice,
                       const mok::Tensor& dgate, const mok::Tensor& load, double pairs,
                       const std::vector<uint8_t>* local, double aux_w, double z_w, double loc_w,
                       mok::Tensor& dlogits) override;
  void gather_rows(const mok::Tensor& src, const mok::Tensor& order, int k, mok::Tensor& out) override;
  void gather_rows_scaled(const mok::Tensor& src, const mok::Tensor& order, int k, const mok::Tensor& s,
                          mok::Tensor& out, mok::Tensor& scaled) override;
  void combine_pairs(const mok::Tensor& rows, const mok::Tensor& row_of_pair, const mok::Tensor* gate, int64_t n,
                     int k, mok::Tensor& out) override;
  void combine_pairs_add(const mok::Tensor& rows, const mok::Tensor& row_of_pair, const mok::Tensor* gate, int64_t n,
                         int k, const mok::Tensor& residual, mok::Tensor& out) override;
  void pairs_to_rows(const mok::Tensor& per_pair, const mok::Tensor& order, mok::Tensor& per_row) override;
  void rows_to_pairs(const mok::Tensor& per_row, const mok::Tensor& order, mok::Tensor& per_pair) override;
  void scatter_positions(const mok::Tensor& index, int32_t base, mok::Tensor& out) override;
  void slot_share_counts(const mok::Tensor& expert, const mok::Tensor& owner, int k, mok::Tensor& counts) override;
  void shadow_decisions(const mok::Tensor& counts, const mok::Tensor& owner, int self, int k,
                        const mok::ShadowRule& rule, mok::Tensor& rows, mok::Tensor& dest) override;
  mok::ShipRows ship_rows(const mok::Tensor& expert, const mok::Tensor& gate, const mok::Tensor& dest,
                          const mok::Tensor& local_index, int k, int ranks, bool every_row,
                          const mok::ShipChunks* chunks) override;
  void row_chunk_keys(const mok::Tensor& entry, const std::vector<int64_t>& rows_per_rank,
                      const mok::ShipChunks& chunks, mok::Tensor& key_lo, mok::Tensor& key_hi) override;
  void replace_negative(mok::Tensor& entry, int32_t pad) override;
  void unroute_group(const mok::Tensor& entry, int32_t group, mok::Tensor& row_of_pair) override;
  void row_dot(const mok::Tensor& a, const mok::Tensor& b, mok::Tensor& out) override;
  void scale_rows(const mok::Tensor& x, const mok::Tensor& s, mok::Tensor& out) override;
  void quantize_rows(const mok::Tensor& x, const mok::QuantizeOptions& options, mok::Tensor& codes,
                     mok::Tensor& scales, mok::Tensor* error_terms) override;
  void dequantize_rows(const mok::Tensor& codes, const mok::Tensor& scales, int bits, mok::Tensor& out) override;

  void gaussian_fill(mok::Tensor& out, double variance, uint64_t seed, uint64_t stream) override;
  void orthonormalize_columns(mok::Tensor& y) override;
  void projection_error_terms(const mok::Tensor& x, const mok::Tensor& kept, const mok::Tensor* extra,
                              mok::Tensor& terms) override;
  void sampled_error_terms(const mok::Tensor& x, int64_t stride, const mok::Tensor& x_hat, mok::Tensor& terms) override;

  void adamw_step(const std::vector<mok::Parameter*>& params, std::vector<mok::Tensor>& m,
                  std::vector<mok::Tensor>& v, const mok::AdamWStep& step) override;
  double grad_norm_sq(const std::vector<mok::Parameter*>& params) override;
  void scale_grads(const std::vector<mok::Parameter*>& params, double s) override;
  void refresh_compute_copies(const std::vector<mok::Parameter*>& params) override;

 private:
  OpProfiler::Scope profile(const char* op);
  mok::Tensor scratch(size_t bytes);
  mok::Tensor routed_fractions(const mok::Tensor& load, double pairs);  // (E) f32 on the device
  // (n) i32 copied from pos0's own memory: in a recorded decode step that is the session's
  // positions, which each replay refills (core/backend/step_graph.h, declared inputs).
  mok::Tensor upload_positions(const std::vector<int>& pos0);
  mok::Tensor upload_remote_mask(const std::vector<uint8_t>* local, int experts);
  // The pair sort's kernels on the stream, nothing read: order, row_of_pair (pairs) i32,
  // counts (2E) i64 = routed then kept per expert, offsets (E + 1) i64 of the kept rows.
  struct SortedPairs {
    mok::Tensor order, row_of_pair, counts, offsets;
  };
  SortedPairs launch_sort_pairs(mok::Tensor& expert, int experts, int64_t capacity);
  struct DeviceRope;
  const DeviceRope& rope_table(const mok::RopeTable& table);
  // rms_norm_backward(_add): dx (+= r when given) through one kernel.
  void rms_norm_backward_into(const mok::Tensor& dy, const mok::Tensor& x, const mok::Tensor& g,
                              const mok::Tensor& rstd, const mok::Tensor* r, mok::Tensor& dx, mok::Tensor& dg);
  template <typename Plan>
  struct PlanCache;
  AdamWPlan& adamw_plan(const std::vector<mok::Parameter*>& params, std::vector<mok::Tensor>& m,
                        std::vector<mok::Tensor>& v);
  GradNormPlan& grad_norm_plan(const std::vector<mok::Parameter*>& params);

  int device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaCachingAllocator> allocator_;
  // Counts what the ops keep for themselves (RoPE tables, launch plans): they outlive any
  // rank's tracker, so they must not register with one.
  mok::MemoryTracker internal_tracker_;
  std::unique_ptr<LtGemm> lt_;
  // Grouped products of expert segments (kernels/checks/gemm_timings.cpp compares methods).
  std::unique_ptr<GroupedGemm> grouped_streams_, grouped_kernel_;
  bool grouped_kernel_is_wgmma_ = false;  // the Hopper (TMA + wgmma) kernel, not mma.sync
  GroupedGemm& grouped_for(GemmType ab_type, int groups, bool weight_grad);
  std::map<uint64_t, std::unique_ptr<DeviceRope>> ropes_;  // by RopeTable::id()
  std::unique_ptr<PlanCache<AdamWPlan>> adamw_;
  // A few plans: a multi-rank step sums dense and expert gradients separately.
  std::vector<std::unique_ptr<PlanCache<GradNormPlan>>> grad_norms_;
  std::unique_ptr<OpProfiler> profiler_;
  StepRecording* recording_ = nullptr;
  std::unique_ptr<PinnedReadings> readings_;
  bool segments_on_device_ = true;
  // Fused attention through cuDNN (kernels/cudnn_attention.h) for bf16 where cuDNN 9 loads;
  // the project's flash kernels for fp32, with MOK_ATTENTION=own, or when cuDNN has no engine.
  std::unique_ptr<CudnnAttention> cudnn_attention_;
  CudnnAttention* cudnn_attention();
};

// The CUDA ops table of `context`; throws std::logic_error naming `who` when the context is
// not a CUDA one.
CudaOps& cuda_ops_of(const mok::ExecContext& context, const char* who);

}  // namespace mok::cuda
