#include "core/parallel/mok_dispatch_setup.h"

#include <stdexcept>
#include <string>

#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/mok_dispatcher.h"

MOK_NN_BEGIN

MokCostParams mok_cost_params(const ExperimentConfig& c) {
  MokCostParams p;
  const bool emulated = c.parallel.link_gbps > 0.0;
  p.link_gbps = c.routing.cost_link_gbps > 0.0 ? c.routing.cost_link_gbps
                : emulated                      ? c.parallel.link_gbps
                                                : 25.0;
  p.latency_us = emulated ? c.parallel.link_latency_us : 2.0;
  p.compute_gflops = c.routing.cost_compute_gflops;
  p.mode = parse_shadow_mode(c.routing.shadow);
  return p;
}

std::unique_ptr<ExpertDispatcher> make_expert_dispatcher(const ExperimentConfig& c, Communicator& comm,
                                                         const ExpertPlacement& placement, int layer,
                                                         DataPlane* plane) {
  if (c.routing.dispatcher == "classic") {
    if (!plane) return std::make_unique<ClassicDispatcher>(comm, placement);
    auto classic = std::make_unique<ClassicDispatcher>(*plane, placement);
    // Chunks only where a transfer runs beside the compute on another GPU's link: NCCL. On the
    // host plane nothing overlaps, and the peer plane may put both ranks on one GPU, where the
    // chunks measured slower (docs/benchmarks.md, "2026-12-05 (afternoon)").
    if (std::string(plane->kind()) == "nccl") classic->set_overlap_chunks(c.routing.overlap_chunks);
    return classic;
  }
  if (c.routing.dispatcher == "mok") {
    MokOptions opt;
    opt.cost = mok_cost_params(c);
    opt.layer = layer;
    opt.expert_hidden = c.model.expert_hidden;
    // As classic's, MoK's chunks are off where the peer plane may put both ranks on one GPU:
    // there they measured 0.93x one chunk's tokens/s (docs/benchmarks.md, "2026-12-07
    // (afternoon)"). The host plane keeps them (CPU ranks overlap on a helper thread).
    const bool one_gpu_maybe = plane && std::string(plane->kind()) == "peer";
    opt.overlap_chunks = one_gpu_maybe ? 1 : c.routing.overlap_chunks;
    return plane ? std::make_unique<MokDispatcher>(*plane, placement, opt)
                 : std::make_unique<MokDispatcher>(comm, placement, opt);
  }
  throw std::invalid_argument("routing.dispatcher '" + c.routing.dispatcher + "': expected classic or mok");
}

LocalityPolicy locality_policy_for(const ExpertPlacement& placement, int rank, double margin) {
  LocalityPolicy p;
  p.local.assign(static_cast<size_t>(placement.experts()), 0);
  for (int e : placement.experts_on(rank)) p.local[e] = 1;
  p.margin = margin;
  return p;
}

void apply_routing_policy(const ExperimentConfig& c, const ExpertPlacement& placement, int rank,
                          TopKRouter& router) {
  if (c.routing.policy == "locality")
    router.set_locality(locality_policy_for(placement, rank, c.routing.locality_margin));
  else
    router.set_locality(LocalityPolicy{});
  // The locality loss needs another rank to push mass away from: with one rank every expert
  // is local, and the router stays exactly the plain one.
  if (c.routing.locality_aux_coef > 0.0 && placement.ranks() > 1)
    router.set_locality_loss(locality_policy_for(placement, rank, 0.0).local, c.routing.locality_aux_coef);
  else
    router.set_locality_loss({}, 0.0);
}

MOK_NN_END
