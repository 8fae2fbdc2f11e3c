// Activation checkpointing (train.activation_checkpointing, TransformerBlock checkpoint): a
// training forward keeps only each block's input, and backward runs the block's forward again.
// The recomputed forward is the same operations on the same input, so:
//   - on one model (a dense and a MoE layer with a shared expert) the loss and every gradient
//     are bitwise those of a forward that keeps everything, over steps that change the weights;
//   - the saved bytes after forward are one (tokens, d) input per block plus the model-level
//     tensors, to the byte what the plan says (core/plan/saved_activation_plan.h);
//   - the trainer over two local ranks with MoK dispatch gives bitwise the same metrics with
//     and without checkpointing (the second forward's exchanges are the first one's again);
//   - the config refuses checkpointing together with kittens.
#include <QtTest>

#include <cstring>
#include <map>
#include <vector>

#include "core/config/config_check.h"
#include "core/model/language_model.h"
#include "core/plan/saved_activation_plan.h"
#include "core/train/trainer.h"
#include "core/util/counter_rng.h"
#include "support/tiny_experiment.h"

using namespace mok;

namespace {

// Two layers: 0 dense, 1 MoE with a shared expert; dropless.
ExperimentConfig small_config(bool checkpointing) {
  ExperimentConfig c;
  c.seed = 11;
  c.data.tokenizer = "byte";
  c.data.seq_len = 32;
  c.train.batch = 4;
  c.train.steps = 10;
  c.model.layers = 2;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.expert_hidden = 48;
  c.model.dense_hidden = 80;
  c.model.moe_layers = "1";
  c.model.shared_expert = true;
  c.model.tie_embeddings = false;
  c.routing.capacity_factor = 0.0;
  c.train.activation_checkpointing = checkpointing;
  return c;
}

ModelOptions options_of(const ExperimentConfig& c) {
  ModelOptions o;
  o.model = c.model;
  o.routing = c.routing;
  o.vocab_size = 256;
  o.max_seq_len = c.data.seq_len;
  o.seed = c.seed;
  o.train_steps = c.train.steps;
  o.checkpoint_blocks = c.train.activation_checkpointing;
  return o;
}

struct Step {
  double loss = 0.0;
  std::vector<std::vector<real>> grads;
  std::map<std::pair<int, std::string>, int64_t> saved;  // after forward, by (layer, kind)
};

// Three steps of plain SGD (so later steps see changed weights), each recorded.
std::vector<Step> train(const ExperimentConfig& c, MemoryTracker& tracker) {
  ScopedMemoryTracker scope(tracker);
  LanguageModel m(options_of(c));
  const int n = c.train.batch * c.data.seq_len;
  std::vector<Step> steps;
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = static_cast<int32_t>(counter_bits(5, 1 + step, i) % 256);
      y[i] = static_cast<int32_t>(counter_bits(5, 100 + step, i) % 256);
    }
    m.zero_grad();
    Step s;
    s.loss = m.forward(x.data(), y.data(), c.train.batch, c.data.seq_len).loss;
    for (const auto& [key, b] : tracker.saved_by_layer_kind())
      if (b.live) s.saved[key] = b.live;
    m.backward();
    for (Parameter* p : m.parameters()) {
      s.grads.emplace_back(p->grad.data(), p->grad.data() + p->grad.numel());
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value[i] -= real(0.05) * p->grad[i];
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

}  // namespace

class TestActivationCheckpointing : public QObject {
  Q_OBJECT
 private slots:
  void gradientsAreBitwiseTheKeptForwards() {
    MemoryTracker tracker;
    const std::vector<Step> kept = train(small_config(false), tracker);
    const std::vector<Step> again = train(small_config(true), tracker);
    for (size_t s = 0; s < kept.size(); ++s) {
      QCOMPARE(std::memcmp(&kept[s].loss, &again[s].loss, sizeof(double)), 0);
      QCOMPARE(kept[s].grads.size(), again[s].grads.size());
      for (size_t i = 0; i < kept[s].grads.size(); ++i)
        QVERIFY2(std::memcmp(kept[s].grads[i].data(), again[s].grads[i].data(),
                             kept[s].grads[i].size() * sizeof(real)) == 0,
                 qPrintable(QString("step %1, parameter %2").arg(s).arg(i)));
    }
  }

  void keepsOneInputPerBlockAsPlanned() {
    MemoryTracker tracker;
    const ExperimentConfig c = small_config(true);
    const Step first = train(c, tracker).front();
    const int64_t tokens = int64_t(c.train.batch) * c.data.seq_len;
    for (int layer = 0; layer < c.model.layers; ++layer) {
      const auto it = first.saved.find({layer, "block.input"});
      QVERIFY(it != first.saved.end());
      QCOMPARE(it->second, tokens * c.model.d_model * int64_t(sizeof(real)));
    }
    // Nothing else of a layer is kept; the plan names exactly what the tracker holds.
    std::map<std::pair<int, std::string>, int64_t> planned;
    for (const PlannedSavedTensor& t : plan_saved_activations(c, 0))
      planned[{t.layer, t.kind}] += static_cast<int64_t>(t.bytes);
    QCOMPARE(first.saved, planned);
    // The plan's restore workspace is what the largest layer keeps when its forward runs
    // again: the kept run's bytes of that layer, less the norm input (the block input itself).
    const Step kept = train(small_config(false), tracker).front();
    double largest = 0.0;
    for (int layer = 0; layer < c.model.layers; ++layer) {
      double bytes = 0.0;
      for (const auto& [key, b] : kept.saved)
        if (key.first == layer && key.second != "attn_norm.input") bytes += double(b);
      largest = std::max(largest, bytes);
    }
    QCOMPARE(restore_workspace_bytes(plan_saved_activations(c, 0)), largest);
    QVERIFY(saved_activation_bytes(plan_saved_activations(c, 0)) <
            0.5 * saved_activation_bytes(plan_saved_activations(small_config(false), 0)));
  }

  void mokOverTwoRanksGivesTheSameMetrics() {
    QTemporaryDir tmp;
    const std::string corpus = (tmp.path() + "/corpus").toStdString();
    const std::string problem = test::copy_brown_sample(corpus);
    QVERIFY2(problem.empty(), problem.c_str());
    auto metrics = [&](bool checkpointing) {
      ExperimentConfig c = test::tiny_experiment(corpus, 8);
      c.train.steps = 6;
      c.train.eval_every = 3;
      c.train.eval_batches = 1;
      c.parallel.ranks = 2;
      c.parallel.comm = "local";
      c.routing.dispatcher = "mok";
      c.routing.shadow = "auto";
      c.train.activation_checkpointing = checkpointing;
      c.logging.checkpoint_dir = (tmp.path() + (checkpointing ? "/a" : "/b")).toStdString();
      struct Sink : MetricSink {
        std::map<std::string, double> values;  // "step/name" → value, the deterministic ones
        double peak_saved = 0.0;
        void on_metrics(const MetricRow& r) override {
          for (const auto& v : r.values) {
            if (v.name == "mem/peak_saved_activation_bytes") peak_saved = std::max(peak_saved, v.value);
            if (v.name.rfind("perf/", 0) != 0 && v.name.rfind("mem/", 0) != 0 && v.name.rfind("comm/", 0) != 0)
              values[std::to_string(r.step) + "/" + v.name] = v.value;
          }
        }
      } sink;
      TrainerOptions o;
      o.write_checkpoints = false;
      Trainer t(c, o);
      const TrainResult r = t.run({&sink});
      if (r.status != RunStatus::finished) qWarning("run: %s", r.message.c_str());
      return std::make_pair(sink.values, sink.peak_saved);
    };
    const auto [plain, plain_saved] = metrics(false);
    const auto [checkpointed, checkpointed_saved] = metrics(true);
    // Checkpointing was on: less was kept (the peak holds the block inputs and one block again).
    QVERIFY(checkpointed_saved > 0.0 && checkpointed_saved < 0.8 * plain_saved);
    QVERIFY(plain.count("6/train/loss"));
    QCOMPARE(plain.size(), checkpointed.size());
    for (const auto& [key, v] : plain) {
      const auto it = checkpointed.find(key);
      QVERIFY2(it != checkpointed.end(), key.c_str());
      QVERIFY2(std::memcmp(&v, &it->second, sizeof(double)) == 0,
               qPrintable(QString("%1: %2 vs %3").arg(key.c_str()).arg(v, 0, 'g', 17).arg(it->second, 0, 'g', 17)));
    }
  }

  void configRefusesCheckpointingWithKittens() {
    ExperimentConfig c = small_config(true);
    c.kittens.mode = "kitten";
    const auto issues = check_experiment_config(c);
    bool named = false;
    for (const auto& i : issues) named = named || i.key_path == "train.activation_checkpointing";
    QVERIFY(named);
    c.kittens.mode = "exact";
    for (const auto& i : check_experiment_config(c)) QVERIFY2(i.key_path != "train.activation_checkpointing", i.message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestActivationCheckpointing)
#include "test_activation_checkpointing.moc"
