#pragma once
// From an experiment config to the expert dispatcher and routing policy of one MoE layer,
// so that whoever wires R ranks (trainer, `mok generate`, benchmarks) does it one way:
//
//   ExpertPlacement place = ExpertPlacement::parse(cfg.parallel.expert_placement, E, R);
//   layer.set_dispatcher(make_expert_dispatcher(cfg, comm, place, layer_index));
//   apply_routing_policy(cfg, place, comm.rank(), layer.router());
//
// routing.dispatcher = classic → ClassicDispatcher; mok → MokDispatcher with the cost model
// from mok_cost_params(). routing.policy = locality → the router prefers experts owned by
// this rank within routing.locality_margin. routing.locality_aux_coef > 0 (R > 1, either
// policy) adds the locality loss coef · mean_t Σ_{e on other ranks} p_te to the router.

#include <memory>

#include "core/config/experiment_config.h"
#include "core/parallel/communicator.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/expert_placement.h"
#include "core/parallel/mok_cost_model.h"
#include "core/model/expert_dispatcher.h"
#include "core/routing/topk_router.h"

MOK_NN_BEGIN

// Bandwidth: routing.cost_link_gbps, else parallel.link_gbps, else 25 GB/s; latency:
// parallel.link_latency_us when a link is emulated, else 2 µs; mode: routing.shadow.
MokCostParams mok_cost_params(const ExperimentConfig& config);

// Throws std::invalid_argument on an unknown dispatcher name. `plane`: the data plane of the
// rank's device (null: rows as host messages over `comm`, the CPU's way).
std::unique_ptr<ExpertDispatcher> make_expert_dispatcher(const ExperimentConfig& config,
                                                         Communicator& comm,
                                                         const ExpertPlacement& placement, int layer,
                                                         DataPlane* plane = nullptr);

// The mask of experts owned by `rank`.
LocalityPolicy locality_policy_for(const ExpertPlacement& placement, int rank, double margin);
void apply_routing_policy(const ExperimentConfig& config, const ExpertPlacement& placement, int rank,
                          TopKRouter& router);

MOK_NN_END
