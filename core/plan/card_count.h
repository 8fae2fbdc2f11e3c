#pragma once
// How many cards of one capacity a config needs: the smallest number of expert-parallel
// ranks R (one card each) whose per-rank plan fits.
//
// What more ranks change in mok: each rank holds model.experts/R of the routed experts
// (their weights, gradients and Adam state) and a 1/R share of the batch; everything else —
// attention, embeddings, norms, routers, shared experts, with their gradients and Adam
// state — is replicated on every rank. There is no optimizer-state sharding or offload and
// no tensor or pipeline parallelism, so the replicated part is a floor that no R lowers.
//
// R must divide model.experts (config_check); a model without experts runs on one rank.
// Training keeps train.batch, raised to a multiple of R × train.grad_accum where needed (at
// least one sequence per rank); generation keeps B, raised to a multiple of R.

#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/plan/generation_plan.h"

namespace mok {

struct CardCount {
  int ranks = 0;             // the smallest R that fits; 0 when none does
  int batch = 0;             // train.batch (training) or sequences B (generation) at that R
  double rank_bytes = 0.0;   // the plan per rank at that R (at the largest R tried when none fits)
  int largest_ranks = 1;     // the largest R tried: model.experts (1 without experts)
  // Of a rank's plan at the largest R: the weights every rank holds, with their gradients
  // (and Adam state when training), which no number of ranks lowers.
  double replicated_bytes = 0.0;
  std::string reason;        // when none fits: why, in a sentence
};

// The R values mok accepts for this config, ascending: the divisors of model.experts (1
// without experts).
std::vector<int> rank_choices(const ExperimentConfig& config);

// The config on `ranks` ranks with its batch raised to what they need (see above).
ExperimentConfig config_on_ranks(const ExperimentConfig& config, int ranks);

CardCount training_cards(const ExperimentConfig& config, double capacity_bytes);
// `config`'s parallel.ranks is replaced by each R tried.
CardCount generation_cards(const ExperimentConfig& config, const GenerationShape& shape, double capacity_bytes);

}  // namespace mok
