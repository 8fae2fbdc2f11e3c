#pragma once
// zero_gradients: sets the gradients of `params` to zero with one fill per run of gradients
// that lie end to end in one storage block. The experts of a MoE layer keep their gradients
// in one stacked block, handed out as a view per expert: a fill per view would cost a GPU
// launch per expert (1 536 per step with 12 layers of 64 experts, ~5 ms of an H200's step).
// Runs never cross blocks: a CUDA fill may not span two allocations, even adjacent ones. The
// runs go to their allocator in one call (Allocator::zero_ranges: one launch on a GPU, where a
// launch per run left the GPU waiting for the host at the start of every step).

#include <vector>

#include "core/model/parameter.h"

MOK_NN_BEGIN

void zero_gradients(const std::vector<Parameter*>& params);

MOK_NN_END
