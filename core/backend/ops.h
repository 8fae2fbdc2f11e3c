#pragma once
// Ops: the coarse, fused operations every layer runs through, one implementation per device.
// Layers keep their forward/backward pairs and call only these (through the ExecContext of
// their rank, core/backend/exec_context.h), so the model has one code path and two backends:
//   CpuOps (core/backend/cpu_ops.h)  wraps the CPU kernels of core/backend, bit for bit
//   CudaOps (kernels/cuda_ops.h)     CUDA kernels and cuBLASLt, registered by kernels/
//
// Element types: tensors of activations and compute copies of weights are in the context's
// compute dtype (`real` on the CPU; f32 or bf16 on a GPU); weights' master values, gradients
// and optimizer state are `real` (f32 on a GPU); statistics (rstd, log-sum-exp, router
// probabilities and gates, losses) are `real` on the CPU and f32 on a GPU. Integer tensors
// (token ids, expert ids, permutations) are i32. Every tensor an op takes is on the op's
// device. Shapes are row-major; "(n, d)" means n rows of d.
//
// Determinism: every op's result is a function of its inputs only (fixed reduction orders,
// no floating-point atomics), so a run repeats bit for bit on one machine.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/cross_entropy_kernel.h"
#include "core/backend/host_reading.h"
#include "core/backend/row_quantize.h"
#include "core/backend/row_segments.h"
#include "core/backend/step_graph.h"
#include "core/parallel/shadow_rule.h"
#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class RopeTable;
struct LocalityPolicy;
struct Parameter;

// Routed (token, slot) pairs p = t·k + s sorted by expert: the permutation that gathers each
// expert's tokens into one contiguous segment (a stable counting sort: within an expert, pairs
// keep their order).
struct PairOrder {
  Tensor order;          // (m) i32: pair index of sorted row i; m = kept pairs
  Tensor row_of_pair;    // (n·k) i32: sorted row of pair p, −1 when dropped
  RowSegments segments;  // (E): expert e's rows are [off[e], off[e+1]); on the sorting device
  Tensor load;           // (E) i64, on the sorting device: pairs routed to each expert before capacity
  int64_t dropped = 0;   // pairs beyond capacity (0 without one)
  int64_t rows() const { return segments.rows(); }
  std::vector<int64_t> host_load() const {  // `load` on the host (waits for the device)
    std::vector<int64_t> v(static_cast<size_t>(load.numel()));
    if (!v.empty()) load.copy_to_host(v.data(), load.bytes());
    return v;
  }
};

// The rows a rank ships for MoK dispatch (Ops::ship_rows): one per (destination rank, token)
// holding at least one shipped slot, destination ranks ascending, tokens in order within a
// rank; each row's k entries in slot order, then padding.
struct ShipRows {
  std::vector<int64_t> rows;  // (R), host: rows to each destination rank
  Tensor token;               // (Σ rows) i32: the token of each row
  Tensor head_pair;           // (Σ rows) i32: pair t·k+s of the row's first entry
  Tensor entry;               // (Σ rows, k) i32: the entry's expert index on the destination, −1 pad
  Tensor gate;                // (Σ rows, k) f32/`real`: the entry's gate, 0 pad
  Tensor pair;                // (Σ rows, k) i32: the entry's pair t·k+s, −1 pad
  // With ShipChunks: (C·R) rows to rank q whose lowest (highest) entry there lies in chunk c,
  // at c·R + q (chunk-major, as the chunked buffers are); empty without.
  std::vector<int64_t> chunk_lo, chunk_hi;
};

// Rows cut into chunks by their entries' experts (the GPU plan's overlap of transfer and
// compute, core/parallel/mok_dispatcher.h): rank q's local experts are cut into `chunks`
// consecutive groups (expert_chunk, core/parallel/expert_chunk.h, with L = locals[q]).
struct ShipChunks {
  int chunks = 1;               // C
  std::vector<int32_t> locals;  // (R) local experts on each rank
};

// The router's loss sums, before their coefficients (core/routing/topk_router.h):
//   aux = Σ_e f_e·P_e with P_e the mean probability of expert e; z_sum = Σ_t lse_t²;
//   remote_sum = Σ_t Σ_{e not local} p_te.
// Ops::router_loss_sums writes them as three doubles in this order.
struct RouterLossSums {
  double aux = 0.0;
  double z_sum = 0.0;
  double remote_sum = 0.0;
};

struct AdamWStep {
  double lr = 0.0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  int64_t t = 1;             // 1-based update count (bias correction)
  double grad_scale = 1.0;   // gradient clipping: the update uses each gradient as scale_grads(s)
                             // leaves it; the CPU scales them first, a GPU inside the update
                             // (the gradients are then left as they were)
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  virtual std::string name() const = 0;  // e.g. "cpu (OpenBLAS)", "cuda:0 NVIDIA H200"
  // Waits until all work issued so far has finished (timings; a no-op on the CPU).
  virtual void synchronize() {}
  // Makes this device the calling thread's (each rank thread calls it, through
  // ScopedExecContext, before it computes; a no-op on the CPU).
  virtual void bind_thread() {}
  // Device time op by op, for a backend that can time its ops (CUDA: kernels/op_profiler.h).
  // start_op_profile() begins timing every op; op_profile_report() waits for the device, stops
  // and returns the table of what was timed since, per step (`steps` steps took `wall_s`
  // seconds in all), the `top` largest op shapes listed. A backend that cannot time its ops
  // returns "".
  virtual void start_op_profile() {}
  virtual std::string op_profile_report(const std::string& title, int steps, double wall_s, int top) {
    (void)title, (void)steps, (void)wall_s, (void)top;
    return {};
  }
  // A recorder of a step's device work for replay (core/backend/step_graph.h); null where the
  // backend has none (the CPU).
  virtual std::unique_ptr<StepGraph> make_step_graph() { return nullptr; }
  // Whether a step with MoE layers (no capacity, one rank) can be recorded: its grouped
  // products take their segments' offsets on the device (the CPU: no recording at all).
  virtual bool grouped_segments_on_device() const { return false; }
  // A small tensor's values for the host, read later (host_reading.h): here copied at once.
  virtual std::shared_ptr<HostReading> read_later(const Tensor& t) { return copied_reading(t); }

  // --- matrix products: C(m,n) = alpha·op(A)·op(B) + beta·C over strided row-major views
  // (lda, ldb, ldc in elements). A and B in the compute dtype; C in the compute dtype or
  // `real` (weight gradients, router logits).
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                    int64_t lda, const Tensor& b, int64_t ldb, double beta, Tensor& c, int64_t ldc) = 0;
  // Expert segments: rows [off[g], off[g+1]) of A (M, k) times B_g = b[g] of stacked B
  // (G, k, n) — or (G, n, k) used transposed — into the same rows of C (M, n). A backend
  // takes the offsets where they are (row_segments.h), reading them only where it must.
  virtual void grouped_gemm(bool trans_b, const RowSegments& segments, const Tensor& a, const Tensor& b,
                            double beta, Tensor& c) = 0;
  // C(m, n) = alpha·op(A)·op(B) + R: a product and a residual add, C and R contiguous and of
  // C's dtype. Here the product and then the add (the same bits as the two calls); a backend
  // may fuse them into one pass over C (CUDA: the GEMM reads R in its epilogue).
  virtual void gemm_add(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                        int64_t lda, const Tensor& b, int64_t ldb, const Tensor& r, Tensor& c) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0, c, n);
    add_(c, r);
  }
  // dW_g += A[rows g]ᵀ·dY[rows g] for stacked dW (G, k, n) in `real`; A (M, k), dY (M, n).
  virtual void grouped_weight_grad(const RowSegments& segments, const Tensor& a, const Tensor& dy,
                                   Tensor& dw) = 0;

  // --- elementwise
  virtual void add_(Tensor& y, const Tensor& x) = 0;                    // y += x
  virtual void add2_(Tensor& y, const Tensor& a, const Tensor& b) = 0;  // y += (a + b)
  // add_(*y, *x) for every pair (no y overlapping another pair's y or x): here one by one; a
  // backend may add them in one launch (a MoK owner adding its shadows' weight gradients, two
  // blocks an expert).
  struct AddPair {
    Tensor* y = nullptr;
    const Tensor* x = nullptr;
  };
  virtual void add_each(const std::vector<AddPair>& pairs) {
    for (const AddPair& p : pairs) add_(*p.y, *p.x);
  }
  virtual void scale(const Tensor& x, double f, Tensor& out) = 0;       // out = x·f
  virtual void add_transposed_(Tensor& y, const Tensor& x) = 0;         // y (r, c) += xᵀ, x (c, r); `real`
  virtual void convert(const Tensor& src, Tensor& dst) = 0;             // element type change, same shape

  // --- layers' fused kernels
  // RMSNorm over rows: y = x·rstd·g, rstd = 1/sqrt(mean(x²) + eps); rstd (n) kept when given.
  virtual void rms_norm_forward(const Tensor& x, const Tensor& g, double eps, Tensor& y, Tensor* rstd) = 0;
  virtual void rms_norm_apply(const Tensor& x, const Tensor& g, const Tensor& rstd, Tensor& y) = 0;
  // dx written; dg (`real`) accumulated.
  virtual void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd,
                                 Tensor& dx, Tensor& dg) = 0;
  // The same with dx += r after (the residual branch's gradient): here the two calls, fused
  // where a backend can.
  virtual void rms_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& g, const Tensor& rstd,
                                     const Tensor& r, Tensor& dx, Tensor& dg) {
    rms_norm_backward(dy, x, g, rstd, dx, dg);
    add_(dx, r);
  }
  // Rotary embedding of `heads` heads at the start of each of `rows` rows of x (row stride ld).
  virtual void rope_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, const RopeTable& table,
                     bool inverse) = 0;
  // The same over sequences of `seq` rows each, sequence i starting at position pos0[i]
  // (decoding: every sequence at its own cache position). Here rope_ per sequence; a backend
  // may turn every row in one pass, reading the positions from pos0's memory when it runs.
  virtual void rope_at_(Tensor& x, int64_t rows, int64_t ld, int heads, int seq, const std::vector<int>& pos0,
                        const RopeTable& table, bool inverse) {
    for (size_t i = 0; i < pos0.size() && static_cast<int64_t>(i) * seq < rows; ++i) {
      const int64_t r0 = static_cast<int64_t>(i) * seq, n = std::min<int64_t>(seq, rows - r0);
      Tensor part = x.view(r0 * ld, {n, ld});
      rope_(part, n, ld, heads, seq, pos0[i], table, inverse);
    }
  }
  // Causal attention: qkv (b·s, 3·h·hd) → o (b·s, h·hd), lse (b, h, s) when given. Backward
  // takes o when the caller kept it (else a backend that needs it recomputes it).
  virtual void attention_forward(const Tensor& qkv, int batch, int seq, int heads, int hd, Tensor& o,
                                 Tensor* lse) = 0;
  virtual void attention_backward(const Tensor& qkv, const Tensor& d_o, const Tensor& lse, const Tensor* o,
                                  int batch, int seq, int heads, int hd, Tensor& dqkv) = 0;
  // Decoding over KV caches: for each sequence b, n new rows qkv[b·n + r] (RoPE applied) at
  // positions pos0[b] + r. Their keys and values are written to rows pos0[b] + r of k_cache[b]
  // and v_cache[b] ((max_len, h·hd) each, in the compute dtype); query row r then attends to
  // cache rows [0, pos0[b] + r] (keys in order, one fixed reduction order) → o (batch·n, h·hd).
  virtual void attention_cached(const Tensor& qkv, int n, const std::vector<Tensor*>& k_cache,
                                const std::vector<Tensor*>& v_cache, const std::vector<int>& pos0, int heads, int hd,
                                Tensor& o) = 0;
  // SwiGLU: a (n, 2f) = [gate | up] → h (n, f); backward writes da (n, 2f).
  virtual void swiglu_forward(const Tensor& a, Tensor& h) = 0;
  virtual void swiglu_backward(const Tensor& a, const Tensor& dh, Tensor& da) = 0;
  // The routed experts' backward through their gates s (n, f32/`real`): dgate (n) = Σ_j dh·h
  // row by row (dh before the gate; h = swiglu(a), handed over: the op releases it when it is
  // done with it; or empty, and then built here as swiglu_forward builds it), then da as
  // swiglu_backward of dh's rows scaled by s, each scaled row rounded to dh's dtype as
  // scale_rows rounds it. Here swiglu_forward where h is empty, row_dot, scale_rows (dh scaled
  // in place: its values afterwards are the scaled ones) and swiglu_backward; a backend may
  // fuse them, rebuild h from a instead of reading it, and leave dh as it was.
  virtual void swiglu_backward_gated(const Tensor& a, Tensor&& h, Tensor& dh, const Tensor& s, Tensor& dgate,
                                     Tensor& da) {
    if (h.empty()) {
      h = Tensor::empty({a.dim(0), a.dim(1) / 2}, a.dtype(), a.allocator());
      swiglu_forward(a, h);
    }
    row_dot(dh, h, dgate);
    h.reset();
    scale_rows(dh, s, dh);
    swiglu_backward(a, dh, da);
  }
  // Cross-entropy of logits (n, V) against host targets (n; negative = not scored); with
  // write_grad the logits become softmax − onehot. Returns the summed loss on the host.
  virtual CrossEntropySum cross_entropy(Tensor& logits, const int32_t* targets, bool write_grad) = 0;
  // x (n, d) = W[tokens]; tokens (n) i32. Backward: dW (`real`) row v += Σ dx[t] over
  // tokens[t] = v, in token order.
  virtual void embedding_forward(const Tensor& w, const Tensor& tokens, Tensor& x) = 0;
  virtual void embedding_backward(const Tensor& dx, const Tensor& tokens, Tensor& dw) = 0;

  // --- routing and dispatch (core/routing/topk_router.h, core/model/local_dispatcher.cpp)
  // Softmax of logits (n, E) and top-k (ties to the lower index; with `locality`, its
  // preference): probs (n, E), lse (n), expert (n·k) i32, gate (n·k) renormalised.
  virtual void router_softmax_topk(const Tensor& logits, int k, const LocalityPolicy* locality, Tensor& probs,
                                    Tensor& lse, Tensor& expert, Tensor& gate) = 0;
  // Sorts pairs by expert; pairs beyond `capacity` per expert (in pair order; 0 = no limit)
  // are dropped and their `expert` set to −1 in place; pairs given as −1 are not routed. The
  // kept rows size the order, so the counts reach the host (a wait) — unless the caller knows
  // every pair is routed (`all_routed`: no −1 given, as a router's top-k) and there is no
  // capacity: then every pair is a row, and a GPU leaves the offsets and the load on the device.
  virtual PairOrder sort_pairs(Tensor& expert, int experts, int64_t capacity, bool all_routed = false) = 0;
  // The same without capacity, the kept rows per expert already known to the caller
  // (`counts` (E), e.g. from a peer's message; −1 pairs are not routed): the offsets come from
  // them, so nothing waits for the device. Here: sort_pairs, then a check that the counts
  // hold (logic_error if not), so every plan that runs on the CPU checks them.
  virtual PairOrder sort_pairs_counted(Tensor& expert, int experts, const std::vector<int64_t>& counts);
  // Routed fraction per expert f_e = load_e / pairs (0 when pairs = 0), in double, then the
  // statistics' type: load (E) i64 on this device (global counts in data-parallel runs).
  // local (E): 1 where the expert lives on this rank, for the locality loss (null: none).
  // sums: (3) f64 on this device, RouterLossSums' fields in order. Not waited for: the values
  // reach the host when the caller reads them (after the step).
  virtual void router_loss_sums(const Tensor& probs, const Tensor& lse, const Tensor& load, double pairs,
                                const std::vector<uint8_t>* local, Tensor& sums) = 0;
  // dlogits (n, E) of the gates' gradient dgate (n·k), the aux, z and locality losses
  // (weights already divided by n and scaled), through the softmax. choice: experts before
  // capacity; load and pairs as for router_loss_sums.
  virtual void router_backward(const Tensor& probs, const Tensor& lse, const Tensor& choice, const Tensor& dgate,
                               const Tensor& load, double pairs, const std::vector<uint8_t>* local, double aux_w,
                               double z_w, double loc_w, Tensor& dlogits) = 0;
  // out (m, d): out[i] = src[order[i] / k]   (the token of sorted pair i). src and out of one
  // dtype: the compute types, or i32 (index tables permuted with their rows).
  virtual void gather_rows(const Tensor& src, const Tensor& order, int k, Tensor& out) = 0;
  // The same, and scaled (m, d) = s[i]·out[i] (s: m, f32/`real`; the routed experts' gated
  // gradient): here gather_rows then scale_rows; a backend may write both from one read.
  virtual void gather_rows_scaled(const Tensor& src, const Tensor& order, int k, const Tensor& s, Tensor& out,
                                  Tensor& scaled) {
    gather_rows(src, order, k, out);
    scale_rows(out, s, scaled);
  }
  // out (n, d): out[t] = Σ_s gate[t·k+s]·rows[row_of_pair[t·k+s]] over slots in order, skipping
  // dropped pairs; gate null → 1.
  virtual void combine_pairs(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n, int k,
                             Tensor& out) = 0;
  // The same followed by out += residual (n, d; the MoE branch joining the residual stream):
  // here the two calls; a backend may add before rounding the combine.
  virtual void combine_pairs_add(const Tensor& rows, const Tensor& row_of_pair, const Tensor* gate, int64_t n,
                                 int k, const Tensor& residual, Tensor& out) {
    combine_pairs(rows, row_of_pair, gate, n, k, out);
    add_(out, residual);
  }
  // per_row[i] = per_pair[order[i]];  per_pair (n·k) = 0, then per_pair[order[i]] = per_row[i]
  // (rows_to_pairs skips order[i] < 0).
  virtual void pairs_to_rows(const Tensor& per_pair, const Tensor& order, Tensor& per_row) = 0;
  virtual void rows_to_pairs(const Tensor& per_row, const Tensor& order, Tensor& per_pair) = 0;
  // out[index[i]] = base + i for every i with index[i] ≥ 0; the rest of out (i32) is untouched.
  virtual void scatter_positions(const Tensor& index, int32_t base, Tensor& out) = 0;

  // --- MoK dispatch plan (core/parallel/mok_dispatcher.h), made where the routing lives.
  // expert (n·k) i32 (−1: not routed); owner (E) i32: the rank holding each expert.
  // counts (E·k) i32: counts[e·k + m − 1] = tokens with a slot on e and m slots in all on
  // experts of e's rank (a row shipped once for m experts costs each of them 1/m).
  virtual void slot_share_counts(const Tensor& expert, const Tensor& owner, int k, Tensor& counts) = 0;
  // The rank's choices from those counts (E·k i32): rows (E) f64 = Σ_m counts[e·k + m − 1] / m
  // (m ascending; 0 for experts of rank `self`), and dest (E) i32 = −1 where `rule` shadows the
  // expert (never for `self`'s own), else owner[e] — what ship_rows takes.
  virtual void shadow_decisions(const Tensor& counts, const Tensor& owner, int self, int k, const ShadowRule& rule,
                                Tensor& rows, Tensor& dest) = 0;
  // The rows to ship (ShipRows): slot (t, s) with expert e is shipped to dest[e] (E, i32; −1:
  // not shipped), its entry is local_index[e] (E, i32). gate (n·k) the routing gates. Waits
  // for the row counts (they size the outputs and the peers' receive buffers) — unless
  // every_row: then every (destination, token) has its row, one without entries there all
  // pads with head_pair −1, so rows[q] = n and nothing waits (the fixed layout of
  // core/parallel/fixed_row_exchange.h).
  // With `chunks` (not with every_row) the same wait brings ShipRows::chunk_lo and chunk_hi.
  virtual ShipRows ship_rows(const Tensor& expert, const Tensor& gate, const Tensor& dest, const Tensor& local_index,
                             int k, int ranks, bool every_row = false, const ShipChunks* chunks = nullptr) = 0;
  // Chunk keys of rows held rank by rank (rows_per_rank[q] consecutive rows of rank q; R =
  // its size): a row of rank q whose entries (entry (rows, k) i32: local expert indices on q,
  // −1 pad, at least one not) lie in chunks c_lo … c_hi gets key_lo = c_lo·R + q and key_hi =
  // c_hi·R + q (rows, i32 each): sorted stably by them, the rows lie as the chunk-major
  // buffers of the lowest and of the highest chunk. No wait.
  virtual void row_chunk_keys(const Tensor& entry, const std::vector<int64_t>& rows_per_rank,
                              const ShipChunks& chunks, Tensor& key_lo, Tensor& key_hi) = 0;
  // entry (m) i32: every value < 0 becomes `pad`, in place.
  virtual void replace_negative(Tensor& entry, int32_t pad) = 0;
  // row_of_pair (m) i32 = −1 wherever entry (m) i32 == group; the rest untouched.
  virtual void unroute_group(const Tensor& entry, int32_t group, Tensor& row_of_pair) = 0;
  // out[r] = Σ_j a[r, j]·b[r, j];  out[r, :] = s[r]·x[r, :]  (out may be x).
  virtual void row_dot(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void scale_rows(const Tensor& x, const Tensor& s, Tensor& out) = 0;

  // --- low-bit copies (kitten activations; core/backend/row_quantize.h has the format)
  // x (rows, cols) in the compute dtype (leading dimensions are rows) → codes (rows, quantized_row_bytes(cols, bits)) u8 and
  // scales (rows) f32. error_terms, when given: (2) f64 [Σ (x − x̃)², Σ x²] in a fixed
  // summation order, left on the device so that a save never waits for it.
  virtual void quantize_rows(const Tensor& x, const QuantizeOptions& options, Tensor& codes, Tensor& scales,
                             Tensor* error_terms) = 0;
  // out (rows, cols) = x̃, in the compute dtype.
  virtual void dequantize_rows(const Tensor& codes, const Tensor& scales, int bits, Tensor& out) = 0;

  // --- low-rank copies (kitten activations: core/kittens/sketch, rsvd and subspace keepers).
  // Their factors are `real` on the CPU and f32 on a GPU, whatever the compute dtype.
  // out (rows, cols) `real`/f32: element (i, j) = sqrt(variance)·counter_normal(seed, stream,
  // i·cols + j) (core/util/counter_rng.h), rounded once to the element type.
  virtual void gaussian_fill(Tensor& out, double variance, uint64_t seed, uint64_t stream) = 0;
  // y (rows, cols) `real`/f32, rows ≥ cols, replaced by Q whose nonzero columns are orthonormal
  // and span range(y) to rounding (CPU: Householder, every column nonzero; GPU: CholeskyQR2 in
  // double, a numerically dependent column comes out zero). Either way Q·Qᵀ projects onto range(y).
  virtual void orthonormalize_columns(Tensor& y) = 0;
  // terms (2) f64 = [max(0, Σ x² − Σ kept²) + (extra ? extra[0] : 0), Σ x²], sums in double:
  // the error terms of a projection X → X·V·Vᵀ (or U·Uᵀ·X) that keeps `kept`.
  virtual void projection_error_terms(const Tensor& x, const Tensor& kept, const Tensor* extra, Tensor& terms) = 0;
  // terms (2) f64 = [Σ (x[i·stride] − x_hat[i])², Σ x[i·stride]²] over the rows i of x_hat
  // (rows, cols); x (n, cols); both `real`/f32; sums in double.
  virtual void sampled_error_terms(const Tensor& x, int64_t stride, const Tensor& x_hat, Tensor& terms) = 0;

  // --- optimizer (core/train/adamw.h, core/train/grad_clip.h); m, v index-aligned with params.
  // Writes each parameter's compute copy (if it has one) from the updated value.
  virtual void adamw_step(const std::vector<Parameter*>& params, std::vector<Tensor>& m, std::vector<Tensor>& v,
                          const AdamWStep& step) = 0;
  virtual double grad_norm_sq(const std::vector<Parameter*>& params) = 0;  // Σ g², fixed order
  virtual void scale_grads(const std::vector<Parameter*>& params, double s) = 0;
  // Rewrites every compute copy from its master value (after loading weights); a copy without
  // master (init.h) is the value itself and stays.
  virtual void refresh_compute_copies(const std::vector<Parameter*>& params) = 0;

 protected:
  // The offsets (E + 1) of rows sorted by expert, from the kept rows per expert `counts` (E)
  // of sort_pairs_counted; invalid_argument if there are not E counts, logic_error if they
  // add up to more than `pairs`.
  static std::vector<int64_t> counted_offsets(const std::vector<int64_t>& counts, int experts, int64_t pairs);
  // invalid_argument unless `chunks` (when given) has C ≥ 1, a local expert count ≥ 1 for each
  // of the `ranks`, and comes without every_row. `op` names the caller.
  static void check_ship_chunks(const ShipChunks* chunks, int ranks, bool every_row, const char* op);
};

MOK_NN_END
