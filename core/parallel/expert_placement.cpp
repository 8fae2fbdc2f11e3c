#include "core/parallel/expert_placement.h"

#include <sstream>
#include <stdexcept>

MOK_NN_BEGIN

static void check_sizes(int experts, int ranks) {
  if (ranks < 1) throw std::invalid_argument("expert placement: ranks must be >= 1");
  if (experts < ranks)
    throw std::invalid_argument("expert placement: " + std::to_string(experts) +
                                " experts cannot be spread over " + std::to_string(ranks) +
                                " ranks (need experts >= ranks)");
}

void ExpertPlacement::index() {
  by_rank_.assign(static_cast<size_t>(ranks_), {});
  local_index_.assign(owner_.size(), 0);
  for (int e = 0; e < experts(); ++e) {
    local_index_[e] = static_cast<int>(by_rank_[owner_[e]].size());
    by_rank_[owner_[e]].push_back(e);
  }
}

ExpertPlacement ExpertPlacement::contiguous(int experts, int ranks) {
  check_sizes(experts, ranks);
  ExpertPlacement p;
  p.ranks_ = ranks;
  p.name_ = "contiguous";
  p.owner_.resize(static_cast<size_t>(experts));
  // rank r owns [⌊r·E/R⌋, ⌊(r+1)·E/R⌋)
  for (int r = 0; r < ranks; ++r)
    for (int e = static_cast<int>(int64_t{r} * experts / ranks);
         e < static_cast<int>(int64_t{r + 1} * experts / ranks); ++e)
      p.owner_[e] = r;
  p.index();
  return p;
}

ExpertPlacement ExpertPlacement::round_robin(int experts, int ranks) {
  check_sizes(experts, ranks);
  ExpertPlacement p;
  p.ranks_ = ranks;
  p.name_ = "round_robin";
  p.owner_.resize(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) p.owner_[e] = e % ranks;
  p.index();
  return p;
}

ExpertPlacement ExpertPlacement::explicit_owners(std::vector<int> owner, int ranks) {
  if (ranks < 1) throw std::invalid_argument("expert placement: ranks must be >= 1");
  for (size_t e = 0; e < owner.size(); ++e)
    if (owner[e] < 0 || owner[e] >= ranks)
      throw std::invalid_argument("expert placement: expert " + std::to_string(e) +
                                  " placed on rank " + std::to_string(owner[e]) +
                                  ", but there are " + std::to_string(ranks) + " ranks");
  ExpertPlacement p;
  p.ranks_ = ranks;
  p.name_ = "explicit";
  p.owner_ = std::move(owner);
  p.index();
  return p;
}

ExpertPlacement ExpertPlacement::parse(const std::string& spec, int experts, int ranks) {
  if (spec.empty() || spec == "contiguous") return contiguous(experts, ranks);
  if (spec == "round_robin") return round_robin(experts, ranks);
  std::vector<int> owner;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (used == 0 || used != item.size())
      throw std::invalid_argument("expert placement '" + spec +
                                  "': expected contiguous, round_robin or a comma list of "
                                  "ranks, got '" + item + "'");
    owner.push_back(v);
  }
  if (static_cast<int>(owner.size()) != experts)
    throw std::invalid_argument("expert placement '" + spec + "' lists " +
                                std::to_string(owner.size()) + " owners for " +
                                std::to_string(experts) + " experts");
  return explicit_owners(std::move(owner), ranks);
}

std::string ExpertPlacement::describe() const {
  std::string s = name_ + ":";
  for (int e = 0; e < experts(); ++e) {
    s += e ? "," : " ";
    s += std::to_string(owner_[e]);
  }
  return s;
}

MOK_NN_END
