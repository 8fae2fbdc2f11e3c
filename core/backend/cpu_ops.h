#pragma once
// CpuOps: the Ops table of the CPU. Each op runs the CPU kernels of core/backend (or the loop
// a layer used to run itself), so every result is bitwise what the CPU core computed before
// the ops interface existed, for any thread count. Tensors are host tensors of `real`
// (integer tensors i32).

#include "core/backend/ops.h"

MOK_NN_BEGIN

class CpuOps final : public Ops {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return cpu_allocator(); }
  std::string name() const override;

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
            const Tensor& b, int64_t ldb, double beta, Tensor& c, int64_t ldc) override;
  void grouped_gemm(bool trans_b, const RowSegments& segments, const Tensor& a, const Tensor& b, double beta,
                    Tensor& c) override;
  void grouped_weight_grad(const RowSegments& segments, const Tensor& a, const Tensor& dy,
                           Tensor& dw) override;

  void add_(Tensor& y, const Tensor& x) override;
  void add2_(Tensor& y, const Tensor& a, const Tensor& b) override;
  void scale(const Tensor& x, double f, Tensor& out) override;
  void add_transposed_(Tensor& y, const Tensor& x) override;
  void convert(const Tensor& src, Tensor& dst) override;

  void rms_norm_forward(const Tensor& x, const Tensor& g, double eps, Tensor& y, Tensor* rstd) override;
  void rms_norm_apply(const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& y) override;
  void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& dx,
                         Tensor& dg) override;
  void rope_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const RopeTable& table,
             bool inverse) override;
  void attention_forward(const Tensor& qkv, int batch, int seq, int heads, int hd, Tensor& o, Tensor* lse) override;
  void attention_backward(const Tensor& qkv, const Tensor& d_o, const Tensor& lse, const Tensor* o,
                          int batch, int seq, int heads, int hd, Tensor& dqkv) override;
  void attention_cached(const Tensor& qkv, int n, const std::vector<Tensor*>& k_cache,
                        const std::vector<Tensor*>& v_cache, const std::vector<int>& pos0, int heads, int hd,
                        Tensor& o) override;
  void swiglu_forward(const Tensor& a, Tensor& h) override;
  void swiglu_backward(const Tensor& a, const Tensor& dh, Tensor& da) override;
  CrossEntropySum cross_entropy(Tensor& logits, const int32_t* targets, bool write_grad) override;
  void embedding_forward(const Tensor& w, const Tensor& tokens, Tensor& x) override;
  void embedding_backward(const Tensor& dx, const Tensor& tokens, Tensor& dw) override;

  void router_softmax_topk(const Tensor& logits, int k, const LocalityPolicy* locality, Tensor& probs, Tensor& lse,
                           Tensor& expert, Tensor& gate) override;
  PairOrder sort_pairs(Tensor& expert, int experts, int64_t capacity, bool all_routed) override;
  void router_loss_sums(const Tensor& probs, const Tensor& lse, const Tensor& load, double pairs,
                        const std::vector<uint8_t>* local, Tensor& sums) override;
  void router_backward(const Tensor& probs, const Tensor& lse, const Tensor& choice, const Tensor& dgate,
                       const Tensor& load, double pairs, const std::vector<uint8_t>* local, double aux_w, double z_w,
                       double loc_w, Tensor& dlogits) override;
  void gather_rows(const Tensor& src, const Tensor& order, int k, Tensor& out) override;
  void combine_pairs(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n, int k,
                     Tensor& out) override;
  void pairs_to_rows(const Tensor& per_pair, const Tensor& order, Tensor& per_row) override;
  void rows_to_pairs(const Tensor& per_row, const Tensor& order, Tensor& per_pair) override;
  void scatter_positions(const Tensor& index, int32_t base, Tensor& out) override;
  void slot_share_counts(const Tensor& expert, const Tensor& owner, int k, Tensor& counts) override;
  void shadow_decisions(const Tensor& counts, const Tensor& owner, int self, int k, const ShadowRule& rule,
                        Tensor& rows, Tensor& dest) override;
  ShipRows ship_rows(const Tensor& expert, const Tensor& gate, const Tensor& dest, const Tensor& local_index, int k,
                     int ranks, bool every_row, const ShipChunks* chunks) override;
  void row_chunk_keys(const Tensor& entry, const std::vector<int64_t>& rows_per_rank, const ShipChunks& chunks,
                      Tensor& key_lo, Tensor& key_hi) override;
  void replace_negative(Tensor& entry, int32_t pad) override;
  void unroute_group(const Tensor& entry, int32_t group, Tensor& row_of_pair) override;
  void row_dot(const Tensor& a, const Tensor& b, Tensor& out) override;
  void scale_rows(const Tensor& x, const Tensor& s, Tensor& out) override;
  void quantize_rows(const Tensor& x, const QuantizeOptions& options, Tensor& codes, Tensor& scales,
                     Tensor* error_terms) override;
  void dequantize_rows(const Tensor& codes, const Tensor& scales, int bits, Tensor& out) override;

  void gaussian_fill(Tensor& out, double variance, uint64_t seed, uint64_t stream) override;
  void orthonormalize_columns(Tensor& y) override;
  void projection_error_terms(const Tensor& x, const Tensor& kept, const Tensor* extra, Tensor& terms) override;
  void sampled_error_terms(const Tensor& x, int64_t stride, const Tensor& x_hat, Tensor& terms) override;

  void adamw_step(const std::vector<Parameter*>& params, std::vector<Tensor>& m, std::vector<Tensor>& v,
                  const AdamWStep& step) override;
  double grad_norm_sq(const std::vector<Parameter*>& params) override;
  void scale_grads(const std::vector<Parameter*>& params, double s) override;
  void refresh_compute_copies(const std::vector<Parameter*>&) override {}  // the CPU has no compute copies
};

MOK_NN_END
