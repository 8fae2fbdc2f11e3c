#include "core/train/gradient_sync.h"

#include <cmath>

#include "core/parallel/data_parallel.h"
#include "core/train/grad_clip.h"

namespace mok {

double sync_gradients(RankContext& rc, const std::vector<Parameter*>& params) {
  if (!rc.parallel()) return global_grad_norm(params);
  all_reduce_dense_gradients(*rc.data, params);
  return std::sqrt(global_grad_norm_sq(*rc.comm, params));
}

}  // namespace mok
