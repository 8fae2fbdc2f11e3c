// Batched and expert-parallel generation on a tiny MoE model (2 layers, d_model 32, 8
// experts, top-2) trained 20 steps:
//   - the batched cached forward gives each sequence the logits of an InferenceSession run
//     on it alone (prefill and decode, equal and unequal positions);
//   - greedy generation over R = 2 local ranks, classic and MoK dispatch, gives R = 1's
//     tokens and logits within float rounding; repeats are bitwise identical;
//   - MoK sends no more payload bytes than classic for the same run, and its bytes_saved
//     is exactly the difference;
//   - resident MoE layers (every expert on every rank) give the dispatched run's tokens and
//     R = 1's logits within float rounding, send no row for those layers, hold exactly the
//     bytes the memory plan gives them, and are refused with classic dispatch;
//   - a seeded sampled sequence does not depend on R, and sequence 0 is TextGenerator's text
//     (also past the context, where every cache restarts); a batch that does not divide by
//     R is refused with a clear message.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/config/config_io.h"
#include "core/model/batched_inference_session.h"
#include "core/model/inference_session.h"
#include "core/model/language_model.h"
#include "core/plan/generation_plan.h"
#include "core/train/checkpoint.h"
#include "core/train/parallel_generation.h"
#include "core/train/text_generator.h"
#include "core/train/trainer.h"
#include "core/util/counter_rng.h"
#include "support/tiny_experiment.h"

namespace fs = std::filesystem;
using namespace mok;

namespace {

// Largest |a − b| over the largest |b| (at least 1): float rounding of reordered sums.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b, double* scale_out = nullptr) {
  double worst = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  if (scale_out) *scale_out = scale;
  return a.size() == b.size() ? worst / scale : INFINITY;
}

// The batched path regroups rows in GEMMs (B rows instead of 1, experts over a different
// set of rows), which changes float rounding only: measured ~1e-7 relative. 1e-5 is far
// below any real difference (a wrong position or cache moves logits by ~1e-1).
constexpr double kTol = 1e-5;

}  // namespace

class TestParallelGeneration : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string ckpt_;

  ParallelGenerateOptions greedy(int ranks, const std::string& dispatcher) {
    ParallelGenerateOptions o;
    o.batch = 4;
    o.ranks = ranks;
    o.dispatcher = dispatcher;
    o.max_new_tokens = 12;
    o.sampling.temperature = 0.0;
    o.prompts_from_data = 8;
    o.threads = 1;
    o.keep_logits = true;
    return o;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path corpus = fs::path(tmp_.path().toStdString()) / "corpus";
    fs::create_directories(corpus);
    const std::string missing = mok::test::copy_brown_sample(corpus);
    QVERIFY2(missing.empty(), missing.c_str());
    ExperimentConfig c = mok::test::tiny_experiment(corpus.string(), 8);
    c.name = "tiny-gen";
    c.train.steps = 20;
    c.train.warmup_steps = 2;
    c.train.eval_every = 20;
    c.train.eval_batches = 1;
    c.routing.dispatcher = "classic";
    c.routing.capacity_factor = 0;
    c.logging.checkpoint_dir = (tmp_.path() + "/ckpt").toStdString();
    c.logging.progress = false;
    Trainer t(c, TrainerOptions{});
    const TrainResult r = t.run({});
    QVERIFY2(r.status == RunStatus::finished, r.message.c_str());
    QVERIFY(!r.checkpoint_dir.empty());
    ckpt_ = r.checkpoint_dir;
  }

  void batchedForwardMatchesSingleSequences() {
    const ExperimentConfig cfg = parse_experiment_config(read_checkpoint_config(ckpt_), ckpt_);
    ModelOptions mo;
    mo.model = cfg.model;
    mo.routing = cfg.routing;
    mo.vocab_size = 256;
    mo.max_seq_len = cfg.data.seq_len;
    mo.seed = cfg.seed;
    LanguageModel model(mo);
    load_model_weights(ckpt_, model.parameters());

    const int B = 3, prompt = 5, steps = 6;
    std::vector<int32_t> prompts(B * prompt), feed(B * steps);
    for (size_t i = 0; i < prompts.size(); ++i) prompts[i] = static_cast<int32_t>(32 + counter_bits(2, 0, i) % 90);
    for (size_t i = 0; i < feed.size(); ++i) feed[i] = static_cast<int32_t>(32 + counter_bits(2, 1, i) % 90);

    // Alone: one InferenceSession per sequence.
    std::vector<std::vector<float>> alone(B);
    for (int b = 0; b < B; ++b) {
      InferenceSession s(model);
      auto l = s.prefill(std::vector<int32_t>(prompts.begin() + b * prompt, prompts.begin() + (b + 1) * prompt));
      alone[b].insert(alone[b].end(), l.begin(), l.end());
      for (int i = 0; i < steps; ++i) {
        l = s.decode(feed[b * steps + i]);
        alone[b].insert(alone[b].end(), l.begin(), l.end());
      }
    }
    // Together.
    BatchedInferenceSession session(model, B);
    std::vector<std::vector<float>> together(B);
    auto take = [&](const std::vector<float>& l) {
      QCOMPARE(static_cast<int>(l.size()), B * 256);
      for (int b = 0; b < B; ++b) together[b].insert(together[b].end(), l.begin() + b * 256, l.begin() + (b + 1) * 256);
    };
    take(session.prefill(prompts, prompt));
    for (int i = 0; i < steps; ++i) {
      std::vector<int32_t> t(B);
      for (int b = 0; b < B; ++b) t[b] = feed[b * steps + i];
      take(session.decode(t));
    }
    QCOMPARE(session.position(), prompt + steps);
    double worst = 0.0;
    for (int b = 0; b < B; ++b) {
      double scale = 0;
      worst = std::max(worst, relative_difference(together[b], alone[b], &scale));
      QVERIFY(scale > 1.0);
    }
    qInfo("batched vs alone: largest relative logit difference %.3g", worst);
    QVERIFY2(worst <= kTol, qPrintable(QString::number(worst)));
    // Different sequences get different logits (the rows are not mixed up).
    QVERIFY(relative_difference(together[0], together[1]) > 1e-3);

    // Unequal positions: sequence b holds b + 2 tokens, then one batched step.
    std::vector<std::vector<LayerKvCache>> caches;
    std::vector<int> pos;
    std::vector<std::vector<float>> expect(B);
    std::vector<int32_t> next(B);
    for (int b = 0; b < B; ++b) {
      caches.push_back(model.make_kv_cache(16));
      model.forward_cached(prompts.data() + b * prompt, b + 2, 0, caches.back());
      pos.push_back(b + 2);
      next[b] = feed[b];
      std::vector<LayerKvCache> alone_cache = model.make_kv_cache(16);
      model.forward_cached(prompts.data() + b * prompt, b + 2, 0, alone_cache);
      Tensor l = model.forward_cached(&next[b], 1, b + 2, alone_cache);
      expect[b].assign(l.data(), l.data() + 256);
    }
    Tensor l = model.forward_cached_batch(next.data(), B, 1, pos, caches);
    QCOMPARE(l.dim(0), int64_t(B));
    for (int b = 0; b < B; ++b) {
      const std::vector<float> got(l.data() + b * 256, l.data() + (b + 1) * 256);
      QVERIFY2(relative_difference(got, expect[b]) <= kTol, qPrintable(QString("sequence %1").arg(b)));
    }
  }

  void greedyOverRanksMatchesOneRank() {
    const ParallelGenerateResult one = generate_parallel(ckpt_, greedy(1, ""));
    QCOMPARE(one.ranks, 1);
    QCOMPARE(one.new_tokens, int64_t(4 * 12));
    QCOMPARE(static_cast<int>(one.tokens.size()), 4);
    QCOMPARE(one.remote_bytes, int64_t(0));
    QVERIFY(one.tokens[0] != one.tokens[1]);  // different prompts from the data
    for (const char* d : {"classic", "mok"}) {
      const ParallelGenerateResult two = generate_parallel(ckpt_, greedy(2, d));
      QCOMPARE(two.ranks, 2);
      QCOMPARE(QString::fromStdString(two.dispatcher), QString(d));
      QVERIFY(two.dispatch_bytes > 0);
      QVERIFY(two.combine_bytes > 0);
      double worst = 0.0;
      for (int b = 0; b < 4; ++b) {
        QVERIFY2(two.tokens[b] == one.tokens[b], qPrintable(QString("%1: sequence %2 differs").arg(d).arg(b)));
        QCOMPARE(two.texts[b], one.texts[b]);
        worst = std::max(worst, relative_difference(two.logits[b], one.logits[b]));
      }
      qInfo("%s, R = 2 vs R = 1: largest relative logit difference %.3g", d, worst);
      QVERIFY2(worst <= kTol, qPrintable(QString::number(worst)));
    }
  }

  void repeatsAreBitwiseIdentical() {
    for (const char* d : {"classic", "mok"}) {
      const ParallelGenerateResult a = generate_parallel(ckpt_, greedy(2, d));
      const ParallelGenerateResult b = generate_parallel(ckpt_, greedy(2, d));
      QCOMPARE(a.tokens, b.tokens);
      for (int s = 0; s < 4; ++s) {
        QCOMPARE(a.logits[s].size(), b.logits[s].size());
        QVERIFY(std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)) == 0);
      }
      QCOMPARE(a.remote_bytes, b.remote_bytes);
    }
  }

  void mokSendsNoMoreThanClassic() {
    ParallelGenerateOptions o = greedy(2, "classic");
    o.batch = 8;
    o.keep_logits = false;
    const ParallelGenerateResult c = generate_parallel(ckpt_, o);
    o.dispatcher = "mok";
    const ParallelGenerateResult m = generate_parallel(ckpt_, o);
    const int64_t classic_payload = c.dispatch_bytes + c.combine_bytes + c.weight_bytes;
    const int64_t mok_payload = m.dispatch_bytes + m.combine_bytes + m.weight_bytes;
    qInfo("payload bytes: classic %lld, mok %lld (saved %lld, %lld experts shadowed); remote bytes %lld vs %lld",
          static_cast<long long>(classic_payload), static_cast<long long>(mok_payload),
          static_cast<long long>(m.bytes_saved), static_cast<long long>(m.shadowed_experts),
          static_cast<long long>(c.remote_bytes), static_cast<long long>(m.remote_bytes));
    QCOMPARE(c.weight_bytes, int64_t(0));
    QVERIFY(mok_payload <= classic_payload);
    QCOMPARE(m.bytes_saved, classic_payload - mok_payload);
    QCOMPARE(c.tokens, m.tokens);
  }

  // routing.shadow=always: every remote expert a rank routes to is fetched (weights) and
  // computed locally; the text stays R = 1's and the saving (negative here) is still exact.
  void shadowedExpertsInInference() {
    ParallelGenerateOptions o = greedy(2, "classic");
    o.keep_logits = false;
    const ParallelGenerateResult c = generate_parallel(ckpt_, o);
    o.dispatcher = "mok";
    o.overrides = {"routing.shadow=always"};
    const ParallelGenerateResult m = generate_parallel(ckpt_, o);
    QVERIFY(m.shadowed_experts > 0);
    QVERIFY(m.weight_bytes > 0);
    QCOMPARE(m.tokens, c.tokens);
    const int64_t classic_payload = c.dispatch_bytes + c.combine_bytes;
    const int64_t mok_payload = m.dispatch_bytes + m.combine_bytes + m.weight_bytes;
    QCOMPARE(m.bytes_saved, classic_payload - mok_payload);
    o.overrides = {"routing.shadow=sometimes"};
    QVERIFY_THROWS_EXCEPTION(std::exception, generate_parallel(ckpt_, o));
  }

  void sampledSequenceDoesNotDependOnRanks() {
    ParallelGenerateOptions o = greedy(1, "");
    o.sampling.temperature = 0.9;
    o.seed = 11;
    o.batch = 2;
    o.prompts_from_data = 0;
    o.prompt = "The jury";
    const ParallelGenerateResult one = generate_parallel(ckpt_, o);
    o.ranks = 2;
    o.dispatcher = "mok";
    const ParallelGenerateResult two = generate_parallel(ckpt_, o);
    QCOMPARE(one.tokens, two.tokens);
    QVERIFY(QString::fromStdString(one.texts[0]).startsWith("The jury"));
    QVERIFY(one.tokens[0] != one.tokens[1]);  // same prompt, different streams
  }

  // Sequence 0 samples from TextGenerator's stream, and a run past the context (8 + 40 > 32
  // tokens) restarts every cache the way TextGenerator does: the same text, on 1 or 2 ranks.
  void sequenceZeroMatchesTextGenerator() {
    GenerateOptions g;
    g.max_new_tokens = 40;
    g.sampling.temperature = 0.8;
    g.seed = 5;
    TextGenerator gen(ckpt_);
    const GenerateResult single = gen.generate("The jury", g);
    ParallelGenerateOptions o = greedy(1, "");
    o.batch = 2;
    o.max_new_tokens = 40;
    o.sampling = g.sampling;
    o.seed = 5;
    o.prompts_from_data = 0;
    o.prompt = "The jury";
    o.keep_logits = false;
    for (int ranks : {1, 2}) {
      o.ranks = ranks;
      const ParallelGenerateResult r = generate_parallel(ckpt_, o);
      QCOMPARE(r.prompt_tokens, single.prompt_tokens);
      QVERIFY2(r.tokens[0] == single.tokens, qPrintable(QString("R = %1: ").arg(ranks) + QString::fromStdString(r.texts[0])));
      QCOMPARE(r.texts[0], single.text);
    }
  }

  // The fixed decode layout (every row to every rank, nothing counted: what GPU ranks use)
  // gives the counted layout's tokens and logits bit for bit, for both dispatchers, and moves
  // what it promises: classic k rows per token to the other rank, MoK one.
  void fixedDecodeLayoutMatchesCountedBitwise() {
    for (const char* d : {"classic", "mok"}) {
      ParallelGenerateOptions o = greedy(2, d);
      o.decode_layout = "counted";
      const ParallelGenerateResult counted = generate_parallel(ckpt_, o);
      o.decode_layout = "fixed";
      const ParallelGenerateResult fixed = generate_parallel(ckpt_, o);
      QCOMPARE(counted.decode_layout, std::string("counted"));
      QCOMPARE(fixed.decode_layout, std::string("fixed"));
      QCOMPARE(fixed.tokens, counted.tokens);
      for (int s = 0; s < 4; ++s) {
        QCOMPARE(fixed.logits[s].size(), counted.logits[s].size());
        QVERIFY2(std::memcmp(fixed.logits[s].data(), counted.logits[s].data(),
                             fixed.logits[s].size() * sizeof(float)) == 0,
                 d);
      }
      QVERIFY2(fixed.dispatch_bytes > counted.dispatch_bytes, d);  // the pads move too
    }
    // On CPU ranks auto counts (counting costs no wait there).
    QCOMPARE(generate_parallel(ckpt_, greedy(2, "mok")).decode_layout, std::string("counted"));
  }

  // Every MoE layer resident: no row crosses ranks, the texts and logits are R = 1's (the
  // experts see the same rows; only the grouping of the products changes), repeats are
  // bitwise, and the copies are exactly what the memory plan counts. One resident layer of
  // two: the other still dispatches, so fewer bytes than none resident but some.
  void residentLayersKeepTheTexts() {
    const ParallelGenerateResult one = generate_parallel(ckpt_, greedy(1, ""));
    ParallelGenerateOptions o = greedy(2, "mok");
    o.resident_experts = "off";
    const ParallelGenerateResult shipped = generate_parallel(ckpt_, o);
    QCOMPARE(shipped.resident_layers, 0);
    QCOMPARE(shipped.resident_bytes, int64_t(0));
    QVERIFY(shipped.dispatch_bytes > 0);

    o.resident_experts = "all";
    const ParallelGenerateResult all = generate_parallel(ckpt_, o);
    const ExperimentConfig cfg = parse_experiment_config(read_checkpoint_config(ckpt_), ckpt_);
    const std::vector<bool> mask = moe_layer_mask(cfg.model);
    const int moe_layers = static_cast<int>(std::count(mask.begin(), mask.end(), true));
    QVERIFY(moe_layers >= 2);
    QCOMPARE(all.resident_layers, moe_layers);
    QCOMPARE(all.decode_layout, std::string("none"));
    QCOMPARE(all.dispatch_bytes, int64_t(0));
    QCOMPARE(all.combine_bytes, int64_t(0));
    QCOMPARE(all.weight_bytes, int64_t(0));
    QCOMPARE(all.tokens, shipped.tokens);
    double worst = 0.0;
    for (int b = 0; b < 4; ++b) worst = std::max(worst, relative_difference(all.logits[b], one.logits[b]));
    qInfo("every MoE layer resident vs R = 1: largest relative logit difference %.3g", worst);
    QVERIFY2(worst <= kTol, qPrintable(QString::number(worst)));
    // The copies: the experts a rank does not own (E − E/R), 3·d·f weights each, fp32 here.
    const int64_t per_layer = int64_t(cfg.model.experts - cfg.model.experts / 2) * 3 * cfg.model.d_model *
                              cfg.model.expert_hidden * int64_t(sizeof(float));
    QCOMPARE(all.resident_bytes, moe_layers * per_layer);
    ExperimentConfig two = cfg;
    two.parallel.ranks = 2;
    const GenerationShape shape{4, 8, 12, moe_layers};
    double planned = -1.0;
    for (const MemoryEstimate::Part& p : estimate_generation_memory(two, shape).memory.parts)
      if (p.category == "resident_experts") planned = p.bytes;
    QCOMPARE(planned, static_cast<double>(all.resident_bytes));

    const ParallelGenerateResult again = generate_parallel(ckpt_, o);
    for (int b = 0; b < 4; ++b)
      QVERIFY(std::memcmp(again.logits[b].data(), all.logits[b].data(), all.logits[b].size() * sizeof(float)) == 0);

    o.resident_experts = "1";
    const ParallelGenerateResult first = generate_parallel(ckpt_, o);
    QCOMPARE(first.resident_layers, 1);
    QCOMPARE(first.resident_bytes, per_layer);
    QVERIFY(first.dispatch_bytes > 0);
    QVERIFY(first.dispatch_bytes < shipped.dispatch_bytes);
    QCOMPARE(first.tokens, shipped.tokens);

    // On CPU ranks auto holds none: a host message costs a CPU rank no wait for a device.
    o.resident_experts = "auto";
    QCOMPARE(generate_parallel(ckpt_, o).resident_layers, 0);
  }

  void badSplitIsRefused() {
    ParallelGenerateOptions o = greedy(2, "mok");
    o.batch = 3;
    const ExperimentConfig cfg = parse_experiment_config(read_checkpoint_config(ckpt_), ckpt_);
    const std::string why = parallel_generate_problem(cfg, o, 2);
    QVERIFY2(why.find("divide") != std::string::npos, why.c_str());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, generate_parallel(ckpt_, o));
    o.batch = 4;
    o.dispatcher = "nope";
    QVERIFY(!parallel_generate_problem(cfg, o, 2).empty());
    o.dispatcher = "classic";
    o.prompts_from_data = 33;  // longer than seq_len 32
    QVERIFY(!parallel_generate_problem(cfg, o, 2).empty());
    o.prompts_from_data = 8;
    o.decode_layout = "diagonal";
    QVERIFY(parallel_generate_problem(cfg, o, 2).find("decode layout") != std::string::npos);
    o.decode_layout = "fixed";
    QCOMPARE(parallel_generate_problem(cfg, o, 2), std::string());
    o.dispatcher = "mok";
    ExperimentConfig always = cfg;
    always.routing.shadow = "always";
    QVERIFY(parallel_generate_problem(always, o, 2).find("never shadows") != std::string::npos);
    o.decode_layout = "auto";
    o.resident_experts = "most";
    QVERIFY(parallel_generate_problem(cfg, o, 2).find("--resident-experts") != std::string::npos);
    o.resident_experts = "all";
    QCOMPARE(parallel_generate_problem(cfg, o, 2), std::string());
    o.dispatcher = "classic";
    QVERIFY(parallel_generate_problem(cfg, o, 2).find("MoK's") != std::string::npos);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, generate_parallel(ckpt_, o));
    for (const char* fine : {"auto", "off", "0"}) {
      o.resident_experts = fine;
      QCOMPARE(parallel_generate_problem(cfg, o, 2), std::string());
    }
  }
};

QTEST_GUILESS_MAIN(TestParallelGeneration)
#include "test_parallel_generation.moc"
