#pragma once
// Data parallelism for the dense parameters, beside expert parallelism for the routed ones.
//
// Every rank holds a full copy of the dense parameters (Parameter::expert == false) and
// computes their gradients on its own shard of the global batch; the gradients are then
// summed over ranks with Communicator::all_reduce_sum (fixed rank order, bitwise identical
// on every rank, so the copies never drift apart). Routed-expert gradients stay on the
// expert's owner. With the backward of each rank scaled by 1/R (its share of the global
// mean), the sum is the gradient of the global-batch loss, the same for any R.

#include <cstdint>
#include <vector>

#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/model/parameter.h"
#include "core/real.h"

MOK_NN_BEGIN

// Sums the gradients of all dense parameters over ranks: one flat buffer on the ranks'
// device (parameters in the given order), one DataPlane::all_reduce_sum counted as
// CommPurpose::gradients. Returns the bytes of the buffer (per rank, before the reduction).
int64_t all_reduce_dense_gradients(DataPlane& plane, const std::vector<Parameter*>& params);
// CPU ranks: the same over host messages.
int64_t all_reduce_dense_gradients(Communicator& comm, const std::vector<Parameter*>& params);

// Global squared gradient norm: Σ over dense gradients (already reduced, so every rank
// holds the same values; counted once) + Σ over ranks of the expert gradients each rank
// holds (an all-reduce of one double). The same value on every rank.
double global_grad_norm_sq(Communicator& comm, const std::vector<Parameter*>& params);

// Copies every dense parameter of `root` to the other ranks (CommPurpose::weights), for
// runs whose ranks might not start from identical values.
void broadcast_dense_parameters(DataPlane& plane, const std::vector<Parameter*>& params, int root = 0);

MOK_NN_END
