#pragma once
// LocalityPolicy: top-k selection that prefers experts on the token's own rank.
//
// For each slot in turn (as the plain top-k: largest remaining probability, ties to the
// lower index), when the best remaining expert lives on another rank and the best remaining
// local expert's probability is within `margin` of it (p_local ≥ p_best − margin), the local
// expert takes the slot. margin = 0 keeps plain top-k except for exact ties; a margin of 1
// always fills slots with local experts while any remain. Gates are then renormalised over
// the chosen k as usual, so the choice changes the math (an approximate MoE): the fraction
// of pairs kept local is reported as comm/local_tokens. Slots are in choice order.

#include <cstdint>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

struct LocalityPolicy {
  std::vector<uint8_t> local;  // (E) 1 where the expert lives on this rank; empty = off
  double margin = 0.0;         // router-probability gap within which a local expert wins

  bool enabled() const { return !local.empty(); }
};

// Top-k of p (E values) into chosen (k expert ids), with the locality preference when
// `policy` is non-null and enabled. Deterministic: no randomness, fixed tie-breaks.
void select_top_k(const real* p, int experts, int k, const LocalityPolicy* policy, int32_t* chosen);

MOK_NN_END
