// bench_mok: one MoE layer's training step (router + dispatch + experts, forward and
// backward) and inference forward over R ranks, with the classic dispatcher, MoK (exact)
// and MoK with locality-aware routing; prints bytes between ranks per step, measured step
// time, modeled link time, projected tokens/s, and ratios against classic. It never passes
// or fails.
//
//   bench_mok [--ranks 2,4] [--links nvlink,ib] [--steps 5] [--threads 1] [--json OUT.jsonl]
//             experiments/mok_coarse.yaml experiments/mok_kitten.yaml ...
//   mpirun -np 2 bench_mok [...] CONFIG...     (one process per rank: --ranks is ignored)
//
// Shapes come from each config: model.{d_model, experts, top_k, expert_hidden}, tokens
// per step = train.batch × data.seq_len (the global batch, split over the ranks),
// routing.locality_margin for the locality variant, routing.shadow for MoK. Links:
// nvlink = 250 GB/s, 1 µs; ib = 25 GB/s, 2 µs (modeled, never slept). Step time here is
// the measured compute (in-memory exchanges) plus the modeled link time of the step's
// collectives (the slowest rank's). Measured times are the least over the timed steps
// (each step's slowest rank), which filters out other processes' load; bytes and link
// times are means over steps (they do not vary).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config_io.h"
#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatch_setup.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/parallel/mpi_communicator.h"
#include "core/model/moe_layer.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

using namespace mok;

namespace {

struct Link {
  std::string name;
  double gbps, latency_us;
};

struct Figures {
  double bytes_per_step = 0;     // remote bytes, all ranks, all purposes, training step
  double payload_per_step = 0;   // … without control
  double infer_bytes = 0;        // remote bytes of one inference forward, all ranks
  double step_ms = 0;            // measured, slowest rank, least over steps (others' load)
  double link_ms = 0;            // modeled link time of a training step (slowest rank)
  double infer_ms = 0, infer_link_ms = 0;
  double local_fraction = 0;     // pairs computed on the token's rank
  double shadowed = 0;           // shadowed (rank, expert) per step, all ranks
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One rank's part; results are reduced over ranks and written by rank 0.
void run_rank(Communicator& comm, const ExperimentConfig& c, int steps, int threads, Figures* out) {
  ThreadPool pool(threads);
  ScopedThreadPool scope(pool);
  const int R = comm.size(), me = comm.rank();
  const int64_t tokens = static_cast<int64_t>(c.train.batch) * c.data.seq_len;
  const int64_t n = tokens * (me + 1) / R - tokens * me / R, d = c.model.d_model;
  MoeConfig mc;
  mc.d = d;
  mc.experts = c.model.experts;
  mc.top_k = c.model.top_k;
  mc.hidden = c.model.expert_hidden;
  mc.aux_loss_coef = c.model.aux_loss_coef;
  mc.z_loss_coef = c.model.z_loss_coef;
  MoeLayer layer("layers.0.moe", mc, 0.5, 0.02, c.seed, 0);
  const ExpertPlacement place =
      ExpertPlacement::parse(c.parallel.expert_placement, c.model.experts, R);
  layer.set_dispatcher(make_expert_dispatcher(c, comm, place, 0));
  apply_routing_policy(c, place, me, layer.router());
  auto* mok = dynamic_cast<MokDispatcher*>(&layer.dispatcher());
  auto* classic = dynamic_cast<ClassicDispatcher*>(&layer.dispatcher());
  // Token rows: a different stream per global token, so the batch is the same for any R.
  const int64_t t0 = tokens * me / R;
  Tensor x({n, d}), dy({n, d});
  for (int64_t i = 0; i < n * d; ++i) {
    x[i] = static_cast<real>(counter_normal(c.seed, 1, t0 * d + i));
    dy[i] = static_cast<real>(1e-3 * counter_normal(c.seed, 2, t0 * d + i));
  }

  double step_s = 0, link_s = 0, local = 0, shadowed = 0;
  int64_t bytes = 0, payload = 0;
  for (int s = 0; s <= steps; ++s) {  // step 0 warms up
    comm.barrier();
    const CommStats before = comm.stats();
    const double w0 = now_s();
    MoeStats st;
    Tensor y = layer.forward(x, true, &st);
    Tensor dx = layer.backward(dy, real(1));
    const double w = now_s() - w0;
    const CommStats delta = comm.stats().since(before);
    if (s == 0) continue;
    double step_max[2] = {w, delta.modeled_seconds};
    comm.all_reduce_max(step_max, 2, CommPurpose::control);
    step_s = s == 1 ? step_max[0] : std::min(step_s, step_max[0]);  // least disturbed step
    link_s += step_max[1];
    bytes += delta.remote_sent_total();
    payload += delta.remote_sent_total() - delta.remote_sent(CommPurpose::control);
    if (mok) {
      local += mok->last_log().local_fraction();
      shadowed += static_cast<double>(mok->last_log().shadowed.size());
    } else if (classic) {
      const DispatchCounts& k = classic->last_counts();
      local += k.pairs ? static_cast<double>(k.local_pairs) / static_cast<double>(k.pairs) : 1.0;
    }
  }
  double infer_s = 0, infer_link = 0;
  int64_t infer_bytes = 0;
  for (int s = 0; s <= steps; ++s) {
    comm.barrier();
    const CommStats before = comm.stats();
    const double w0 = now_s();
    Tensor y = layer.forward(x, false, nullptr);
    const double w = now_s() - w0;
    const CommStats delta = comm.stats().since(before);
    if (s == 0) continue;
    double m[2] = {w, delta.modeled_seconds};
    comm.all_reduce_max(m, 2, CommPurpose::control);
    infer_s = s == 1 ? m[0] : std::min(infer_s, m[0]);
    infer_link += m[1];
    infer_bytes += delta.remote_sent_total();
  }
  // Sums over ranks (bytes, fractions), then rank 0 writes.
  double sums[5] = {static_cast<double>(bytes), static_cast<double>(payload),
                    static_cast<double>(infer_bytes), local, shadowed};
  comm.all_reduce_sum(sums, 5, CommPurpose::control);
  if (me == 0) {
    out->bytes_per_step = sums[0] / steps;
    out->payload_per_step = sums[1] / steps;
    out->infer_bytes = sums[2] / steps;
    out->local_fraction = sums[3] / (steps * R);
    out->shadowed = sums[4] / steps;
    out->step_ms = 1e3 * step_s;
    out->link_ms = 1e3 * link_s / steps;
    out->infer_ms = 1e3 * infer_s;
    out->infer_link_ms = 1e3 * infer_link / steps;
  }
}

struct Variant {
  std::string name, dispatcher, policy;
};

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<MpiSession> mpi;
  if (mpi_launch_detected()) mpi = std::make_unique<MpiSession>(&argc, &argv);
  std::vector<int> ranks = {2, 4};
  std::vector<std::string> link_names = {"nvlink", "ib"};
  int steps = 5, threads = 1;
  std::string json_path;  // also write one JSON object per row there
  std::vector<std::string> configs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_mok: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ranks") {
      ranks.clear();
      for (const auto& r : split(next())) ranks.push_back(std::atoi(r.c_str()));
    } else if (a == "--links") {
      link_names = split(next());
    } else if (a == "--steps") {
      steps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--threads") {
      threads = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--json") {
      json_path = next();
    } else {
      configs.push_back(a);
    }
  }
  if (configs.empty()) {
    std::fprintf(stderr, "usage: bench_mok [--ranks 2,4] [--links nvlink,ib] [--steps N] "
                         "[--threads T] [--json OUT.jsonl] CONFIG.yaml...\n");
    return 2;
  }
  const std::map<std::string, Link> known = {{"nvlink", {"nvlink", 250.0, 1.0}},
                                             {"ib", {"ib", 25.0, 2.0}}};
  std::unique_ptr<MpiCommunicator> mpi_comm;
  if (mpi) {
    mpi_comm = std::make_unique<MpiCommunicator>();
    ranks = {mpi_comm->size()};
  }
  const bool leader = !mpi_comm || mpi_comm->rank() == 0;
  const std::vector<Variant> variants = {{"classic", "classic", "topk"},
                                         {"mok", "mok", "topk"},
                                         {"mok+locality", "mok", "locality"}};
  FILE* json = nullptr;
  if (leader && !json_path.empty() && !(json = std::fopen(json_path.c_str(), "a"))) {
    std::fprintf(stderr, "bench_mok: cannot write %s\n", json_path.c_str());
    return 1;
  }
  if (leader)
    std::printf("%-12s %-5s %-6s %-13s %12s %9s %9s %9s %11s %11s %7s %7s | %6s %6s %6s %6s\n",
                "config", "ranks", "link", "dispatcher", "bytes/step", "step_ms", "link_ms",
                "proj_ms", "train_tok/s", "infer_tok/s", "local", "shadow", "bytes", "link", "train",
                "infer");
  for (const std::string& path : configs) {
    ExperimentConfig base;
    try {
      base = load_experiment_config(path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_mok: %s\n", e.what());
      return 1;
    }
    const double tokens = static_cast<double>(base.train.batch) * base.data.seq_len;
    for (int R : ranks)
      for (const std::string& ln : link_names) {
        if (!known.count(ln)) {
          std::fprintf(stderr, "bench_mok: unknown link %s (nvlink, ib)\n", ln.c_str());
          return 2;
        }
        const Link link = known.at(ln);
        Figures classic_fig;
        for (const Variant& v : variants) {
          ExperimentConfig c = base;
          c.routing.dispatcher = v.dispatcher;
          c.routing.policy = v.policy;
          c.parallel.link_gbps = link.gbps;
          c.parallel.link_latency_us = link.latency_us;
          Figures fig;
          LinkModel lm;
          lm.gbps = link.gbps;
          lm.latency_us = link.latency_us;
          if (mpi_comm) {
            mpi_comm->set_link(lm);
            run_rank(*mpi_comm, c, steps, threads, &fig);
          } else {
            run_local_ranks(R, [&](Communicator& comm) { run_rank(comm, c, steps, threads, &fig); }, lm);
          }
          if (!leader) continue;
          if (v.name == "classic") classic_fig = fig;
          const double proj = fig.step_ms + fig.link_ms, proj_inf = fig.infer_ms + fig.infer_link_ms;
          const double cproj = classic_fig.step_ms + classic_fig.link_ms;
          const double cinf = classic_fig.infer_ms + classic_fig.infer_link_ms;
          const double train_tps = tokens / (proj * 1e-3), infer_tps = tokens / (proj_inf * 1e-3);
          const double r_bytes = classic_fig.bytes_per_step > 0 ? fig.bytes_per_step / classic_fig.bytes_per_step : 1.0;
          const double r_train = cproj / proj, r_infer = cinf / proj_inf;
          const double r_link = classic_fig.link_ms > 0 ? fig.link_ms / classic_fig.link_ms : 1.0;
          const std::string name = base.name;
          if (json) {
            std::fprintf(json, "{\"config\":\"%s\",\"comm\":\"%s\",\"ranks\":%d,\"link\":\"%s\",\"dispatcher\":\"%s\","
                        "\"tokens_per_step\":%.0f,\"bytes_per_step\":%.0f,\"payload_bytes_per_step\":%.0f,"
                        "\"infer_bytes\":%.0f,\"step_ms\":%.3f,\"link_ms\":%.3f,\"projected_step_ms\":%.3f,"
                        "\"train_tokens_per_s\":%.1f,\"infer_tokens_per_s\":%.1f,\"local_fraction\":%.4f,"
                        "\"shadowed_per_step\":%.2f,\"bytes_vs_classic\":%.4f,\"link_vs_classic\":%.4f,\"train_speedup\":%.4f,"
                        "\"infer_speedup\":%.4f}\n",
                        name.c_str(), mpi_comm ? "mpi" : "local", R, ln.c_str(), v.name.c_str(), tokens,
                        fig.bytes_per_step, fig.payload_per_step, fig.infer_bytes, fig.step_ms, fig.link_ms,
                        proj, train_tps, infer_tps, fig.local_fraction, fig.shadowed, r_bytes, r_link, r_train,
                        r_infer);
            std::fflush(json);
          }
          {
            std::printf("%-12s %-5s %-6s %-13s %12.0f %9.2f %9.3f %9.2f %11.0f %11.0f %7.3f %7.1f | %6.3f %6.3f %6.3f %6.3f\n",
                        name.c_str(), (std::to_string(R) + (mpi_comm ? "mpi" : "")).c_str(), ln.c_str(),
                        v.name.c_str(), fig.bytes_per_step, fig.step_ms, fig.link_ms, proj, train_tps,
                        infer_tps, fig.local_fraction, fig.shadowed, r_bytes, r_link, r_train, r_infer);
          }
          std::fflush(stdout);
        }
      }
  }
  if (json) std::fclose(json);
  return 0;
}
