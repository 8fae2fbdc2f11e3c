#include "core/model/expert_bank.h"

#include <stdexcept>

MOK_NN_BEGIN

ExpertBank make_stacked_expert_bank(const std::vector<GroupedSwiGlu::ExpertSpec>& experts,
                                    const std::vector<bool>& local, int64_t d, int64_t f, double init_std,
                                    double out_std, int layer, const std::string& kind) {
  const int E = static_cast<int>(experts.size());
  if (!local.empty() && static_cast<int>(local.size()) != E)
    throw std::invalid_argument("ExpertBank: local mask names " + std::to_string(local.size()) + " experts, the bank has " +
                                std::to_string(E));
  std::vector<GroupedSwiGlu::ExpertSpec> mine;
  std::vector<int> ids;
  for (int e = 0; e < E; ++e)
    if (local.empty() || local[e]) {
      mine.push_back(experts[e]);
      ids.push_back(e);
    }
  ExpertBank bank;
  bank.grouped = std::make_unique<GroupedSwiGlu>(mine, d, f, init_std, out_std, layer, kind);
  bank.experts.resize(E);
  for (size_t g = 0; g < ids.size(); ++g) bank.experts[ids[g]] = bank.grouped->expert_view(static_cast<int>(g));
  return bank;
}

MOK_NN_END
