#include "core/routing/routing_decision.h"

#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"

MOK_NN_BEGIN

RoutingDecision routing_decision_from(const std::vector<int32_t>& expert, const std::vector<real>& gate, int k,
                                      int experts) {
  if (k < 1 || expert.size() != gate.size() || expert.size() % k != 0)
    throw std::invalid_argument("routing_decision_from: " + std::to_string(expert.size()) + " experts and " +
                                std::to_string(gate.size()) + " gates for top-" + std::to_string(k));
  for (int32_t e : expert)
    if (e >= experts) throw std::invalid_argument("routing_decision_from: expert " + std::to_string(e) + " of " +
                                                  std::to_string(experts));
  const ExecContext& cx = ExecContext::current();
  const int64_t pairs = static_cast<int64_t>(expert.size());
  RoutingDecision r;
  r.tokens = pairs / k;
  r.k = k;
  r.experts = experts;
  r.expert = cx.upload(expert.data(), {pairs}, DType::i32);
  r.gate = cx.upload(gate.data(), {pairs}, kRealDType);
  r.pairs = cx.ops().sort_pairs(r.expert, experts, 0);
  return r;
}

std::vector<int32_t> expert_ids(const RoutingDecision& r) {
  std::vector<int32_t> ids(static_cast<size_t>(r.expert.numel()));
  r.expert.copy_to_host(ids.data(), r.expert.bytes());
  return ids;
}

MOK_NN_END
