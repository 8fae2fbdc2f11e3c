// mok_train_fingerprint: prints one hash per fixed training run, over every metric value
// the run logs except wall-time figures, so two builds can be compared bitwise:
//
//   build/tools/check/mok_train_fingerprint [--steps N] [--config PATH]
//
// Runs (no store, no checkpoints):
//   1. the quickstart experiment shortened to N steps (default 20), 2 threads, one rank;
//   2. the same over R = 2 local ranks with MoK dispatch (2 threads each).
// The hash is FNV-1a (64 bit) over, row by row: step, tokens, then each value's name and the
// 8 bytes of its double. Left out: perf/* and comm/modeled_ms (wall time) and wall_s.
// Equal fingerprints ⇔ (up to hash collisions) bitwise equal metrics.

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/config/config_io.h"
#include "core/train/trainer.h"

namespace {

struct Fnv1a64 {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  }
  template <class T>
  void add_value(const T& v) {
    add(&v, sizeof v);
  }
};

bool wall_time_figure(const std::string& name) { return name.rfind("perf/", 0) == 0 || name == "comm/modeled_ms"; }

class FingerprintSink : public mok::MetricSink {
 public:
  Fnv1a64 hash;
  int64_t rows = 0, values = 0;
  double last_loss = 0.0;
  void on_metrics(const mok::MetricRow& row) override {
    ++rows;
    hash.add_value(row.step);
    hash.add_value(row.tokens);
    for (const mok::MetricValue& v : row.values) {
      if (v.name == "train/loss") last_loss = v.value;
      if (wall_time_figure(v.name)) continue;
      ++values;
      hash.add(v.name.data(), v.name.size());
      hash.add_value(v.value);
    }
  }
};

int run(const std::string& label, const mok::ExperimentConfig& config) {
  mok::TrainerOptions options;
  options.write_checkpoints = false;
  mok::Trainer trainer(config, options);
  FingerprintSink sink;
  const mok::TrainResult r = trainer.run({&sink});
  if (r.status != mok::RunStatus::finished) {
    std::fprintf(stderr, "%s: %s\n", label.c_str(), r.message.c_str());
    return 1;
  }
  std::printf("%-34s rows %3lld  values %5lld  last train/loss %.17g  fingerprint %016llx\n", label.c_str(),
              static_cast<long long>(sink.rows), static_cast<long long>(sink.values), sink.last_loss,
              static_cast<unsigned long long>(sink.hash.h));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = std::string(MOK_SOURCE_DIR) + "/experiments/quickstart.yaml";
  int steps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: mok_train_fingerprint [--steps N] [--config PATH]\n");
      return 2;
    }
  }
  try {
    const std::string n = "train.steps=" + std::to_string(steps);
    const mok::ExperimentConfig one = mok::load_experiment_config(config_path, {n, "parallel.threads=2"});
    const mok::ExperimentConfig two = mok::load_experiment_config(
        config_path, {n, "parallel.threads=2", "parallel.ranks=2", "parallel.comm=local", "routing.dispatcher=mok"});
    int rc = run("quickstart R=1 threads=2", one);
    rc |= run("quickstart R=2 local, mok dispatch", two);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok_train_fingerprint: %s\n", e.what());
    return 2;
  }
}
