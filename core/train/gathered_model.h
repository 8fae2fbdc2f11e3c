#pragma once
// GatheredModel: the leader's full copy of an expert-parallel model, for a checkpoint: every
// parameter (the experts of all ranks) and its AdamW moments, in the order of a single-rank
// model, so the checkpoint is the one R = 1 would write and resumes at any R.

#include <memory>
#include <vector>

#include "core/model/parameter.h"
#include "core/train/rank_context.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

class AdamW;

struct GatheredModel {
  std::unique_ptr<LanguageModel> model;  // null on other ranks
  std::vector<Parameter*> params;
  std::unique_ptr<AdamW> adam;
  GatheredModel();
  GatheredModel(GatheredModel&&) noexcept;
  GatheredModel& operator=(GatheredModel&&) noexcept;
  ~GatheredModel();
};

// Collective: every rank sends the values and moments of its experts to rank 0
// (CommPurpose::weights); rank 0 builds a full replica from local_model.options() (every
// expert), fills it and returns it. Costs one full model of memory on rank 0 while held.
GatheredModel gather_model(RankContext& rc, LanguageModel& local_model, const std::vector<Parameter*>& params,
                           const AdamW& adam);

}  // namespace mok
