// MokDispatcher's forward in the fixed layout (MokOptions::fixed_layout_max_rows;
// core/parallel/fixed_row_exchange.h): one row per (token, rank) to every rank, its k entries
// the token's experts there in slot order, nothing counted. The same rows per expert in the
// same order as the counted plans and the same sums, so the same results bit for bit when
// they would shadow nothing.
#include "core/parallel/fixed_row_exchange.h"
#include "core/parallel/mok_dispatcher.h"

MOK_NN_BEGIN

Tensor MokDispatcher::forward_fixed(const Tensor& x, const RoutingDecision& r, ExpertBank& bank) {
  Tensor y = fixed_layout_forward(plane_, placement_, fixed_tables_, x, r, bank, /*per_token=*/true);
  const int R = comm_.size();
  const int64_t n = x.dim(0);
  const int k = r.k;
  my_shadowed_.clear();
  log_.fixed_layout = true;
  log_.pairs = n * k - r.dropped;
  log_.shipped_rows = (R - 1) * n;
  log_.chunks = 1;
  row_bytes_ = mok::row_bytes(x);
  kept_ = false;
  finish_log(fwd_before_, true);
  return y;
}

MOK_NN_END
