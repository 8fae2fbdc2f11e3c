#include "core/dist/data_parallel.h"

#include <cstring>

MOK_NN_BEGIN

int64_t all_reduce_dense_gradients(Communicator& comm, const std::vector<Parameter*>& params) {
  int64_t n = 0;
  for (const Parameter* p : params)
    if (!p->expert) n += p->grad.numel();
  if (comm.size() == 1 || n == 0) return n * static_cast<int64_t>(sizeof(real));
  std::vector<real> flat(static_cast<size_t>(n));
  int64_t off = 0;
  for (const Parameter* p : params) {
    if (p->expert) continue;
    std::memcpy(flat.data() + off, p->grad.data(), p->grad.bytes());
    off += p->grad.numel();
  }
  comm.all_reduce_sum(flat.data(), n, CommPurpose::gradients);
  off = 0;
  for (Parameter* p : params) {
    if (p->expert) continue;
    std::memcpy(p->grad.data(), flat.data() + off, p->grad.bytes());
    off += p->grad.numel();
  }
  return n * static_cast<int64_t>(sizeof(real));
}

double global_grad_norm_sq(Communicator& comm, const std::vector<Parameter*>& params) {
  double dense = 0.0, expert = 0.0;
  for (const Parameter* p : params) {
    double s = 0.0;
    const real* g = p->grad.data();
    for (int64_t i = 0; i < p->grad.numel(); ++i) s += static_cast<double>(g[i]) * g[i];
    (p->expert ? expert : dense) += s;
  }
  comm.all_reduce_sum(&expert, 1, CommPurpose::control);
  return dense + expert;
}

void broadcast_dense_parameters(Communicator& comm, const std::vector<Parameter*>& params,
                                int root) {
  for (Parameter* p : params)
    if (!p->expert) comm.broadcast(p->value.data(), p->value.bytes(), root, CommPurpose::weights);
}

MOK_NN_END
