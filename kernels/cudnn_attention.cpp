#include "kernels/cudnn_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/backend/fused_attention_workspace.h"
#include "kernels/cudnn_graph.h"

namespace mok::cuda {
namespace {

using cudnn::Descriptor;
using cudnn::Graph;
using Dims = std::vector<int64_t>;

// Unique ids of the graphs' real tensors (the variant packs' keys).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kDO, kDQ, kDK, kDV, kSoftmaxSum, kOne };

constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT, kBf16 = CUDNN_DATA_BFLOAT16;

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The layouts, as (b, h, s, d) views of the row-major training tensors: h heads of the
// tensors' H (a backward chunk may take fewer), each a d-wide column block.
struct Layout {
  int64_t b, h, s, d, H;
  int64_t ld_qkv() const { return 3 * H * d; }
  int64_t ld_o() const { return H * d; }
  Dims bhsd() const { return {b, h, s, d}; }
  Dims bhds() const { return {b, h, d, s}; }
  Dims bhss() const { return {b, h, s, s}; }
  Dims bhs1() const { return {b, h, s, 1}; }
  // q, k or v of qkv as (b, h, s, d); transposed to (b, h, d, s) by swapping the last two.
  Dims qkv_strides() const { return {s * ld_qkv(), d, ld_qkv(), 1}; }
  Dims qkv_strides_t() const { return {s * ld_qkv(), d, 1, ld_qkv()}; }
  Dims o_strides() const { return {s * ld_o(), d, ld_o(), 1}; }
  Dims scores_strides() const { return {h * s * s, s * s, s, 1}; }
  Dims scores_strides_t() const { return {h * s * s, s * s, 1, s}; }  // (b, h, key, query) view
  Dims lse_strides() const { return {H * s, s, 1, 1}; }                // the caller's (B, H, S)
  Dims row_strides() const { return {h * s, s, 1, 1}; }                // the graph's own rows
};

// Scores masked causally: y = x where row ≥ column, −inf elsewhere.
const Descriptor& causal_mask(Graph& g, const Layout& l, const Descriptor& x, const Descriptor& neg_inf) {
  const Descriptor& row = g.virtual_tensor(CUDNN_DATA_INT32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, row, nullptr, 2);
  const Descriptor& col = g.virtual_tensor(CUDNN_DATA_INT32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, col, nullptr, 3);
  const Descriptor& keep = g.virtual_tensor(CUDNN_DATA_BOOLEAN, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, -1, CUDNN_DATA_BOOLEAN);
  const Descriptor& y = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, &neg_inf, y, &keep);
  return y;
}

Graph forward_graph(const Layout& l) {
  Graph g;
  const Descriptor& q = g.tensor(kQ, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& kt = g.tensor(kK, kBf16, l.bhds(), l.qkv_strides_t());
  const Descriptor& v = g.tensor(kV, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& o = g.tensor(kO, kBf16, l.bhsd(), l.o_strides());
  const Descriptor& stats = g.tensor(kStats, kF32, l.bhs1(), l.lse_strides());
  const Descriptor& scale = g.scalar(kScale, kF32);
  const Descriptor& neg_inf = g.scalar(kNegInf, kF32);

  const Descriptor& s0 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.matmul(q, kt, s0);
  const Descriptor& s1 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, s0, &scale, s1);
  const Descriptor& s2 = causal_mask(g, l, s1, neg_inf);
  // softmax with its statistics: lse = max + log Σ exp(s − max)
  const Descriptor& mx = g.virtual_tensor(kF32, l.bhs1(), l.row_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, mx);
  const Descriptor& s3 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_SUB, s2, &mx, s3);
  const Descriptor& e = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_EXP, s3, nullptr, e);
  const Descriptor& sum = g.virtual_tensor(kF32, l.bhs1(), l.row_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const Descriptor& log_sum = g.virtual_tensor(kF32, l.bhs1(), l.row_strides());
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, mx, &log_sum, stats);
  const Descriptor& p = g.virtual_tensor(kBf16, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_DIV, e, &sum, p);
  g.matmul(p, v, o);
  return g;
}

Graph backward_graph(const Layout& l) {
  Graph g;
  const Descriptor& q = g.tensor(kQ, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& kt = g.tensor(kK, kBf16, l.bhds(), l.qkv_strides_t());
  const Descriptor& vt = g.tensor(kV, kBf16, l.bhds(), l.qkv_strides_t());
  const Descriptor& o = g.tensor(kO, kBf16, l.bhsd(), l.o_strides());
  const Descriptor& d_o = g.tensor(kDO, kBf16, l.bhsd(), l.o_strides());
  const Descriptor& stats = g.tensor(kStats, kF32, l.bhs1(), l.lse_strides());
  const Descriptor& dq = g.tensor(kDQ, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& dk = g.tensor(kDK, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& dv = g.tensor(kDV, kBf16, l.bhsd(), l.qkv_strides());
  const Descriptor& softmax_sum = g.tensor(kSoftmaxSum, kF32, l.bhs1(), l.row_strides());
  const Descriptor& scale = g.scalar(kScale, kF32);
  const Descriptor& neg_inf = g.scalar(kNegInf, kF32);
  const Descriptor& one = g.scalar(kOne, kF32);

  // D = rowsum(dO ∘ O), into the caller's workspace
  const Descriptor& d_o_o = g.virtual_tensor(kF32, l.bhsd(), {l.h * l.s * l.d, l.s * l.d, l.h * l.d, 1});  // as cuDNN lays it
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, &o, d_o_o);
  const Descriptor& row_sum = g.virtual_tensor(kF32, l.bhs1(), l.row_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, &one, softmax_sum);
  // P = exp(scale·Q·Kᵀ − lse), masked
  const Descriptor& s0 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.matmul(q, kt, s0);
  const Descriptor& s1 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, s0, &scale, s1);
  const Descriptor& s2 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_SUB, s1, &stats, s2);
  const Descriptor& s3 = causal_mask(g, l, s2, neg_inf);
  const Descriptor& p = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_EXP, s3, nullptr, p);
  // dV = Pᵀ·dO
  const Descriptor& p_t = g.virtual_tensor(kBf16, l.bhss(), l.scores_strides_t());
  g.reshape(p, p_t);
  g.matmul(p_t, d_o, dv);
  // dS = P ∘ (dO·Vᵀ − D) · scale
  const Descriptor& dp = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.matmul(d_o, vt, dp);
  const Descriptor& dp1 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum, dp1);
  const Descriptor& dp2 = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, dp1, &p, dp2);
  const Descriptor& ds = g.virtual_tensor(kF32, l.bhss(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, dp2, &scale, ds);
  // dK = dSᵀ·Q
  const Descriptor& ds_t = g.virtual_tensor(kBf16, l.bhss(), l.scores_strides_t());
  g.reshape(ds, ds_t);
  g.matmul(ds_t, q, dk);
  // dQ = dS·K, its own product (no atomics)
  const Descriptor& k = g.virtual_tensor(kBf16, l.bhsd(), l.qkv_strides());
  g.reshape(kt, k);
  g.matmul(ds, k, dq);
  return g;
}

void check_args(int B, int S, int H, int hd, const char* op) {
  if (B < 1 || S < 1 || H < 1 || hd < 8 || hd > 256 || hd % 8)
    throw std::invalid_argument(std::string(op) + ": shape B=" + std::to_string(B) + " S=" + std::to_string(S) +
                                " H=" + std::to_string(H) + " hd=" + std::to_string(hd) + " not supported");
}

cudnnHandle_t as_handle(void* h) { return static_cast<cudnnHandle_t>(h); }

}  // namespace

std::string CudnnAttention::unavailable_reason() {
  const size_t version = cudnnGetVersion();
  if (version < 90000)
    return "cuDNN " + std::to_string(version) + " found; fused attention needs cuDNN 9 or newer";
  return "";
}

CudnnAttention::CudnnAttention(size_t max_backward_workspace)
    : max_backward_workspace_(max_backward_workspace), neg_inf_(-std::numeric_limits<float>::infinity()) {
  const std::string why = unavailable_reason();
  if (!why.empty()) throw std::runtime_error(why);
  cudnnHandle_t h = nullptr;
  cudnn::check(cudnnCreate(&h), "create handle");
  handle_ = h;
}

CudnnAttention::~CudnnAttention() {
  forward_plans_.clear();
  backward_plans_.clear();
  if (handle_) cudnnDestroy(as_handle(handle_));
}

const cudnn::Plan& CudnnAttention::forward_plan(int B, int S, int H, int hd) {
  check_args(B, S, H, hd, "cuDNN attention forward");
  auto& slot = forward_plans_[Shape{B, S, H, H, hd}];
  if (!slot) {
    const Graph g = forward_graph(Layout{B, H, S, hd, H});
    slot = std::make_unique<cudnn::Plan>(as_handle(handle_), g, true, "attention forward");
    forward_engine_ = slot->engine();
  }
  return *slot;
}

const cudnn::Plan& CudnnAttention::backward_plan(int B, int S, int H, int hd) {
  check_args(B, S, H, hd, "cuDNN attention backward");
  const FusedAttentionChunk chunk = backward_chunk(B, S, H);
  auto& slot = backward_plans_[Shape{chunk.sequences, S, chunk.heads, H, hd}];
  if (!slot) {
    const Graph g = backward_graph(Layout{chunk.sequences, chunk.heads, S, hd, H});
    slot = std::make_unique<cudnn::Plan>(as_handle(handle_), g, true, "attention backward");
    backward_engine_ = slot->engine();
  }
  return *slot;
}

size_t CudnnAttention::forward_workspace_bytes(int B, int S, int H, int hd) {
  return static_cast<size_t>(forward_plan(B, S, H, hd).workspace_bytes());
}

FusedAttentionChunk CudnnAttention::backward_chunk(int B, int S, int H) const {
  return fused_attention_backward_chunk(B, S, H, max_backward_workspace_);
}

size_t CudnnAttention::backward_workspace_bytes(int B, int S, int H, int hd) {
  // per chunk: D = rowsum(dO ∘ O) (a float per row), then the plan's own workspace
  const FusedAttentionChunk chunk = backward_chunk(B, S, H);
  return align256(sizeof(float) * size_t(chunk.sequences) * chunk.heads * S) +
         static_cast<size_t>(backward_plan(B, S, H, hd).workspace_bytes());
}

void CudnnAttention::forward(const bf16* qkv, int B, int S, int H, int hd, bf16* o, float* lse, void* ws,
                             size_t ws_bytes, cudaStream_t stream) {
  const cudnn::Plan& plan = forward_plan(B, S, H, hd);
  if (ws_bytes < static_cast<size_t>(plan.workspace_bytes()))
    throw std::invalid_argument("cuDNN attention forward: workspace of " + std::to_string(ws_bytes) +
                                " bytes, needs " + std::to_string(plan.workspace_bytes()));
  if (!lse) throw std::invalid_argument("cuDNN attention forward: lse is required");
  cudnn::check(cudnnSetStream(as_handle(handle_), stream), "set stream");
  float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int64_t d = int64_t(H) * hd;
  bf16* base = const_cast<bf16*>(qkv);
  plan.execute(as_handle(handle_), {kQ, kK, kV, kO, kStats, kScale, kNegInf},
               {base, base + d, base + 2 * d, o, lse, &scale, &neg_inf_}, ws);
}

void CudnnAttention::backward(const bf16* qkv, const bf16* d_o, const float* lse, const bf16* o, int B, int S, int H,
                              int hd, bf16* dqkv, void* ws, size_t ws_bytes, cudaStream_t stream) {
  const size_t need = backward_workspace_bytes(B, S, H, hd);
  if (ws_bytes < need || !ws)
    throw std::invalid_argument("cuDNN attention backward: workspace of " + std::to_string(ws_bytes) +
                                " bytes, needs " + std::to_string(need));
  if (!lse || !o) throw std::invalid_argument("cuDNN attention backward: lse and o are required");
  const FusedAttentionChunk chunk = backward_chunk(B, S, H);
  const cudnn::Plan& plan = backward_plan(B, S, H, hd);
  cudnn::check(cudnnSetStream(as_handle(handle_), stream), "set stream");
  float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int64_t d = int64_t(H) * hd;
  char* row_sums = static_cast<char*>(ws);
  void* plan_ws = row_sums + align256(sizeof(float) * size_t(chunk.sequences) * chunk.heads * S);
  for (int b0 = 0; b0 < B; b0 += chunk.sequences)
    for (int h0 = 0; h0 < H; h0 += chunk.heads) {
      // The chunk's first token row and first head column; its lse rows start at (b0, h0).
      const int64_t rows = int64_t(b0) * S, col = int64_t(h0) * hd;
      bf16* base = const_cast<bf16*>(qkv) + rows * 3 * d + col;
      bf16* grad = dqkv + rows * 3 * d + col;
      plan.execute(as_handle(handle_),
                   {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kSoftmaxSum, kScale, kNegInf, kOne},
                   {base, base + d, base + 2 * d, const_cast<bf16*>(o) + rows * d + col,
                    const_cast<bf16*>(d_o) + rows * d + col, const_cast<float*>(lse) + (int64_t(b0) * H + h0) * S,
                    grad, grad + d, grad + 2 * d, row_sums, &scale, &neg_inf_, &one_},
                   plan_ws);
    }
}

}  // namespace mok::cuda
