#pragma once
// ExpertPlacement: which rank owns each routed expert (the same for every MoE layer).
//
//   contiguous   experts in R blocks of E/R: rank r owns [r·E/R, (r+1)·E/R)  (default)
//   round_robin  expert e on rank e mod R
//   "0,0,1,1"    an explicit owner per expert (comma list of E ranks)
//
// E need not divide by R for the explicit list; the named layouts require E >= R, so that
// no rank is left without experts (contiguous then gives blocks of ⌊E/R⌋ or ⌈E/R⌉).

#include <string>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

class ExpertPlacement {
 public:
  ExpertPlacement() = default;
  // Throws std::invalid_argument with a message naming the problem.
  static ExpertPlacement contiguous(int experts, int ranks);
  static ExpertPlacement round_robin(int experts, int ranks);
  static ExpertPlacement explicit_owners(std::vector<int> owner, int ranks);
  // "contiguous", "round_robin" or a comma list of E ranks.
  static ExpertPlacement parse(const std::string& spec, int experts, int ranks);

  int experts() const { return static_cast<int>(owner_.size()); }
  int ranks() const { return ranks_; }
  int owner(int expert) const { return owner_.at(static_cast<size_t>(expert)); }
  // Experts owned by `rank`, ascending.
  const std::vector<int>& experts_on(int rank) const { return by_rank_.at(static_cast<size_t>(rank)); }
  // Position of `expert` among experts_on(owner(expert)).
  int local_index(int expert) const { return local_index_.at(static_cast<size_t>(expert)); }
  std::string describe() const;  // e.g. "contiguous: 0,0,1,1"

 private:
  std::vector<int> owner_, local_index_;
  std::vector<std::vector<int>> by_rank_;
  int ranks_ = 1;
  std::string name_;
  void index();
};

MOK_NN_END
