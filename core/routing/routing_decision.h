#pragma once
// RoutingDecision: which experts each token goes to and with what weight. Produced by a
// router, consumed by an ExpertDispatcher (core/model/expert_dispatcher.h).
//
// Pairs are indexed p = t·k + s (token t, slot s). Slots are in descending router
// probability (ties: lower expert index first). A pair dropped by the capacity factor has
// expert −1 and contributes nothing; its gate is still the renormalised value. `expert`,
// `gate` and `pairs` live on the router's device; host dispatchers (core/parallel) read them
// with data_as<int32_t>() / data() on the CPU.

#include <cstdint>
#include <vector>

#include "core/backend/ops.h"

MOK_NN_BEGIN

struct RoutingDecision {
  int64_t tokens = 0;
  int k = 0;
  int experts = 0;
  Tensor expert;                // (tokens·k) i32 expert id, −1 when dropped
  Tensor gate;                  // (tokens·k) `real` gate, renormalised over the token's k choices
  PairOrder pairs;              // the kept pairs sorted by expert, the load (core/backend/ops.h)
  int64_t dropped = 0;          // pairs dropped by the capacity factor
  int64_t capacity = 0;         // pairs an expert may take; 0 = unlimited (dropless)
};

// A decision from given choices (replays, tests): expert (tokens·k; −1 = dropped) and gate,
// placed on the current ExecContext's device, with the load and the pair order computed as
// the router computes them (no capacity).
RoutingDecision routing_decision_from(const std::vector<int32_t>& expert, const std::vector<real>& gate, int k,
                                      int experts);

// The expert ids of a decision on the host (a copy).
std::vector<int32_t> expert_ids(const RoutingDecision& r);

MOK_NN_END
