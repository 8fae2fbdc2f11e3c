#pragma once
// RoutingDecision: which experts each token goes to and with what weight. Produced by a
// router, consumed by an ExpertDispatcher (core/model/expert_dispatcher.h).
//
// Pairs are indexed p = t·k + s (token t, slot s). Slots are in descending router
// probability (ties: lower expert index first). A pair dropped by the capacity factor has
// expert −1 and contributes nothing; its gate is still the renormalised value.

#include <cstdint>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

struct RoutingDecision {
  int64_t tokens = 0;
  int k = 0;
  int experts = 0;
  std::vector<int32_t> expert;  // (tokens·k) expert id, −1 when dropped
  std::vector<real> gate;       // (tokens·k) gate, renormalised over the token's k choices
  std::vector<int64_t> load;    // (experts) pairs routed to each expert, before capacity
  int64_t dropped = 0;          // pairs dropped by the capacity factor
  int64_t capacity = 0;         // pairs an expert may take; 0 = unlimited (dropless)
};

MOK_NN_END
