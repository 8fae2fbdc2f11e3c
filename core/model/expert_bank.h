#pragma once
// ExpertBank: the routed experts of one MoE layer, indexed by global expert id. On a rank
// that does not hold expert e, experts[e] is null.
//
// A bank built by make_stacked_expert_bank keeps this rank's experts stacked in one
// GroupedSwiGlu (group g = the g-th local expert in id order) for grouped matrix products,
// and experts[e] is a SwiGluMlp over views of e's block: the per-expert Parameters to train
// and checkpoint, and what per-expert dispatchers (core/parallel) run. A bank of separate
// experts (grouped null) serves the per-expert dispatchers only.

#include <memory>
#include <string>
#include <vector>

#include "core/model/grouped_swiglu.h"
#include "core/model/swiglu_mlp.h"

MOK_NN_BEGIN

struct ExpertBank {
  std::vector<std::unique_ptr<SwiGluMlp>> experts;
  std::unique_ptr<GroupedSwiGlu> grouped;
  int size() const { return static_cast<int>(experts.size()); }
};

// Row offsets (G + 1) of `bank`'s stacked groups for one grouped product: experts[i] gets
// rows[i] rows, every other expert held here none. Throws std::logic_error for rows of an
// expert not held here, or a stack that does not match the experts held.
std::vector<int64_t> stacked_row_offsets(const ExpertBank& bank, const std::vector<int>& experts,
                                         const std::vector<int64_t>& rows);

// experts: one spec per global expert; local: which of them this rank holds (empty = all).
ExpertBank make_stacked_expert_bank(const std::vector<GroupedSwiGlu::ExpertSpec>& experts,
                                    const std::vector<bool>& local, int64_t d, int64_t f, double init_std,
                                    double out_std, int layer, const std::string& kind);

MOK_NN_END
