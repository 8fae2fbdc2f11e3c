// Times training steps (forward + backward) of the quickstart-sized model on the CPU and
// prints figures; it never passes or fails. Not part of the build: after building mok_nn,
//   g++ -O3 -std=c++20 -I. tools/bench/bench_model_step.cpp build/core/libmok_nn.a \
//       build/core/libmok_util.a -lopenblas -lpthread -o build/bench_model_step
//   build/bench_model_step [threads=2] [steps=5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "core/model/language_model.h"
#include "core/tensor/memory_tracker.h"
#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

int main(int argc, char** argv) {
  using namespace mok;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  ThreadPool pool(threads);
  ScopedThreadPool scope(pool);
  MemoryTracker tracker;
  ScopedMemoryTracker mscope(tracker);
  ModelOptions o;  // ModelConfig defaults are the quickstart model
  o.vocab_size = 256;
  o.max_seq_len = 128;
  LanguageModel model(o);
  const int batch = 16, seq = 128;
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (int i = 0; i < batch * seq; ++i) {
    tokens[i] = static_cast<int32_t>(counter_bits(1, 1, i) % 256);
    targets[i] = static_cast<int32_t>(counter_bits(1, 2, i) % 256);
  }
  std::printf("parameters %lld, threads %d, batch %d, seq %d\n",
              static_cast<long long>(model.parameter_count()), threads, batch, seq);
  // FNV-1a over the bits of the loss and every gradient: equal fingerprints mean a speed
  // change left the results bitwise identical.
  auto fingerprint = [&](double loss) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void* p, size_t n) {
      const auto* b = static_cast<const unsigned char*>(p);
      for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    mix(&loss, sizeof loss);
    for (Parameter* p : model.parameters()) mix(p->grad.data(), p->grad.bytes());
    return h;
  };
  double total_ms = 0, total_cpu_ms = 0;
  for (int s = 0; s <= steps; ++s) {
    model.zero_grad();
    const std::clock_t c0 = std::clock();  // process CPU time: all threads, immune to other load
    const auto t0 = std::chrono::steady_clock::now();
    ForwardStats st = model.forward(tokens.data(), targets.data(), batch, seq);
    const auto t1 = std::chrono::steady_clock::now();
    model.backward(1.0);
    const auto t2 = std::chrono::steady_clock::now();
    const double fwd = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double bwd = std::chrono::duration<double, std::milli>(t2 - t1).count();
    const double cpu = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    if (s > 0) total_ms += fwd + bwd, total_cpu_ms += cpu;  // step 0 is warm-up
    std::printf("step %d: loss %.4f forward %.1f ms backward %.1f ms (cpu %.1f ms) fingerprint %016llx\n", s,
                st.loss, fwd, bwd, cpu, static_cast<unsigned long long>(fingerprint(st.loss)));
  }
  std::printf("mean step %.1f ms wall, %.1f ms cpu (%.0f tokens/s); peak saved activations %.1f MiB\n", total_ms / steps, total_cpu_ms / steps,
              batch * seq / (total_ms / steps / 1000.0),
              tracker.peak_bytes(MemCategory::saved_activations) / 1048576.0);
  std::printf("saved activations at their peak, layer 0 and model level (KiB):\n");
  for (const auto& [key, k] : tracker.saved_by_layer_kind())
    if (key.first <= 0) std::printf("  layer %2d %-24s %10.1f\n", key.first, key.second.c_str(), k.peak / 1024.0);
  return 0;
}
