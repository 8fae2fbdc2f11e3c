#include "core/model/expert_dispatcher.h"

#include <cstring>
#include <stdexcept>

#include "core/backend/exec_context.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

void combine_pairs(const Tensor& per_pair, const int32_t* expert, const real* scale,
                   int64_t n, int k, int64_t d, Tensor& dst) {
  parallel_for(n, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      real* y = dst.data() + t * d;
      for (int64_t j = 0; j < d; ++j) y[j] = 0;
      for (int s = 0; s < k; ++s) {
        const int64_t p = t * k + s;
        if (expert[p] < 0) continue;
        const real g = scale ? scale[p] : real(1);
        const real* src = per_pair.data() + p * d;
        for (int64_t j = 0; j < d; ++j) y[j] += g * src[j];
      }
    }
  });
}

Tensor ExpertDispatcher::forward_add(const Tensor& x, const RoutingDecision& routing, ExpertBank& bank, bool keep,
                                     const Tensor& residual) {
  Tensor y = forward(x, routing, bank, keep);
  ExecContext::current().ops().add_(y, residual);
  return y;
}

Tensor ExpertDispatcher::backward_from_input(const Tensor&, ExpertBank&, Tensor&, const Tensor&) {
  throw std::logic_error("the " + name() + " dispatcher cannot rebuild its experts' inputs in backward");
}

Tensor LocalDispatcher::forward(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep) {
  return forward_impl(x, r, bank, keep, nullptr);
}

Tensor LocalDispatcher::forward_add(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep,
                                    const Tensor& residual) {
  return forward_impl(x, r, bank, keep, &residual);
}

Tensor LocalDispatcher::forward_impl(const Tensor& x, const RoutingDecision& r, ExpertBank& bank, bool keep,
                                     const Tensor* residual) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = x.dim(0), d = x.dim(1);
  if (!bank.grouped || bank.grouped->groups() != r.experts)
    throw std::logic_error("LocalDispatcher: needs all " + std::to_string(r.experts) + " experts stacked on this rank");
  const PairOrder& pairs = r.pairs;
  Tensor xs = cx.activation({pairs.rows(), d});  // each expert's tokens, in token order
  ops.gather_rows(x, pairs.order, r.k, xs);
  Tensor ys = bank.grouped->forward(std::move(xs), pairs.segments, keep);  // kept there without a copy
  Tensor y = cx.activation({n, d});
  if (residual) {
    if (residual->numel() != y.numel() || residual->dtype() != y.dtype())
      throw std::invalid_argument("LocalDispatcher: residual " + residual->shape_string() + " for an output of " +
                                  y.shape_string());
    ops.combine_pairs_add(ys, pairs.row_of_pair, &r.gate, n, r.k, *residual, y);
  } else {
    ops.combine_pairs(ys, pairs.row_of_pair, &r.gate, n, r.k, y);
  }
  if (keep) {  // the routing's tensors, not written after this (no copies)
    order_ = pairs.order.share_or_clone(MemTag{});
    row_of_pair_ = pairs.row_of_pair.share_or_clone(MemTag{});
    gate_ = r.gate.share_or_clone(MemTag{});
    n_ = n;
    k_ = r.k;
  }
  return y;
}

Tensor LocalDispatcher::backward(const Tensor& dy, ExpertBank& bank, Tensor& dgate) {
  return backward_impl(dy, bank, dgate, nullptr);
}

Tensor LocalDispatcher::backward_from_input(const Tensor& dy, ExpertBank& bank, Tensor& dgate, const Tensor& x) {
  return backward_impl(dy, bank, dgate, &x);
}

Tensor LocalDispatcher::backward_impl(const Tensor& dy, ExpertBank& bank, Tensor& dgate, const Tensor* x) {
  const ExecContext& cx = ExecContext::current();
  Ops& ops = cx.ops();
  const int64_t n = n_, d = dy.dim(1), m = order_.numel();
  const int k = k_;
  Tensor gate_rows = cx.empty({m}, kRealDType), dgate_rows = cx.empty({m}, kRealDType);
  ops.pairs_to_rows(gate_, order_, gate_rows);
  Tensor dys = cx.activation({m, d}), dys_gated = cx.activation({m, d});  // each expert's rows, and gated
  ops.gather_rows_scaled(dy, order_, k, gate_rows, dys, dys_gated);
  if (x && (x->dim(0) != n || x->dim(1) != d))
    throw std::invalid_argument("LocalDispatcher: the layer's input " + x->shape_string() + " for " +
                                std::to_string(n) + " tokens of width " + std::to_string(d));
  // the experts' inputs gathered again as forward gathered them, when the experts need them
  const GroupedSwiGlu::InputRebuild gather_again = [&] {
    Tensor xs = cx.activation({m, d});
    ops.gather_rows(*x, order_, k, xs);
    return xs;
  };
  Tensor dxs = bank.grouped->backward_gated(dys, std::move(dys_gated), gate_rows, dgate_rows,
                                            x ? &gather_again : nullptr);
  dys.reset();
  dgate = cx.empty({n * k}, kRealDType);
  ops.rows_to_pairs(dgate_rows, order_, dgate);  // 0 for dropped pairs
  Tensor dx = cx.activation({n, d});
  ops.combine_pairs(dxs, row_of_pair_, nullptr, n, k, dx);  // gates already applied
  order_.reset();
  row_of_pair_.reset();
  gate_.reset();
  return dx;
}

MOK_NN_END
