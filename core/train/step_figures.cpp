#include "core/train/step_figures.h"

namespace mok {

void StepFigures::take_comm(const CommStats& now, const CommStats& before) {
  const CommStats d = now.since(before);
  remote_bytes = static_cast<double>(d.remote_sent_total());
  dispatch_bytes = static_cast<double>(d.remote_sent(CommPurpose::dispatch));
  combine_bytes = static_cast<double>(d.remote_sent(CommPurpose::combine));
  grad_bytes = static_cast<double>(d.remote_sent(CommPurpose::gradients));
  weight_bytes = static_cast<double>(d.remote_sent(CommPurpose::weights));
  control_bytes = static_cast<double>(d.remote_sent(CommPurpose::control));
  comm_s = d.wall_seconds;
  modeled_s = d.modeled_seconds;
  overlapped_s = d.overlapped_seconds;
}

void reduce_step_figures(RankContext& rc, StepFigures& f) {
  if (!rc.comm) return;
  std::vector<double> v{f.loss_sum,     f.tokens,        f.aux,           f.z,              f.locality,
                        f.dropped,      f.local_pairs,   f.remote_bytes,  f.dispatch_bytes, f.combine_bytes,
                        f.grad_bytes,   f.weight_bytes,  f.control_bytes, f.comm_s,         f.modeled_s,
                        f.step_s,       f.overlapped_s};
  const size_t head = v.size();
  for (const auto& layer : f.load) v.insert(v.end(), layer.begin(), layer.end());
  rc.comm->all_reduce_sum(v.data(), static_cast<int64_t>(v.size()), CommPurpose::control);
  double* p = v.data();
  for (double* field : {&f.loss_sum, &f.tokens, &f.aux, &f.z, &f.locality, &f.dropped, &f.local_pairs,
                        &f.remote_bytes, &f.dispatch_bytes, &f.combine_bytes, &f.grad_bytes, &f.weight_bytes,
                        &f.control_bytes, &f.comm_s, &f.modeled_s, &f.step_s, &f.overlapped_s})
    *field = *p++;
  size_t i = head;
  for (auto& layer : f.load)
    for (double& x : layer) x = v[i++];
}

}  // namespace mok
