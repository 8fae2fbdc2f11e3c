#include "core/train/gradient_sync.h"

#include <cmath>

#include "core/parallel/data_parallel.h"
#include "core/train/grad_clip.h"

namespace mok {

double sync_and_clip_gradients(RankContext& rc, const std::vector<Parameter*>& params, double max_norm) {
  if (!rc.parallel()) return clip_grad_norm(params, max_norm);
  all_reduce_dense_gradients(*rc.data, params);
  return clip_grad_norm_to(params, std::sqrt(global_grad_norm_sq(*rc.comm, params)), max_norm);
}

}  // namespace mok
