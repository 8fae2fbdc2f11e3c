#pragma once
// The double-precision CPU references of the elementwise kernel checks: the core's own
// functions built with real = double (mok_nn_f64), behind plain vectors so the check driver
// (a .cu file, C++17) need not include the C++20 core. AdamW and the gradient norm live in
// mok_core, which the GPU check program does not link: their references here repeat the
// arithmetic of core/train/adamw.cpp and core/train/grad_clip.cpp line for line.

#include <cstdint>
#include <vector>

namespace mok::cuda::reference {

using Values = std::vector<double>;

// core/backend/rms_norm_kernel.h
void rms_norm_forward(const Values& x, const Values& g, double eps, int64_t n, int64_t d, Values& y, Values& rstd);
void rms_norm_apply(const Values& x, const Values& g, const Values& rstd, int64_t n, int64_t d, Values& y);
// dx written, dg accumulated.
void rms_norm_backward(const Values& dy, const Values& x, const Values& g, const Values& rstd, int64_t n, int64_t d,
                       Values& dx, Values& dg);

// core/backend/rope.h: the RopeTable's rows (max_positions, hd/2), and the turn in place.
void rope_table(int max_positions, int hd, double theta, Values& cos, Values& sin);
void rope_apply(Values& x, int64_t rows, int64_t ld, int heads, int seq, int pos0, int max_positions, int hd,
                double theta, bool inverse);

// core/backend/swiglu_kernel.h
void swiglu_forward(const Values& a, int64_t n, int64_t f, Values& h);
void swiglu_backward(const Values& a, const Values& dh, int64_t n, int64_t f, Values& da);

// core/backend/cross_entropy_kernel.h, one row at a time so each row's loss is seen:
// row_loss (n); when write_grad, logits become softmax − onehot (zero rows when unscored).
void cross_entropy_rows(Values& logits, const std::vector<int32_t>& targets, int64_t n, int64_t vocab,
                        bool write_grad, Values& row_loss);

// core/model/embedding.h: x = W[tokens]; W.grad (dw) += Σ dx rows by token, in token order.
void embedding_forward(const Values& w, const std::vector<int32_t>& tokens, int64_t vocab, int64_t d, Values& x);
void embedding_backward(const Values& dx, const std::vector<int32_t>& tokens, int64_t vocab, int64_t d, Values& dw);

// core/train/adamw.cpp, one step over one tensor in fp32 storage (decay = 1 − lr·wd or 1).
void adamw_step(float* w, const float* g, float* m, float* v, int64_t numel, double lr, double beta1, double beta2,
                double eps, double decay, int64_t t);

}  // namespace mok::cuda::reference
