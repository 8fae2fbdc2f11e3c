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

std::vector<int64_t> stacked_row_offsets(const ExpertBank& bank, const std::vector<int>& experts,
                                         const std::vector<int64_t>& rows) {
  std::vector<int64_t> rows_of(static_cast<size_t>(bank.size()), 0);
  for (size_t i = 0; i < experts.size(); ++i) {
    const int e = experts[i];
    if (rows[i] > 0 && !bank.experts.at(static_cast<size_t>(e)))
      throw std::logic_error("ExpertBank: rows for expert " + std::to_string(e) + ", which is not held here");
    rows_of[static_cast<size_t>(e)] = rows[i];
  }
  std::vector<int64_t> offsets(1, 0);
  for (int e = 0; e < bank.size(); ++e)
    if (bank.experts[e]) offsets.push_back(offsets.back() + rows_of[static_cast<size_t>(e)]);
  if (!bank.grouped || static_cast<int>(offsets.size()) != bank.grouped->groups() + 1)
    throw std::logic_error("ExpertBank: the stack and the experts held here disagree");
  return offsets;
}

MOK_NN_END
