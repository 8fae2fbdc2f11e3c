// The whole training step on the GPU against the CPU core: the same model (same seed, so the
// same initial weights, to an ulp in rare elements: check_initial_weights), the same batches,
// 20 steps of forward, backward, clipping and AdamW.
//   fp32 on the GPU matches the CPU's losses within 1e-4 relative at every step;
//   bf16 on the GPU tracks fp32 within 3e-2 relative (bf16 keeps 8 bits of mantissa; the
//     losses of 20 steps stay this close when the step is right and drift far when not);
//   a repeated bf16 run gives bitwise the same losses, gradient norms and weights.
// print_model_timings: training tokens/s, model-FLOPs utilisation and peak device memory
// of the benchmark models (bf16, 16 × 1024 tokens per step).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/backend/step_graph.h"
#include "core/model/batched_inference_session.h"
#include "core/model/init.h"
#include "core/model/language_model.h"
#include "core/tensor/memory_tracker.h"
#include "core/train/adamw.h"
#include "core/train/checkpoint.h"
#include "core/train/grad_clip.h"
#include "core/util/counter_rng.h"
#include "kernels/checks/check_util.h"
#include "kernels/cuda_ops.h"

namespace mok::cuda {

namespace {

struct Case {
  std::string name;
  mok::ModelOptions options;
  int batch, seq;
};

struct RunResult {
  std::vector<double> losses, grad_norms;
  std::vector<double> kitten;  // kittens/rank and kittens/error of every layer, step by step
  std::vector<double> router;  // aux and z losses, step by step (MoE)
  std::vector<int64_t> load;   // every MoE layer's expert load, step by step
  std::vector<float> weights;  // every parameter, concatenated (host copy)
  int64_t saved_peak = 0;      // peak bytes of saved activations (the tracker's, on the run's device)
};

// A learnable byte stream: each token follows from the previous one with a little noise.
void make_batch(uint64_t seed, int step, int batch, int seq, int vocab, std::vector<int32_t>& tokens,
                std::vector<int32_t>& targets) {
  tokens.resize(static_cast<size_t>(batch) * seq);
  targets.resize(tokens.size());
  for (int b = 0; b < batch; ++b) {
    int32_t prev = static_cast<int32_t>(counter_bits(seed, 1000 + step, b) % vocab);
    for (int s = 0; s <= seq; ++s) {
      const int32_t next = static_cast<int32_t>((prev * 5 + 1 + counter_bits(seed, step, b * 4096 + s) % 3) % vocab);
      if (s < seq) tokens[static_cast<size_t>(b) * seq + s] = prev;
      if (s > 0) targets[static_cast<size_t>(b) * seq + s - 1] = prev;
      prev = next;
    }
  }
}

// record_at ≥ 0: the forward and backward of that step are recorded as a step graph
// (core/backend/step_graph.h) and every later step replays it; recorded: whether that worked.
RunResult train(const Case& c, mok::ExecContext& cx, int steps, int record_at = -1, bool* recorded = nullptr) {
  mok::ScopedExecContext scope(cx);
  mok::MemoryTracker tracker;
  mok::ScopedMemoryTracker track(tracker);
  mok::LanguageModel model(c.options);
  const auto params = model.parameters();
  mok::AdamW adam(params, mok::AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  RunResult r;
  std::vector<int32_t> tokens(static_cast<size_t>(c.batch) * c.seq), targets(tokens.size());
  std::unique_ptr<mok::StepGraph> graph;
  mok::PendingForwardStats recorded_stats;  // read again after each replay
  if (recorded) *recorded = false;
  for (int step = 0; step < steps; ++step) {
    make_batch(7, step, c.batch, c.seq, c.options.vocab_size, tokens, targets);  // same size: same memory
    model.set_step(step);  // as the trainer does: a kitten policy's error sums start afresh
    model.zero_grad();
    if (step == record_at) {
      graph = cx.ops().make_step_graph();
      graph->add_input(tokens.data(), tokens.size() * sizeof(int32_t));
      graph->add_input(targets.data(), targets.size() * sizeof(int32_t));
      try {
        if (!model.replayable_from(step)) throw std::runtime_error("the kitten settings choose per step");
        graph->record([&] {
          recorded_stats = model.forward_pending(tokens.data(), targets.data(), c.batch, c.seq);
          model.backward(1.0);
        });
        model.step_recorded();
        if (recorded) *recorded = true;
      } catch (const std::exception&) {
        graph.reset();
      }
    }
    double loss = 0.0;
    mok::ForwardStats stats;
    if (graph) {
      graph->replay();
      model.step_replayed();
      r.grad_norms.push_back(mok::clip_grad_norm(params, 1.0));
      adam.step(2e-3);
      const mok::CrossEntropySum s = graph->cross_entropy_sums().at(0);
      loss = s.loss_sum / static_cast<double>(s.count);
      stats = recorded_stats.resolve();
    } else {
      stats = model.forward(tokens.data(), targets.data(), c.batch, c.seq);
      loss = stats.loss;
      model.backward(1.0);
      r.grad_norms.push_back(mok::clip_grad_norm(params, 1.0));
      adam.step(2e-3);
    }
    r.losses.push_back(loss);
    r.router.push_back(stats.aux_loss);
    r.router.push_back(stats.z_loss);
    for (const auto& layer : stats.expert_load) r.load.insert(r.load.end(), layer.begin(), layer.end());
    for (const auto& [name, value] : model.kitten_metrics()) r.kitten.push_back(value);
  }
  r.saved_peak = tracker.peak_bytes(mok::MemCategory::saved_activations, cx.device().type);
  for (const mok::Parameter* p : params) {
    std::vector<float> host(static_cast<size_t>(p->value.numel()));
    p->value.copy_to_host(host.data(), p->value.bytes());
    r.weights.insert(r.weights.end(), host.begin(), host.end());
  }
  cx.ops().synchronize();
  return r;
}

double max_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(std::fabs(b[i]), 1e-12));
  }
  return worst;
}

bool same_bits(const RunResult& a, const RunResult& b) {
  return a.losses == b.losses && a.grad_norms == b.grad_norms && a.kitten == b.kitten && a.router == b.router &&
         a.load == b.load &&
         a.weights.size() == b.weights.size() &&
         std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)) == 0;
}

mok::ModelOptions small_options(int experts, bool shared, double capacity) {
  mok::ModelOptions o;
  o.model.layers = 2;
  o.model.d_model = 128;
  o.model.heads = 4;  // head width 32
  o.model.dense_hidden = 256;
  o.model.experts = experts;
  o.model.top_k = 2;
  o.model.expert_hidden = 96;
  o.model.shared_expert = shared;
  o.routing.capacity_factor = capacity;
  o.vocab_size = 64;
  o.max_seq_len = 96;
  o.seed = 11;
  return o;
}

// Every parameter of a model (host copy, the master's values) built on `cx`.
std::vector<float> initial_weights(const mok::ModelOptions& options, mok::ExecContext& cx) {
  mok::ScopedExecContext scope(cx);
  mok::LanguageModel model(options);
  std::vector<float> all;
  for (mok::Parameter* p : model.parameters()) {
    const size_t at = all.size();
    all.resize(at + static_cast<size_t>(p->value.numel()));
    p->value.copy_to_host(all.data() + at, p->value.bytes());
  }
  return all;
}

// The initial weights a GPU draws (Ops::gaussian_fill, core/model/init.cpp) against the
// host's draw of the same model: at most one ulp of float apart, the rare elements where
// the device's log or cos rounds otherwise.
void check_initial_weights(std::vector<OpCheck>& out) {
  run_guarded(out, "model.initial_weights", [&] {
    const mok::ModelOptions options = small_options(4, true, 0.0);
    const std::vector<float> want = initial_weights(options, mok::cpu_context());
    auto fp32 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
    const std::vector<float> got = initial_weights(options, *fp32);
    const UlpDistance d = ulp_distance(got, want);
    out.push_back({"model.initial_weights.ulps_vs_cpu", d.worst_ulps, 1.0});
    std::printf("  initial weights drawn on the GPU: %.0f of %zu differ from the CPU's, at most %.0f ulp\n", d.differ,
                want.size(), d.worst_ulps);
  });
}

}  // namespace

void check_kitten_training(std::vector<OpCheck>& out);

void check_model_training(CheckInputs&, std::vector<OpCheck>& out) {
  const std::vector<Case> cases = {
      {"dense", small_options(0, false, 0.0), 4, 96},
      {"moe", small_options(4, true, 0.0), 4, 96},
      {"moe.capacity", small_options(8, false, 1.0), 4, 64},
  };
  check_initial_weights(out);
  constexpr int kSteps = 20;
  for (const Case& c : cases) {
    run_guarded(out, "model." + c.name, [&] {
      const RunResult cpu = train(c, mok::cpu_context(), kSteps);
      auto fp32 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
      const RunResult gpu32 = train(c, *fp32, kSteps);
      out.push_back({"model." + c.name + ".fp32_vs_cpu.loss", max_relative(gpu32.losses, cpu.losses), 1e-4});
      out.push_back({"model." + c.name + ".fp32_vs_cpu.grad_norm", max_relative(gpu32.grad_norms, cpu.grad_norms), 1e-3});
      auto bf16 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
      const RunResult a = train(c, *bf16, kSteps);
      const RunResult b = train(c, *bf16, kSteps);
      out.push_back({"model." + c.name + ".bf16_vs_fp32.loss", max_relative(a.losses, gpu32.losses), 3e-2});
      out.push_back({"model." + c.name + ".bf16.repeat (bitwise)", same_bits(a, b) ? 0.0 : INFINITY, 0.0});
      std::printf("  %-14s loss step 1 / %d: cpu %.5f → %.5f, gpu fp32 %.5f → %.5f, bf16 %.5f → %.5f\n",
                  c.name.c_str(), kSteps, cpu.losses.front(), cpu.losses.back(), gpu32.losses.front(),
                  gpu32.losses.back(), a.losses.front(), a.losses.back());
    });
  }
  check_kitten_training(out);
}

// Steps replayed from a recorded step graph (core/backend/step_graph.h) from step 3 on: the
// same losses, gradient norms, weights, router losses and expert loads as op by op, bit for
// bit, with a fresh batch reaching every replay. A bf16 MoE step (its grouped products take
// the expert offsets on the device) replays; in fp32 (the products read the offsets on the
// host) and with a capacity (the kept rows size the step) it cannot be recorded, and the
// attempt leaves the run as it was. Dense with the kitten defaults (low-bit copies, the same
// every step) replays too, its error metrics the op-by-op run's; with a low-rank sketch
// (fitted anew each step) it is refused. Short (8 steps), for compute-sanitizer too.
void check_decode_graphs(std::vector<OpCheck>& out);
void check_forward_only_models(std::vector<OpCheck>& out);

void check_step_graphs(CheckInputs&, std::vector<OpCheck>& out) {
  constexpr int kSteps = 8;
  mok::ModelOptions kitten = small_options(0, false, 0.0);
  kitten.kittens.mode = "kitten";
  mok::ModelOptions sketch = kitten;
  sketch.kittens.kinds["attn.qkv.input"] = {"sketch", 8, -1};
  const std::vector<Case> cases = {
      {"dense", small_options(0, false, 0.0), 4, 96},
      {"dense.kitten", kitten, 4, 96},
      {"dense.kitten_sketch", sketch, 4, 96},
      {"moe", small_options(4, true, 0.0), 4, 96},
      {"moe.no_shared", small_options(8, false, 0.0), 4, 96},
      {"moe.capacity", small_options(8, false, 1.0), 4, 64},
  };
  for (const Case& c : cases) {
    run_guarded(out, "graph." + c.name, [&] {
      for (const mok::DType dtype : {mok::DType::bf16, mok::DType::f32}) {
        const bool moe = c.options.model.experts > 0;
        const bool recordable = c.name != "dense.kitten_sketch" && c.name != "moe.capacity" &&
                                (!moe || dtype == mok::DType::bf16);
        auto cx = mok::make_exec_context(mok::Device::cuda(0), dtype);
        const std::string name = "graph." + c.name + "." + mok::dtype_name(dtype);
        const RunResult eager = train(c, *cx, kSteps);
        bool recorded = false;
        const RunResult replayed = train(c, *cx, kSteps, 2, &recorded);
        out.push_back({name + (recordable ? " recorded" : " refused"), recorded == recordable ? 0.0 : INFINITY, 0.0});
        RunResult without_metrics = replayed;
        without_metrics.kitten = eager.kitten;
        out.push_back({name + " replayed = op by op (losses, norms, weights, router losses, loads bitwise)",
                       same_bits(without_metrics, eager) ? 0.0 : INFINITY, 0.0});
        if (!eager.kitten.empty())
          out.push_back({name + " replayed = op by op (kitten metrics bitwise)",
                         replayed.kitten == eager.kitten ? 0.0 : INFINITY, 0.0});
        if (moe && !eager.load.empty())
          std::printf("  %s: expert loads of the last step %lld …, aux %.6f\n", name.c_str(),
                      static_cast<long long>(eager.load.back()), eager.router[eager.router.size() - 2]);
      }
    });
  }
  check_decode_graphs(out);
  check_forward_only_models(out);
}

// Decode steps replayed from a recorded one (BatchedInferenceSession::set_replay): two
// sessions over one model, the same prompts, then 10 decode steps fed the same tokens (the
// op-by-op session's greedy choices): every step's logits bitwise the same, and steps
// replayed where the model allows it (dense in bf16 and fp32; MoE in bf16), none where not
// (MoE in fp32: its products read the offsets on the host).
void check_decode_graphs(std::vector<OpCheck>& out) {
  constexpr int kBatch = 6, kPrompt = 9, kDecodes = 10;
  const std::vector<Case> cases = {
      {"dense", small_options(0, false, 0.0), kBatch, kPrompt},
      {"moe", small_options(4, true, 0.0), kBatch, kPrompt},
  };
  for (const Case& c : cases) {
    for (const mok::DType dtype : {mok::DType::bf16, mok::DType::f32}) {
      const std::string name = "graph.decode." + c.name + "." + mok::dtype_name(dtype);
      run_guarded(out, name, [&] {
        auto cx = mok::make_exec_context(mok::Device::cuda(0), dtype);
        mok::ScopedExecContext scope(*cx);
        mok::LanguageModel model(c.options);
        const bool replayable = c.options.model.experts == 0 || dtype == mok::DType::bf16;
        mok::BatchedInferenceSession eager(model, kBatch), replayed(model, kBatch);
        replayed.set_replay(true);
        std::vector<int32_t> prompts(static_cast<size_t>(kBatch) * kPrompt);
        for (size_t i = 0; i < prompts.size(); ++i)
          prompts[i] = static_cast<int32_t>(counter_bits(23, 1, i) % c.options.vocab_size);
        std::vector<mok::real> a = eager.prefill(prompts, kPrompt), b = replayed.prefill(prompts, kPrompt);
        double differing = a == b ? 0.0 : 1.0;
        const int vocab = c.options.vocab_size;
        std::vector<int32_t> next(kBatch);
        for (int step = 0; step < kDecodes; ++step) {
          for (int s = 0; s < kBatch; ++s)
            next[s] = static_cast<int32_t>(std::max_element(a.begin() + s * vocab, a.begin() + (s + 1) * vocab) -
                                           (a.begin() + s * vocab));
          a = eager.decode(next);
          b = replayed.decode(next);
          differing += a == b ? 0.0 : 1.0;
        }
        out.push_back({name + " replayed = op by op (steps whose logits differ)", differing, 0.0});
        const bool did = replayed.replayed_steps() > 0;
        out.push_back({name + (replayable ? " replayed" : " refused"), did == replayable ? 0.0 : INFINITY, 0.0});
        std::printf("  %s: %lld of %d decode steps replayed\n", name.c_str(),
                    static_cast<long long>(replayed.replayed_steps()), kDecodes);
      });
    }
  }
}

// Forward-only models (ForwardOnlyParameters, core/model/init.h) keep their bf16 copies alone,
// no fp32 masters. Against a model built for training with the same seed (the same copies):
//   a prefill and 10 greedy decode steps give bitwise the same logits;
//   the parameter tensors take 2 bytes a weight (the tracker's "parameters"), against 6;
//   weights loaded from a checkpoint of the training-built model (each through a transient
//     fp32 buffer on the device) into a forward-only model of another seed give those logits
//     again, and saving the forward-only model is refused.
void check_forward_only_models(std::vector<OpCheck>& out) {
  constexpr int kBatch = 5, kPrompt = 7, kDecodes = 10;
  const std::vector<Case> cases = {
      {"dense", small_options(0, false, 0.0), kBatch, kPrompt},
      {"moe", small_options(4, true, 0.0), kBatch, kPrompt},
  };
  for (const Case& c : cases) {
    const std::string name = "forward_only." + c.name + ".bf16";
    run_guarded(out, name, [&] {
      auto cx = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
      mok::ScopedExecContext scope(*cx);
      mok::MemoryTracker tracker;
      mok::ScopedMemoryTracker tracked(tracker);
      auto parameter_bytes = [&] { return tracker.live_bytes(mok::MemCategory::parameters); };
      int64_t before = parameter_bytes();
      mok::LanguageModel full(c.options);
      const int64_t full_bytes = parameter_bytes() - before;
      before = parameter_bytes();
      std::unique_ptr<mok::LanguageModel> lean, loaded;
      {
        const mok::ForwardOnlyParameters forward_only;
        lean = std::make_unique<mok::LanguageModel>(c.options);
        mok::ModelOptions other = c.options;
        other.seed += 1;  // other values, so that the load must replace every one
        loaded = std::make_unique<mok::LanguageModel>(other);
      }
      const int64_t lean_bytes = (parameter_bytes() - before) / 2;
      const double weights = static_cast<double>(full.parameter_count());
      out.push_back({name + " parameter bytes a weight, training-built (6)", std::fabs(full_bytes / weights - 6.0), 0.0});
      out.push_back({name + " parameter bytes a weight, forward-only (2)", std::fabs(lean_bytes / weights - 2.0), 0.0});
      std::printf("  %s: %.0f weights, %lld parameter bytes built for training, %lld forward-only\n", name.c_str(),
                  weights, static_cast<long long>(full_bytes), static_cast<long long>(lean_bytes));

      const std::string dir = "/tmp/mok-forward-only-check-" + std::to_string(::getpid()) + "-" + c.name;
      mok::save_checkpoint(dir, full.parameters(), nullptr, mok::TrainerState{}, "");
      mok::load_model_weights(dir, loaded->parameters());
      bool refused = false;
      try {
        mok::save_checkpoint(dir + "-lean", lean->parameters(), nullptr, mok::TrainerState{}, "");
      } catch (const mok::CheckpointError&) {
        refused = true;
      }
      mok::remove_checkpoint(dir);
      out.push_back({name + " saving a forward-only model refused", refused ? 0.0 : INFINITY, 0.0});

      std::vector<int32_t> prompts(static_cast<size_t>(kBatch) * kPrompt);
      for (size_t i = 0; i < prompts.size(); ++i)
        prompts[i] = static_cast<int32_t>(counter_bits(29, 1, i) % c.options.vocab_size);
      mok::BatchedInferenceSession a(full, kBatch), b(*lean, kBatch), l(*loaded, kBatch);
      std::vector<mok::real> la = a.prefill(prompts, kPrompt), lb = b.prefill(prompts, kPrompt),
                             ll = l.prefill(prompts, kPrompt);
      double differ_lean = la == lb ? 0.0 : 1.0, differ_loaded = la == ll ? 0.0 : 1.0;
      const int vocab = c.options.vocab_size;
      std::vector<int32_t> next(kBatch);
      for (int step = 0; step < kDecodes; ++step) {
        for (int s = 0; s < kBatch; ++s)
          next[s] = static_cast<int32_t>(std::max_element(la.begin() + s * vocab, la.begin() + (s + 1) * vocab) -
                                         (la.begin() + s * vocab));
        la = a.decode(next);
        lb = b.decode(next);
        ll = l.decode(next);
        differ_lean += la == lb ? 0.0 : 1.0;
        differ_loaded += la == ll ? 0.0 : 1.0;
      }
      out.push_back({name + " = training-built (steps whose logits differ)", differ_lean, 0.0});
      out.push_back({name + " loaded from its checkpoint = training-built (steps whose logits differ)", differ_loaded, 0.0});
    });
  }
}

// Kitten activations (kittens.mode: kitten — 4-bit linear inputs, 8-bit elementwise copies,
// recomputed norm outputs) in the same step:
//   fp32 on the GPU tracks the CPU within 1e-3 relative (the codes are the CPU's on equal
//     inputs, but a GEMM's rounding can move a value across a 4-bit rounding boundary);
//   bf16 repeats bitwise;
//   saved-activation bytes (the tracker's peak) are at most half of exact's in bf16.
void check_kitten_training(std::vector<OpCheck>& out) {
  run_guarded(out, "model.kitten", [&] {
    constexpr int kSteps = 20;
    const Case exact{"moe", small_options(4, true, 0.0), 4, 96};
    Case kitten = exact;
    kitten.options.kittens.mode = "kitten";
    kitten.options.train_steps = kSteps;
    const RunResult cpu = train(kitten, mok::cpu_context(), kSteps);
    auto fp32 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
    const RunResult gpu32 = train(kitten, *fp32, kSteps);
    out.push_back({"model.kitten.fp32_vs_cpu.loss", max_relative(gpu32.losses, cpu.losses), 1e-3});
    auto bf16 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
    const RunResult a = train(kitten, *bf16, kSteps);
    const RunResult b = train(kitten, *bf16, kSteps);
    const RunResult e = train(exact, *bf16, kSteps);
    out.push_back({"model.kitten.bf16.repeat (bitwise)", same_bits(a, b) ? 0.0 : INFINITY, 0.0});
    out.push_back({"model.kitten.bf16_vs_exact.loss", max_relative(a.losses, e.losses), 5e-2});
    const double ratio = e.saved_peak ? static_cast<double>(a.saved_peak) / static_cast<double>(e.saved_peak) : INFINITY;
    out.push_back({"model.kitten.bf16.saved_bytes_vs_exact", ratio, 0.5});
    std::printf("  kitten        loss step 1 / %d: cpu %.5f → %.5f, gpu fp32 %.5f → %.5f, bf16 %.5f → %.5f "
                "(exact bf16 → %.5f); saved peak bf16 %.2f MiB vs exact %.2f MiB (%.3f)\n",
                kSteps, cpu.losses.front(), cpu.losses.back(), gpu32.losses.front(), gpu32.losses.back(),
                a.losses.front(), a.losses.back(), e.losses.back(), a.saved_peak / 1048576.0,
                e.saved_peak / 1048576.0, ratio);
  });
}

// Run with the kittens group (lowrank_kitten_checks.cpp).
// Low-rank kitten activations (kittens.mode: custom, method sketch / rsvd / subspace at rank 8,
// every linear input; elementwise tensors 8-bit, norm outputs recomputed) in the same step:
//   fp32 on the GPU tracks the CPU within 1e-3 relative (sketch: the same Q; rsvd and
//     subspace: the same projector from a different orthonormalization, and 8-bit copies
//     whose rounding boundaries a GEMM's last bit can cross);
//   bf16 repeats bitwise;
//   fp32 saved-activation peak on the GPU = the CPU's to the byte (sketch, subspace: factors
//     of n·r floats whatever the routing; rsvd's B is r_e × d per expert with r_e =
//     min(r, rows of expert e), so it is printed, not compared).
void check_lowrank_kitten_training(std::vector<OpCheck>& out) {
  for (const char* method : {"sketch", "rsvd", "subspace"}) {
    const std::string name = std::string("model.kitten_") + method;
    run_guarded(out, name, [&] {
      constexpr int kSteps = 20;
      Case c{"moe", small_options(4, true, 0.0), 4, 96};
      c.options.kittens.mode = "custom";
      c.options.kittens.method = method;
      c.options.kittens.rank = 8;
      c.options.kittens.refresh_every = 5;
      c.options.train_steps = kSteps;
      const RunResult cpu = train(c, mok::cpu_context(), kSteps);
      auto fp32 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
      const RunResult gpu32 = train(c, *fp32, kSteps);
      out.push_back({name + ".fp32_vs_cpu.loss", max_relative(gpu32.losses, cpu.losses), 1e-3});
      if (std::string(method) != "rsvd")
        out.push_back({name + ".fp32.saved_peak == cpu", gpu32.saved_peak == cpu.saved_peak ? 0.0 : INFINITY, 0.0});
      auto bf16 = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
      const RunResult a = train(c, *bf16, kSteps);
      const RunResult b = train(c, *bf16, kSteps);
      out.push_back({name + ".bf16.repeat (bitwise)", same_bits(a, b) ? 0.0 : INFINITY, 0.0});
      std::printf("  %-14s loss step 1 / %d: cpu %.5f → %.5f, gpu fp32 %.5f → %.5f, bf16 %.5f → %.5f; saved peak "
                  "cpu %lld, gpu fp32 %lld, bf16 %lld bytes\n",
                  method, kSteps, cpu.losses.front(), cpu.losses.back(), gpu32.losses.front(), gpu32.losses.back(),
                  a.losses.front(), a.losses.back(), static_cast<long long>(cpu.saved_peak),
                  static_cast<long long>(gpu32.saved_peak), static_cast<long long>(a.saved_peak));
    });
  }
}

namespace {

// The benchmark models of docs/benchmarks.md ("GPU: one H200 against PyTorch"): 12 layers,
// d_model 768, 12 heads, byte vocabulary, bf16, 16 × 1024 tokens per step.
struct Bench {
  const char* name;
  int experts, top_k, expert_hidden, dense_hidden;
  const char* kittens;  // kittens.mode
};
constexpr int kBenchBatch = 16, kBenchSeq = 1024;

mok::ModelOptions bench_options(const Bench& b) {
  mok::ModelOptions o;
  o.model.layers = 12;
  o.model.d_model = 768;
  o.model.heads = 12;
  o.model.dense_hidden = b.dense_hidden;
  o.model.experts = b.experts;
  o.model.top_k = b.top_k;
  o.model.expert_hidden = b.expert_hidden;
  o.vocab_size = 256;
  o.max_seq_len = kBenchSeq;
  o.seed = 1234;
  o.kittens.mode = b.kittens;
  return o;
}

// Model FLOPs per token: 6 × active matmul weights (attention, MLP or the k chosen experts +
// router, tied head) + causal attention 6·layers·seq·d.
double bench_flops_per_token(const Bench& b) {
  const double d = 768, L = 12;
  const double per_layer_mlp =
      b.experts ? b.top_k * 3.0 * d * b.expert_hidden + d * b.experts : 3.0 * d * b.dense_hidden;
  const double active = L * (4.0 * d * d + per_layer_mlp) + 256.0 * d;
  return 6.0 * active + 6.0 * L * kBenchSeq * d;
}

// A benchmark model on the GPU; step() runs one optimizer step and returns its wall time in
// seconds (device work included).
struct BenchRun {
  std::unique_ptr<mok::ExecContext> cx;
  mok::MemoryTracker tracker;
  std::unique_ptr<mok::LanguageModel> model;
  std::vector<mok::Parameter*> params;
  std::unique_ptr<mok::AdamW> adam;
  std::vector<int32_t> tokens, targets;

  explicit BenchRun(const Bench& b) : cx(mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16)) {
    mok::ScopedExecContext scope(*cx);
    mok::ScopedMemoryTracker track(tracker);
    model = std::make_unique<mok::LanguageModel>(bench_options(b));
    params = model->parameters();
    adam = std::make_unique<mok::AdamW>(params, mok::AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  }
  double step(int index) {
    mok::ScopedExecContext scope(*cx);
    mok::ScopedMemoryTracker track(tracker);
    random_batch(index);
    cx->ops().synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    model->zero_grad();
    model->forward(tokens.data(), targets.data(), kBenchBatch, kBenchSeq);
    model->backward(1.0);
    adam->step(3e-4, mok::clip_factor(mok::global_grad_norm(params), 1.0));  // as TrainStep clips
    cx->ops().synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  CudaOps& ops() { return static_cast<CudaOps&>(cx->ops()); }

  // Uniform random bytes: from initialisation the router then spreads tokens about evenly,
  // as it does on text (make_batch's stream is so regular that a few steps of training
  // crowd it onto a few experts, which times a different product).
  void random_batch(int index) {
    tokens.resize(static_cast<size_t>(kBenchBatch) * kBenchSeq);
    targets.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>(counter_bits(3, 2 * index, i) % 256);
      targets[i] = static_cast<int32_t>(counter_bits(3, 2 * index + 1, i) % 256);
    }
  }
};

const Bench kBenches[] = {{"dense 85M", 0, 2, 1024, 2048, "exact"},
                          {"moe 8x1024 top-2", 8, 2, 1024, 2048, "exact"},
                          {"moe 64x256 top-8", 64, 8, 256, 2048, "exact"}};
// Profiled: the benchmarks and the coarse MoE with kitten activations.
const Bench kProfiled[] = {kBenches[0], kBenches[1], kBenches[2], {"moe 8x1024 top-2 kitten", 8, 2, 1024, 2048, "kitten"}};

}  // namespace

void print_model_timings() {
  const int warmup = 3, steps = 10;
  std::printf("\n%-18s %12s %10s %8s %12s %12s\n", "model (bf16)", "tokens/s", "step ms", "MFU %", "peak GiB",
              "reserved GiB");
  for (const Bench& b : kBenches) {
    try {
      BenchRun run(b);
      double seconds = 0.0;
      for (int step = 0; step < warmup + steps; ++step) {
        const double s = run.step(step);
        if (step >= warmup) seconds += s;
      }
      const double tps = kBenchBatch * kBenchSeq * steps / seconds;
      std::printf("%-18s %12.0f %10.2f %8.1f %12.2f %12.2f\n", b.name, tps, 1e3 * seconds / steps,
                  100.0 * tps * bench_flops_per_token(b) / 797e12,
                  run.tracker.peak_total(mok::DeviceType::cuda) / 1073741824.0,
                  run.ops().caching_allocator().peak_reserved_bytes() / 1073741824.0);
    } catch (const std::exception& e) {
      std::printf("%-18s failed: %s\n", b.name, e.what());
    }
  }
}

// Where a step's device time goes, op by op (kernels/op_profiler.h), over a few profiled
// steps after warm-up. The first column is device ms per step; "host gaps" is the step's
// wall time not covered by any op: the GPU waiting for the host.
void print_model_profile(const std::vector<std::string>& models, int top) {
  const int warmup = 3, steps = 3;
  for (const Bench& b : kProfiled) {
    if (!models.empty() && std::find(models.begin(), models.end(), b.name) == models.end()) continue;
    try {
      BenchRun run(b);
      for (int step = 0; step < warmup; ++step) run.step(step);
      run.ops().start_op_profile();
      double seconds = 0.0;
      for (int step = warmup; step < warmup + steps; ++step) seconds += run.step(step);
      char title[96];
      std::snprintf(title, sizeof title, "%s (bf16, %d x %d)", b.name, kBenchBatch, kBenchSeq);
      std::fputs(run.ops().op_profile_report(title, steps, seconds, top).c_str(), stdout);
    } catch (const std::exception& e) {
      std::printf("profile %s failed: %s\n", b.name, e.what());
    }
  }
}

}  // namespace mok::cuda
