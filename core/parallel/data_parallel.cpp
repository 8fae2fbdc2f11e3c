#include "core/parallel/data_parallel.h"

#include <stdexcept>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

int64_t all_reduce_dense_gradients(DataPlane& plane, const std::vector<Parameter*>& params) {
  int64_t n = 0;
  DType dtype = kRealDType;
  bool first = true;
  for (const Parameter* p : params)
    if (!p->expert) {
      n += p->grad.numel();
      if (!first && p->grad.dtype() != dtype)
        throw std::logic_error("all_reduce_dense_gradients: gradients of mixed element types (" + p->name + ")");
      dtype = p->grad.dtype();
      first = false;
    }
  const int64_t bytes = n * static_cast<int64_t>(dtype_size(dtype));
  if (plane.size() == 1 || n == 0) return bytes;
  const ExecContext& cx = ExecContext::current();
  Allocator& mem = cx.allocator();
  Tensor flat = cx.empty({n}, dtype);
  auto* base = static_cast<uint8_t*>(flat.raw());
  int64_t at = 0;
  for (const Parameter* p : params) {
    if (p->expert) continue;
    mem.copy_within(base + at, p->grad.raw(), p->grad.bytes());
    at += p->grad.bytes();
  }
  plane.all_reduce_sum(flat, CommPurpose::gradients);
  at = 0;
  for (Parameter* p : params) {
    if (p->expert) continue;
    mem.copy_within(p->grad.raw(), base + at, p->grad.bytes());
    at += p->grad.bytes();
  }
  return bytes;
}

int64_t all_reduce_dense_gradients(Communicator& comm, const std::vector<Parameter*>& params) {
  HostDataPlane plane(comm);
  return all_reduce_dense_gradients(plane, params);
}

double global_grad_norm_sq(Communicator& comm, const std::vector<Parameter*>& params) {
  double dense = 0.0, expert = 0.0;
  const ExecContext& cx = ExecContext::current();
  if (cx.is_cpu()) {
    // One sequential sum per parameter, so a CPU run's norm (and its clipping) keeps its bits
    // for any thread count.
    for (const Parameter* p : params) {
      double s = 0.0;
      const real* g = p->grad.data();
      for (int64_t i = 0; i < p->grad.numel(); ++i) s += static_cast<double>(g[i]) * g[i];
      (p->expert ? expert : dense) += s;
    }
  } else {
    std::vector<Parameter*> dense_params, expert_params;
    for (Parameter* p : params) (p->expert ? expert_params : dense_params).push_back(p);
    dense = cx.ops().grad_norm_sq(dense_params);
    expert = expert_params.empty() ? 0.0 : cx.ops().grad_norm_sq(expert_params);
  }
  comm.all_reduce_sum(&expert, 1, CommPurpose::control);
  return dense + expert;
}

void broadcast_dense_parameters(DataPlane& plane, const std::vector<Parameter*>& params, int root) {
  std::vector<Parameter*> dense;
  for (Parameter* p : params)
    if (!p->expert) {
      plane.broadcast(p->value, root, CommPurpose::weights);
      dense.push_back(p);
    }
  ExecContext::current().ops().refresh_compute_copies(dense);  // bf16 copies follow the values
}

MOK_NN_END
