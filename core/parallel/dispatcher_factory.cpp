#include "core/parallel/dispatcher_factory.h"

#include <stdexcept>

#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/mok_dispatch_setup.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/model/language_model.h"
#include "core/model/moe_layer.h"

MOK_NN_BEGIN

std::vector<bool> expert_ownership(const ExpertPlacement& placement, int rank) {
  std::vector<bool> owned(static_cast<size_t>(placement.experts()), false);
  for (int e : placement.experts_on(rank)) owned[static_cast<size_t>(e)] = true;
  return owned;
}

std::vector<ExpertDispatcher*> install_expert_parallel(LanguageModel& model, const ExperimentConfig& config,
                                                       Communicator& comm, const ExpertPlacement& placement,
                                                       MokCalibration* calibration, DataPlane* plane,
                                                       const std::vector<bool>& resident_layers) {
  std::vector<ExpertDispatcher*> out;
  const std::vector<MoeLayer*> layers = model.moe_layers();
  // Calibrated rates enter exactly where pinned ones would: as the cost-model keys.
  ExperimentConfig tuned = config;
  if (config.routing.dispatcher == "mok" && config.routing.cost_calibrate) {
    const MokCalibration cal = plane ? calibrate_mok_cost(*plane, config.model.d_model, config.model.expert_hidden)
                                     : calibrate_mok_cost(comm, config.model.d_model, config.model.expert_hidden);
    tuned.routing.cost_link_gbps = cal.link_gbps;
    tuned.routing.cost_compute_gflops = cal.compute_gflops;
    if (calibration) *calibration = cal;
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    MoeLayer* layer = layers[l];
    if (!layer) continue;
    if (layer->experts().size() != placement.experts())
      throw std::invalid_argument("expert placement covers " + std::to_string(placement.experts()) +
                                  " experts, the layer has " + std::to_string(layer->experts().size()));
    if (l < resident_layers.size() && resident_layers[l]) {
      apply_routing_policy(config, placement, comm.rank(), layer->router());
      continue;
    }
    std::unique_ptr<ExpertDispatcher> d = make_expert_dispatcher(tuned, comm, placement, static_cast<int>(l), plane);
    out.push_back(d.get());
    layer->set_dispatcher(std::move(d));
    apply_routing_policy(config, placement, comm.rank(), layer->router());
    Communicator* c = &comm;
    layer->router().set_count_reducer(
        [c](int64_t* counts, int64_t n) { c->all_reduce_sum(counts, n, CommPurpose::control); });
  }
  return out;
}

LastDispatch last_dispatch_counts(const ExpertDispatcher& dispatcher) {
  LastDispatch out;
  if (const auto* c = dynamic_cast<const ClassicDispatcher*>(&dispatcher)) {
    out.pairs = c->last_counts().pairs;
    out.local_pairs = c->last_counts().local_pairs;
  } else if (const auto* m = dynamic_cast<const MokDispatcher*>(&dispatcher)) {
    out.pairs = m->last_log().pairs;
    out.local_pairs = m->last_log().own_pairs + m->last_log().shadow_pairs;
  }
  return out;
}

void set_fixed_layout_max_rows(const std::vector<ExpertDispatcher*>& dispatchers, int64_t rows) {
  for (ExpertDispatcher* d : dispatchers) {
    if (auto* c = dynamic_cast<ClassicDispatcher*>(d)) c->set_fixed_layout_max_rows(rows);
    if (auto* m = dynamic_cast<MokDispatcher*>(d)) m->set_fixed_layout_max_rows(rows);
  }
}

MOK_NN_END
