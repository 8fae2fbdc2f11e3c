#pragma once
// Making a model expert-parallel over a communicator, from the experiment config.
//
//   install_expert_parallel(model, config, comm, placement)
//       gives every MoE layer of `model` its own dispatcher over `comm`
//       (make_expert_dispatcher, core/parallel/mok_dispatch_setup.h: routing.dispatcher classic →
//       ClassicDispatcher, mok → MokDispatcher), applies routing.policy (locality), and makes
//       each router's load-balancing fractions global (an all-reduce of E + 1 counts per
//       forward, CommPurpose::control), so the aux loss is the same for any rank count.
//   last_dispatch_counts(dispatcher)   what the last forward kept local and shipped
//   set_fixed_layout_max_rows(dispatchers, N)   forwards without keep of ≤ N rows in the fixed
//       layout (core/parallel/fixed_row_exchange.h), nothing counted
//
// `model` is built with ModelOptions::local_experts = expert_ownership(placement, rank).

#include <cstdint>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/parallel/mok_cost_calibration.h"
#include "core/model/expert_dispatcher.h"

MOK_NN_BEGIN

class LanguageModel;

// (experts) true where `rank` owns the expert: ModelOptions::local_experts for that rank.
std::vector<bool> expert_ownership(const ExpertPlacement& placement, int rank);

// One dispatcher per MoE layer, routing policy, global router load counts. Returns the
// dispatchers installed (owned by the layers), in MoE-layer order. Throws
// std::invalid_argument for an unknown dispatcher or a placement of the wrong size.
// With routing.dispatcher mok and routing.cost_calibrate, the cost model's rates are first
// measured (calibrate_mok_cost, a collective) and written to *calibration when given.
// `plane`: the data plane of the ranks' device (null: rows as host messages over `comm`).
// `resident_layers` (layers, empty = none; the same on every rank): layers whose every expert
// this rank holds (ModelOptions::resident_layers) keep the layer's own dispatcher — their
// tokens never leave the rank — and get only the routing policy.
std::vector<ExpertDispatcher*> install_expert_parallel(LanguageModel& model, const ExperimentConfig& config,
                                                       Communicator& comm, const ExpertPlacement& placement,
                                                       MokCalibration* calibration = nullptr,
                                                       DataPlane* plane = nullptr,
                                                       const std::vector<bool>& resident_layers = {});

// Pairs of this rank's tokens in the last forward of a multi-rank dispatcher.
struct LastDispatch {
  int64_t pairs = 0;        // routed (not dropped) pairs
  int64_t local_pairs = 0;  // … computed on this rank (own experts; with MoK also shadow copies)
};
LastDispatch last_dispatch_counts(const ExpertDispatcher& dispatcher);

// ClassicDispatcher / MokDispatcher::set_fixed_layout_max_rows on each of `dispatchers` (others
// are left alone). Every rank must have the same rows at a step that may use it.
void set_fixed_layout_max_rows(const std::vector<ExpertDispatcher*>& dispatchers, int64_t rows);

MOK_NN_END
