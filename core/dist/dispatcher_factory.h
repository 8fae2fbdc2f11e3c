#pragma once
// Building the multi-rank pieces of an MoE model from the config.
//
//   make_dispatcher(routing, comm, placement)   the dispatcher routing.dispatcher names:
//       "classic" → ClassicDispatcher (one copy per (token, expert))
//       "mok"     → the MoK dispatcher (one copy per (token, rank), shadow experts); this
//                   is the single place where it is selected once it is in the tree
//   install_expert_parallel(model, routing, comm, placement)
//       gives every MoE layer of `model` its own dispatcher over `comm` and makes each
//       router's load-balancing fractions global (an all-reduce of E + 1 counts per forward,
//       CommPurpose::control), so the aux loss is the same for any rank count.
//   last_dispatch_counts(dispatcher)   what the last forward moved (pairs kept local, …)
//
// `model` must have been built with ModelOptions::local_experts = expert_ownership(placement,
// comm.rank()) (or with every expert; the dispatcher only runs the owned ones).

#include <memory>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/dist/classic_dispatcher.h"
#include "core/dist/communicator.h"
#include "core/dist/expert_placement.h"
#include "core/model/expert_dispatcher.h"

MOK_NN_BEGIN

class LanguageModel;

// Throws std::invalid_argument for an unknown name, std::runtime_error for "mok" while the
// MoK dispatcher is not built into this tree.
std::unique_ptr<ExpertDispatcher> make_dispatcher(const RoutingConfig& routing, Communicator& comm,
                                                  const ExpertPlacement& placement);

// (experts) true where `rank` owns the expert: ModelOptions::local_experts for that rank.
std::vector<bool> expert_ownership(const ExpertPlacement& placement, int rank);

// One dispatcher per MoE layer, global router load counts. Returns the dispatchers
// installed (owned by the layers), in MoE-layer order.
std::vector<ExpertDispatcher*> install_expert_parallel(LanguageModel& model, const RoutingConfig& routing,
                                                       Communicator& comm, const ExpertPlacement& placement);

// The counts of a dispatcher's last forward (zeros for a dispatcher that keeps none).
DispatchCounts last_dispatch_counts(const ExpertDispatcher& dispatcher);

MOK_NN_END
