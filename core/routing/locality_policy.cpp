#include "core/routing/locality_policy.h"

MOK_NN_BEGIN

void select_top_k(const real* p, int E, int k, const LocalityPolicy* policy, int32_t* ch) {
  const bool loc = policy && policy->enabled();
  for (int slot = 0; slot < k; ++slot) {
    int best = -1, best_local = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int q = 0; q < slot; ++q) taken |= ch[q] == e;
      if (taken) continue;
      if (best < 0 || p[e] > p[best]) best = e;
      if (loc && policy->local[e] && (best_local < 0 || p[e] > p[best_local])) best_local = e;
    }
    if (loc && !policy->local[best] && best_local >= 0 &&
        static_cast<double>(p[best_local]) >= static_cast<double>(p[best]) - policy->margin)
      best = best_local;
    ch[slot] = best;
  }
}

MOK_NN_END
