// Multi-rank GPU checks (group "parallel"): two ranks of one process, against what the host
// computes from the same fresh random inputs, over each data plane there is hardware for:
//   nccl   two GPUs, one rank each (kernels/nccl_data_plane.h)
//   peer   peer copies (kernels/peer_data_plane.h): two GPUs, or both ranks on one GPU
//   all_to_all_rows  f32 and bf16 rows, uneven and empty messages: bitwise the rows sent; the
//                    same as one group (all_to_all_rows_group)
//   all_reduce_sum   f32, 1M + 3 values: bitwise the host's fixed-order sum, on both ranks
//   broadcast        bitwise root's values
//   dispatchers     an MoE layer's forward and backward over the two GPUs (experts split
//                    between them) against LocalDispatcher on the CPU with every expert:
//                    outputs, input and gate gradients, and each expert's weight gradients
//                    (summed over both ranks' tokens) within the fp32 tolerance — classic,
//                    MoK shipping every row once per rank (shadow never), and MoK fetching
//                    every remote expert instead (shadow always: weights out, their
//                    gradients home)
//   fixed layout    an inference forward of classic and MoK with every row sent to every
//                    rank and nothing counted: the counted forward's bits, the CPU within tolerance
//   chunks          classic and MoK in 4 chunks against one chunk, bf16, 64 experts: bitwise
// With one GPU only the peer plane is checked (its ranks share the GPU), and the group says so.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/model/expert_bank.h"
#include "core/model/expert_dispatcher.h"
#include "core/parallel/classic_dispatcher.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_dispatcher.h"
#include "core/routing/routing_decision.h"
#include "core/tensor/memory_tracker.h"
#include "core/util/counter_rng.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/tensor_download.h"

namespace mok::cuda {

namespace {

constexpr int kRanks = 2;

std::vector<float> normal_values(uint64_t seed, uint64_t stream, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(counter_normal(seed, stream, i));
  return v;
}

double bitwise_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  std::vector<double> w(want.begin(), want.end());
  return relative_error(got, w) + (got == want ? 0.0 : 1e-30);  // any differing bit fails a 0 tolerance
}

// Rows rank s sends to rank p: 3 + 5s + 7p, except that rank 1 sends none to itself.
int64_t rows_between(int s, int p) { return s == 1 && p == 1 ? 0 : 3 + 5 * s + 7 * p; }

struct Routing {
  std::vector<int32_t> expert;  // (n·k)
  std::vector<float> gate;
};

// Top-2 of 8 experts per token, distinct, some pairs dropped (−1).
Routing random_routing(uint64_t seed, uint64_t stream, int64_t n, int k, int experts) {
  Routing r;
  for (int64_t t = 0; t < n; ++t) {
    const int e0 = static_cast<int>(counter_bits(seed, stream, 3 * t) % experts);
    const int e1 = (e0 + 1 + static_cast<int>(counter_bits(seed, stream, 3 * t + 1) % (experts - 1))) % experts;
    const bool drop = counter_bits(seed, stream, 3 * t + 2) % 17 == 0;
    const float g0 = 0.3f + 0.4f * static_cast<float>(counter_bits(seed, stream + 1, t) % 1000) / 1000.0f;
    r.expert.push_back(e0);
    r.expert.push_back(drop ? -1 : e1);
    r.gate.push_back(g0);
    r.gate.push_back(1.0f - g0);
    (void)k;
  }
  return r;
}

struct LayerResult {
  std::vector<float> y, dx, dgate;
  std::vector<std::vector<float>> expert_grads;  // per expert: up then down weight gradients
};

std::vector<float> expert_grads(const mok::SwiGluMlp& e) {
  std::vector<float> g = download<float>(e.up().weight().grad);
  const std::vector<float> d = download<float>(e.down().weight().grad);
  g.insert(g.end(), d.begin(), d.end());
  return g;
}

std::vector<mok::GroupedSwiGlu::ExpertSpec> expert_specs(int experts) {
  std::vector<mok::GroupedSwiGlu::ExpertSpec> specs;
  for (int e = 0; e < experts; ++e) specs.push_back({"layers.0.moe.experts." + std::to_string(e), 4242u + e});
  return specs;
}

}  // namespace

void check_parallel(CheckInputs& in, std::vector<OpCheck>& out) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (devices < 1) return;
  std::vector<std::string> transports = {"peer"};
  if (devices >= kRanks && mok::data_plane_available(mok::DeviceType::cuda, "nccl"))
    transports.insert(transports.begin(), "nccl");
  else
    std::printf("parallel: NCCL needs %d GPUs (this machine has %d) and a build with NCCL: the two ranks share "
                "cuda:0 over peer copies only\n", kRanks, devices);
  const uint64_t seed = in.seed;
  constexpr int64_t kWidth = 96, kReduceN = 1'000'003;
  constexpr int kE = 8, kK = 2;
  constexpr int64_t kD = 64, kF = 128, kTokens = 200;  // tokens per rank

  // The CPU reference of the MoE layer: every expert, both ranks' tokens.
  std::vector<Routing> routing;
  std::vector<std::vector<float>> xs, dys;
  for (int r = 0; r < kRanks; ++r) {
    routing.push_back(random_routing(seed, 300 + 2 * r, kTokens, kK, kE));
    xs.push_back(normal_values(seed, 400 + r, kTokens * kD));
    dys.push_back(normal_values(seed, 500 + r, kTokens * kD));
  }
  LayerResult ref;
  {
    mok::MemoryTracker tracker;
    mok::ScopedMemoryTracker track(tracker);
    mok::ScopedExecContext on_cpu(mok::cpu_context());
    mok::ExpertBank bank = mok::make_stacked_expert_bank(expert_specs(kE), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    Routing all;
    std::vector<float> x, dy;
    for (int r = 0; r < kRanks; ++r) {
      all.expert.insert(all.expert.end(), routing[r].expert.begin(), routing[r].expert.end());
      all.gate.insert(all.gate.end(), routing[r].gate.begin(), routing[r].gate.end());
      x.insert(x.end(), xs[r].begin(), xs[r].end());
      dy.insert(dy.end(), dys[r].begin(), dys[r].end());
    }
    const int64_t n = kRanks * kTokens;
    mok::RoutingDecision d = mok::routing_decision_from(all.expert, all.gate, kK, kE);
    mok::Tensor xt = mok::cpu_context().upload(x.data(), {n, kD}, mok::kRealDType);
    mok::Tensor dyt = mok::cpu_context().upload(dy.data(), {n, kD}, mok::kRealDType);
    mok::LocalDispatcher local;
    mok::Tensor y = local.forward(xt, d, bank, true);
    mok::Tensor dgate;
    mok::Tensor dx = local.backward(dyt, bank, dgate);
    ref.y = download<float>(y);
    ref.dx = download<float>(dx);
    ref.dgate = download<float>(dgate);
    for (int e = 0; e < kE; ++e) ref.expert_grads.push_back(expert_grads(*bank.experts[e]));
  }

  std::mutex mutex;
  std::vector<OpCheck> found;
  auto report = [&](const std::string& name, double err, double tol) {
    std::lock_guard lock(mutex);
    found.push_back({name, err, tol});
  };
  for (const std::string& transport : transports) mok::run_local_ranks(kRanks, [&](mok::Communicator& comm) {
    const int me = comm.rank();
    const int gpu = me % devices;  // with one GPU both ranks share it (peer copies only)
    const std::string tag = " (rank " + std::to_string(me) + " on cuda:" + std::to_string(gpu) + ")";
    const std::string& plane_name = transport;
    mok::MemoryTracker tracker;
    mok::ScopedMemoryTracker track(tracker);
    std::unique_ptr<mok::ExecContext> cx = mok::make_exec_context(mok::Device::cuda(gpu), mok::DType::f32);
    mok::ScopedExecContext scope(*cx);
    std::unique_ptr<mok::DataPlane> plane = mok::make_data_plane(comm, *cx, transport);

    // all_to_all_rows, f32 and bf16, one by one and then both as one group.
    for (bool grouped : {false, true}) {
      std::vector<int64_t> send_rows(kRanks), recv_rows(kRanks);
      std::vector<float> send;
      for (int p = 0; p < kRanks; ++p) {
        send_rows[p] = rows_between(me, p);
        recv_rows[p] = rows_between(p, me);
        const std::vector<float> v = normal_values(seed, 100 + 10 * me + p + grouped, send_rows[p] * kWidth);
        send.insert(send.end(), v.begin(), v.end());
      }
      std::vector<float> want;
      for (int s = 0; s < kRanks; ++s) {
        const std::vector<float> v = normal_values(seed, 100 + 10 * s + me + grouped, recv_rows[s] * kWidth);
        want.insert(want.end(), v.begin(), v.end());
      }
      const int64_t ns = static_cast<int64_t>(send.size()) / kWidth, nr = static_cast<int64_t>(want.size()) / kWidth;
      const mok::DType dtypes[] = {mok::DType::f32, mok::DType::bf16};
      std::vector<mok::Tensor> sent, received;
      std::vector<mok::DataPlane::RowMove> moves;
      for (mok::DType dtype : dtypes) {
        mok::Tensor s32 = cx->upload(send.data(), {ns, kWidth}, mok::DType::f32);
        mok::Tensor st = dtype == mok::DType::f32 ? std::move(s32) : cx->empty({ns, kWidth}, dtype);
        if (dtype != mok::DType::f32) cx->ops().convert(s32, st);
        sent.push_back(std::move(st));
        received.push_back(cx->empty({nr, kWidth}, dtype));
      }
      for (size_t i = 0; i < sent.size(); ++i) {
        if (grouped)
          moves.push_back({&sent[i], send_rows, &received[i], recv_rows, mok::CommPurpose::dispatch});
        else
          plane->all_to_all_rows(sent[i], send_rows, received[i], recv_rows, mok::CommPurpose::dispatch);
      }
      if (grouped) plane->all_to_all_rows_group(moves);
      for (size_t i = 0; i < sent.size(); ++i) {
        const mok::DType dtype = dtypes[i];
        mok::Tensor r32 = cx->empty({nr, kWidth}, mok::DType::f32);
        if (dtype == mok::DType::f32)
          r32 = received[i].clone(mok::MemTag{});
        else
          cx->ops().convert(received[i], r32);
        const std::vector<float> expect = dtype == mok::DType::f32 ? want : from_bf16(to_bf16(want));
        report(plane_name + " all_to_all_rows" + (grouped ? "_group " : " ") + mok::dtype_name(dtype) + tag,
               bitwise_error(download<float>(r32), expect), 0.0);
      }
    }

    // all_reduce_sum: the host rule, bitwise.
    {
      std::vector<float> mine = normal_values(seed, 200 + me, kReduceN);
      std::vector<std::vector<float>> every;
      for (int s = 0; s < kRanks; ++s) every.push_back(normal_values(seed, 200 + s, kReduceN));
      std::vector<float> want(kReduceN);
      for (int64_t i = 0; i < kReduceN; ++i) {
        double acc = 0.0;
        for (int s = 0; s < kRanks; ++s) acc += static_cast<double>(every[s][i]);
        want[i] = static_cast<float>(acc);
      }
      mok::Tensor t = cx->upload(mine.data(), {kReduceN}, mok::DType::f32);
      plane->all_reduce_sum(t, mok::CommPurpose::gradients);
      report(plane_name + " all_reduce_sum f32, fixed order" + tag, bitwise_error(download<float>(t), want), 0.0);
      // With two ranks each sends the other's chunk, then its own reduced chunk: n values.
      const int64_t moved = comm.stats().remote_sent(mok::CommPurpose::gradients);
      report(plane_name + " all_reduce_sum counts " + std::to_string(moved) + " bytes sent" + tag,
             moved == kReduceN * 4 ? 0.0 : 1.0, 0.0);
    }

    // broadcast from rank 1.
    {
      std::vector<float> mine = normal_values(seed, 250 + me, 4099);
      const std::vector<float> want = normal_values(seed, 251, 4099);
      mok::Tensor t = cx->upload(mine.data(), {4099}, mok::DType::f32);
      plane->broadcast(t, 1, mok::CommPurpose::weights);
      report(plane_name + " broadcast" + tag, bitwise_error(download<float>(t), want), 0.0);
    }

    // The dispatchers over the two ranks: experts 0–3 on rank 0, 4–7 on rank 1.
    for (const std::string which : {"classic", "mok shadow never", "mok shadow always"}) {
      const mok::ExpertPlacement place = mok::ExpertPlacement::contiguous(kE, kRanks);
      std::vector<bool> local(kE, false);
      for (int e : place.experts_on(me)) local[e] = true;
      mok::ExpertBank bank = mok::make_stacked_expert_bank(expert_specs(kE), local, kD, kF, 0.3, 0.2, 0, "moe.expert");
      std::unique_ptr<mok::ExpertDispatcher> dispatcher;
      if (which == "classic") {
        dispatcher = std::make_unique<mok::ClassicDispatcher>(*plane, place);
      } else {
        mok::MokOptions opt;
        opt.expert_hidden = kF;
        opt.cost.mode = which == "mok shadow never" ? mok::ShadowMode::never : mok::ShadowMode::always;
        dispatcher = std::make_unique<mok::MokDispatcher>(*plane, place, opt);
      }
      mok::RoutingDecision d = mok::routing_decision_from(routing[me].expert, routing[me].gate, kK, kE);
      mok::Tensor x = cx->upload(xs[me].data(), {kTokens, kD}, mok::DType::f32);
      mok::Tensor dy = cx->upload(dys[me].data(), {kTokens, kD}, mok::DType::f32);
      mok::Tensor y = dispatcher->forward(x, d, bank, true);
      mok::Tensor dgate;
      mok::Tensor dx = dispatcher->backward(dy, bank, dgate);
      auto slice = [&](const std::vector<float>& v, int64_t width) {
        return std::vector<double>(v.begin() + me * kTokens * width, v.begin() + (me + 1) * kTokens * width);
      };
      const std::string what = which + " dispatch over " + plane_name;
      report(what + " forward, 2 ranks vs CPU" + tag, relative_error(download<float>(y), slice(ref.y, kD)),
             kFp32Tolerance);
      report(what + " dx, 2 ranks vs CPU" + tag, relative_error(download<float>(dx), slice(ref.dx, kD)),
             kFp32Tolerance);
      report(what + " dgate, 2 ranks vs CPU" + tag, relative_error(download<float>(dgate), slice(ref.dgate, kK)),
             kFp32Tolerance);
      double worst = 0.0;
      for (int e : place.experts_on(me)) {
        const std::vector<double> want(ref.expert_grads[e].begin(), ref.expert_grads[e].end());
        worst = std::max(worst, relative_error(expert_grads(*bank.experts[e]), want));
      }
      report(what + " expert weight gradients" + tag, worst, kFp32Tolerance);
      if (const auto* mokd = dynamic_cast<const mok::MokDispatcher*>(dispatcher.get())) {
        // Shadow always: every remote expert a pair of this rank names was fetched here.
        const bool fetched = !mokd->last_log().shadowed.empty();
        if (which == "mok shadow always") report(what + " fetched experts" + tag, fetched ? 0.0 : 1.0, 0.0);
      }
    }
    // The fixed layout of an inference forward (core/parallel/fixed_row_exchange.h): every row
    // to every rank, nothing counted — the counted forward's outputs bit for bit, and the CPU's
    // within the tolerance.
    for (const std::string which : {"classic", "mok"}) {
      const mok::ExpertPlacement place = mok::ExpertPlacement::contiguous(kE, kRanks);
      std::vector<bool> local(kE, false);
      for (int e : place.experts_on(me)) local[e] = true;
      mok::ExpertBank bank = mok::make_stacked_expert_bank(expert_specs(kE), local, kD, kF, 0.3, 0.2, 0, "moe.expert");
      std::vector<float> y_of[2];  // counted, fixed
      for (const bool fixed : {false, true}) {
        std::unique_ptr<mok::ExpertDispatcher> dispatcher;
        if (which == "classic") {
          auto c = std::make_unique<mok::ClassicDispatcher>(*plane, place);
          c->set_fixed_layout_max_rows(fixed ? kTokens : 0);
          dispatcher = std::move(c);
        } else {
          mok::MokOptions opt;
          opt.expert_hidden = kF;
          opt.cost.mode = mok::ShadowMode::never;
          opt.fixed_layout_max_rows = fixed ? kTokens : 0;
          dispatcher = std::make_unique<mok::MokDispatcher>(*plane, place, opt);
        }
        mok::RoutingDecision d = mok::routing_decision_from(routing[me].expert, routing[me].gate, kK, kE);
        mok::Tensor x = cx->upload(xs[me].data(), {kTokens, kD}, mok::DType::f32);
        y_of[fixed] = download<float>(dispatcher->forward(x, d, bank, false));
      }
      const std::string what = which + " fixed layout over " + plane_name;
      report(what + " = counted, bitwise" + tag, bitwise_error(y_of[1], y_of[0]), 0.0);
      report(what + " forward vs CPU" + tag,
             relative_error(y_of[1], std::vector<double>(ref.y.begin() + me * kTokens * kD,
                                                         ref.y.begin() + (me + 1) * kTokens * kD)),
             kFp32Tolerance);
    }
    cx->ops().synchronize();
  });

  // Chunks against one chunk in bf16, with 32 experts a rank: the whole pass goes to CudaOps's
  // own grouped kernel, a chunk's range of 8 would not by its own count. Classic and MoK
  // (shadow never, shadow always): outputs, input and gate gradients and the experts' weight
  // gradients bit for bit.
  constexpr int kWideE = 64, kChunks = 4;
  constexpr int64_t kWideTokens = 16384;  // about 1 000 rows an expert: a long reduction for its weight gradients
  std::vector<Routing> wide_routing;
  for (int r = 0; r < kRanks; ++r) wide_routing.push_back(random_routing(seed, 600 + 2 * r, kWideTokens, kK, kWideE));
  for (const std::string& transport : transports) mok::run_local_ranks(kRanks, [&](mok::Communicator& comm) {
    const int me = comm.rank();
    const int gpu = me % devices;
    const std::string tag = " (rank " + std::to_string(me) + " on cuda:" + std::to_string(gpu) + ")";
    mok::MemoryTracker tracker;
    mok::ScopedMemoryTracker track(tracker);
    std::unique_ptr<mok::ExecContext> cx = mok::make_exec_context(mok::Device::cuda(gpu), mok::DType::bf16);
    mok::ScopedExecContext scope(*cx);
    std::unique_ptr<mok::DataPlane> plane = mok::make_data_plane(comm, *cx, transport);
    const mok::ExpertPlacement place = mok::ExpertPlacement::contiguous(kWideE, kRanks);
    std::vector<bool> local(kWideE, false);
    for (int e : place.experts_on(me)) local[e] = true;
    auto rows_in_bf16 = [&](uint64_t stream) {
      const std::vector<float> v = normal_values(seed, stream, kWideTokens * kD);
      mok::Tensor f = cx->upload(v.data(), {kWideTokens, kD}, mok::DType::f32);
      mok::Tensor b = cx->activation({kWideTokens, kD});
      cx->ops().convert(f, b);
      return b;
    };
    auto to_floats = [&](const mok::Tensor& t) {
      if (t.dtype() == mok::DType::f32) return download<float>(t);
      mok::Tensor f = cx->empty(t.shape(), mok::DType::f32);
      cx->ops().convert(t, f);
      return download<float>(f);
    };
    for (const std::string which : {"classic", "mok shadow never", "mok shadow always"}) {
      LayerResult of[2];  // one chunk, kChunks
      int mok_chunks = 0;
      for (int i = 0; i < 2; ++i) {
        const int chunks = i == 0 ? 1 : kChunks;
        mok::ExpertBank bank =
            mok::make_stacked_expert_bank(expert_specs(kWideE), local, kD, kF, 0.3, 0.2, 0, "moe.expert");
        std::unique_ptr<mok::ExpertDispatcher> dispatcher;
        if (which == "classic") {
          auto c = std::make_unique<mok::ClassicDispatcher>(*plane, place);
          c->set_overlap_chunks(chunks);
          dispatcher = std::move(c);
        } else {
          mok::MokOptions opt;
          opt.expert_hidden = kF;
          opt.overlap_chunks = chunks;
          opt.cost.mode = which == "mok shadow never" ? mok::ShadowMode::never : mok::ShadowMode::always;
          dispatcher = std::make_unique<mok::MokDispatcher>(*plane, place, opt);
        }
        mok::RoutingDecision d =
            mok::routing_decision_from(wide_routing[me].expert, wide_routing[me].gate, kK, kWideE);
        const mok::Tensor x = rows_in_bf16(700 + me), dy = rows_in_bf16(710 + me);
        mok::Tensor dgate;
        of[i].y = to_floats(dispatcher->forward(x, d, bank, true));
        of[i].dx = to_floats(dispatcher->backward(dy, bank, dgate));
        of[i].dgate = to_floats(dgate);
        for (int e : place.experts_on(me)) of[i].expert_grads.push_back(expert_grads(*bank.experts[e]));
        if (const auto* m = dynamic_cast<const mok::MokDispatcher*>(dispatcher.get()))
          mok_chunks = m->last_log().chunks;
      }
      const std::string what = which + " " + std::to_string(kChunks) + " chunks = 1, bf16, over " + transport;
      report(what + " forward" + tag, bitwise_error(of[1].y, of[0].y), 0.0);
      report(what + " dx" + tag, bitwise_error(of[1].dx, of[0].dx), 0.0);
      report(what + " dgate" + tag, bitwise_error(of[1].dgate, of[0].dgate), 0.0);
      double worst = 0.0;
      for (size_t e = 0; e < of[0].expert_grads.size(); ++e)
        worst = std::max(worst, bitwise_error(of[1].expert_grads[e], of[0].expert_grads[e]));
      report(what + " expert weight gradients" + tag, worst, 0.0);
      if (which != "classic") report(what + " ran in chunks" + tag, mok_chunks == kChunks ? 0.0 : 1.0, 0.0);
    }
    cx->ops().synchronize();
  });
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace mok::cuda
