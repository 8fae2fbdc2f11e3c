#pragma once
// Gradient sync and the global norm after a step's backward, before the optimizer update
// (which clips with it: clip_factor in core/train/grad_clip.h, AdamW::step).
//
//   R = 1: the global norm of this rank's gradients (global_grad_norm).
//   R > 1: sum the dense gradients over ranks (one all-reduce in fixed rank order, so every
//          rank holds the same bits), and take the norm over all parameters of all ranks
//          (dense ones counted once, each rank's experts added) — the same norm as R = 1, so
//          the same clipping. Collective.

#include <vector>

#include "core/model/parameter.h"
#include "core/train/rank_context.h"

namespace mok {

// Returns the global gradient norm.
double sync_gradients(RankContext& rc, const std::vector<Parameter*>& params);

}  // namespace mok
