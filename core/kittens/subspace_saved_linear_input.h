#pragma once
// Subspace saved input: a persistent per-(layer, kind) basis V (d_in, r) with orthonormal
// columns, refreshed every `refresh_every` steps from the current X by a small randomized
// range finder on X's row space. Keeps only P = X·V (n, r) (optionally 8-/4-bit); X ≈ P·Vᵀ
// and dW = V·(Pᵀ·dY). Between refreshes the basis costs nothing to compute; it is counted
// under kind "<kind>.basis" while it lives.

#include <cstdint>
#include <memory>
#include <mutex>

#include "core/kittens/compact_options.h"
#include "core/kittens/saved_linear_input.h"

MOK_NN_BEGIN

// The basis of one (layer, kind), shared by the saved inputs built for it step after step.
struct SubspaceBasis {
  std::mutex mutex;
  std::shared_ptr<const Tensor> v;  // (d_in, r); a saved input keeps the one it used
  int rank = 0;
  int64_t refreshed_step = -1;
  int64_t refreshes = 0;
};

// refresh_every ≤ 0: refresh at every step.
std::unique_ptr<SavedLinearInput> make_subspace_saved_linear_input(std::shared_ptr<SubspaceBasis> basis,
                                                                   const CompactOptions& options,
                                                                   int refresh_every);

MOK_NN_END
