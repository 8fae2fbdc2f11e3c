#pragma once
// Gradient sync and clipping after a step's backward, before the optimizer update.
//
//   R = 1: clip by the global norm of this rank's gradients (clip_grad_norm).
//   R > 1: sum the dense gradients over ranks (one all-reduce in fixed rank order, so every
//          rank holds the same bits), take the norm over all parameters of all ranks
//          (dense ones counted once, each rank's experts added), and clip with it — the
//          same clipping as R = 1. Collective.

#include <vector>

#include "core/model/parameter.h"
#include "core/train/rank_context.h"

namespace mok {

// Returns the global gradient norm before clipping (`max_norm` <= 0: no clipping).
double sync_and_clip_gradients(RankContext& rc, const std::vector<Parameter*>& params, double max_norm);

}  // namespace mok
