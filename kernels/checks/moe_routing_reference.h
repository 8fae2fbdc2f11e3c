#pragma once
// The CPU reference of the MoE routing kernels, from the double-precision core (mok_nn_f64):
// a TopKRouter whose projection is the identity, so its input is the logits, gives the
// softmax, top-k, capacity, losses and backward; the dispatcher's combine_pairs gives the
// combine. Plain vectors in and out: this header is included by CUDA (C++17) checks, the
// core headers only by moe_routing_reference.cpp (C++20).

#include <cstdint>
#include <vector>

namespace mok::cuda {

struct RouterCase {
  int64_t n = 0;
  int experts = 0, k = 0;
  double capacity_factor = 0.0;  // 0 = dropless
  double aux_coef = 0.0, z_coef = 0.0, locality_coef = 0.0;
  std::vector<uint8_t> remote;   // (E) 1 = expert on another rank; empty = no locality loss
  double locality_margin = -1.0; // ≥ 0 (with remote): the router prefers local experts within it
  double loss_scale = 1.0;
};

struct RouterReference {
  std::vector<double> probs, lse;  // (n, E), (n)
  std::vector<int32_t> choice;     // (n·k) chosen experts, before capacity
  std::vector<double> gate;        // (n·k)
  std::vector<int32_t> expert;     // (n·k) after capacity, −1 when dropped
  std::vector<int64_t> load;       // (E) before capacity
  int64_t capacity = 0;            // 0 = unlimited
  std::vector<double> f;           // (E) routed fraction load/(n·k)
  double aux = 0, z = 0, locality = 0;  // the weighted losses
  std::vector<double> dlogits;     // (n, E) for the given dgate
};

// logits (n, E); dgate (n·k).
RouterReference reference_router(const RouterCase& c, const std::vector<float>& logits,
                                 const std::vector<float>& dgate);

// out (n, d) = Σ_s scale[t·k+s]·per_pair[t·k+s] over kept slots (expert ≥ 0), in slot
// order: core/model/expert_dispatcher.h's combine_pairs. per_pair (n·k, d); scale empty = 1.
std::vector<double> reference_combine(const std::vector<double>& per_pair, const std::vector<int32_t>& expert,
                                      const std::vector<double>& scale, int64_t n, int k, int64_t d);

}  // namespace mok::cuda
