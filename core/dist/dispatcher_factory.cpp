#include "core/dist/dispatcher_factory.h"

#include <stdexcept>

#include "core/model/language_model.h"
#include "core/model/moe_layer.h"

MOK_NN_BEGIN

std::unique_ptr<ExpertDispatcher> make_dispatcher(const RoutingConfig& routing, Communicator& comm,
                                                  const ExpertPlacement& placement) {
  if (routing.dispatcher == "classic") return std::make_unique<ClassicDispatcher>(comm, placement);
  if (routing.dispatcher == "mok") {
    // The hook for the MoK dispatcher (core/dist/mok_*): construct it here.
    throw std::runtime_error(
        "routing.dispatcher: 'mok' is not built into this version yet; use routing.dispatcher: classic");
  }
  throw std::invalid_argument("routing.dispatcher: unknown dispatcher '" + routing.dispatcher +
                              "'; use classic or mok");
}

std::vector<bool> expert_ownership(const ExpertPlacement& placement, int rank) {
  std::vector<bool> owned(static_cast<size_t>(placement.experts()), false);
  for (int e : placement.experts_on(rank)) owned[static_cast<size_t>(e)] = true;
  return owned;
}

std::vector<ExpertDispatcher*> install_expert_parallel(LanguageModel& model, const RoutingConfig& routing,
                                                       Communicator& comm, const ExpertPlacement& placement) {
  std::vector<ExpertDispatcher*> out;
  for (MoeLayer* layer : model.moe_layers()) {
    if (!layer) continue;
    if (layer->experts().size() != placement.experts())
      throw std::invalid_argument("expert placement covers " + std::to_string(placement.experts()) +
                                  " experts, the layer has " + std::to_string(layer->experts().size()));
    std::unique_ptr<ExpertDispatcher> d = make_dispatcher(routing, comm, placement);
    out.push_back(d.get());
    layer->set_dispatcher(std::move(d));
    Communicator* c = &comm;
    layer->router().set_count_reducer(
        [c](int64_t* counts, int64_t n) { c->all_reduce_sum(counts, n, CommPurpose::control); });
  }
  return out;
}

DispatchCounts last_dispatch_counts(const ExpertDispatcher& dispatcher) {
  if (const auto* c = dynamic_cast<const ClassicDispatcher*>(&dispatcher)) return c->last_counts();
  return {};
}

MOK_NN_END
