// The plan's size-class rounding of the parameter state (core/plan/parameter_block_rounding.h)
// against the host's block cache, which rounds with the same classes: after building a model
// and its AdamW state, the cache's live block bytes exceed the tracker's tensor bytes by what
// the plan says (dense and MoE layers, a shared expert, an untied head, experts over ranks),
// and a GPU plan shows the rounding as its own part only where there is some; the same for
// generation's parameter values alone (no gradients, no optimizer).
#include <QtTest>

#include <optional>

#include "core/model/init.h"
#include "core/model/language_model.h"
#include "core/plan/generation_plan.h"
#include "core/plan/memory_plan.h"
#include "core/plan/parameter_block_rounding.h"
#include "core/tensor/block_cache.h"
#include "core/tensor/memory_tracker.h"
#include "core/tensor/size_class.h"
#include "core/train/adamw.h"

using namespace mok;

namespace {

// Widths chosen to round: d 96 (q/k/v 3·96·96 floats), experts of 36, a dense hidden of 72.
ExperimentConfig awkward(int ranks) {
  ExperimentConfig c;
  c.data.seq_len = 16;
  c.model.layers = 3;
  c.model.d_model = 96;
  c.model.heads = 4;
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.expert_hidden = 36;
  c.model.dense_hidden = 72;
  c.model.moe_layers = "1,2";
  c.model.shared_expert = true;
  c.model.tie_embeddings = false;
  c.parallel.ranks = ranks;
  return c;
}

// Block bytes beyond tensor bytes of a model and its AdamW state (forward_only: the values
// alone, as generation builds them), one rank's share.
double measured_rounding(const ExperimentConfig& c, bool forward_only = false) {
  ModelOptions o;
  o.model = c.model;
  o.vocab_size = 256;
  o.max_seq_len = c.data.seq_len;
  if (c.parallel.ranks > 1) {  // this rank's experts only: the first E/R
    o.local_experts.assign(size_t(c.model.experts), false);
    for (int e = 0; e < c.model.experts / c.parallel.ranks; ++e) o.local_experts[size_t(e)] = true;
  }
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  BlockCache::trim();
  const int64_t before = BlockCache::live_bytes();
  std::optional<ForwardOnlyParameters> no_gradients;
  if (forward_only) no_gradients.emplace();
  LanguageModel model(o);
  std::optional<AdamW> adam;
  if (!forward_only) adam.emplace(model.parameters(), AdamWOptions{});
  // The RoPE table and other model-level tensors are tracked too: everything live is.
  return double(BlockCache::live_bytes() - before - tracker.live_total());
}

}  // namespace

class TestParameterBlockRounding : public QObject {
  Q_OBJECT
 private slots:
  void planMatchesTheHostCache() {
    if (!BlockCache::reuses_across_sizes()) QSKIP("the cache's accounting is the same, but this build maps no large blocks");
    for (int ranks : {1, 2}) {
      const ExperimentConfig c = awkward(ranks);
      const double planned = parameter_block_rounding(c, 64, false);
      const double measured = measured_rounding(c);
      qInfo("ranks %d: planned %.0f bytes of rounding, measured %.0f", ranks, planned, measured);
      QVERIFY2(planned > 16 * 1024, qPrintable(QString("planned %1").arg(planned)));
      // Tensors outside the parameter state (the RoPE table) round too: a few KiB at most.
      QVERIFY2(measured >= planned && measured - planned <= 8 * 1024,
               qPrintable(QString("ranks %1: planned %2, measured %3").arg(ranks).arg(planned).arg(measured)));
    }
  }

  void generationPlanMatchesTheHostCache() {
    if (!BlockCache::reuses_across_sizes()) QSKIP("the cache's accounting is the same, but this build maps no large blocks");
    for (int ranks : {1, 2}) {
      const ExperimentConfig c = awkward(ranks);
      const double planned = parameter_block_rounding(c, 64, false, ParameterState::forward_only);
      const double measured = measured_rounding(c, true);
      qInfo("generation, ranks %d: planned %.0f bytes of rounding, measured %.0f", ranks, planned, measured);
      QVERIFY2(planned > 4 * 1024, qPrintable(QString("planned %1").arg(planned)));
      QVERIFY(planned < parameter_block_rounding(c, 64, false));  // no gradients, no moments
      QVERIFY2(measured >= planned && measured - planned <= 8 * 1024,
               qPrintable(QString("ranks %1: planned %2, measured %3").arg(ranks).arg(planned).arg(measured)));
    }
    // A GPU's generation plan shows it as its own part; the CPU's has none.
    ExperimentConfig g = awkward(1);
    g.parallel.device = "cuda";
    const GenerationShape shape;
    QCOMPARE(estimate_generation_memory(g, shape).memory.bytes_of("allocator_rounding"),
             parameter_block_rounding(g, kDeviceBlockAlign, true, ParameterState::forward_only));
    g.parallel.device = "cpu";
    QCOMPARE(estimate_generation_memory(g, shape).memory.bytes_of("allocator_rounding"), 0.0);
  }

  void gpuPlanShowsItsOwnPart() {
    ExperimentConfig c = awkward(1);
    c.parallel.device = "cuda";
    const MemoryEstimate e = estimate_memory(c);
    QCOMPARE(e.bytes_of("allocator_rounding"), parameter_block_rounding(c, kDeviceBlockAlign, true));
    QVERIFY(e.bytes_of("allocator_rounding") > 0.0);
    // Widths that are whole size classes round by nothing, and then there is no such part.
    ExperimentConfig even = c;
    even.model.d_model = 128;
    even.model.expert_hidden = 64;
    even.model.dense_hidden = 128;
    even.model.tie_embeddings = true;
    QCOMPARE(parameter_block_rounding(even, kDeviceBlockAlign, true), 0.0);
    for (const MemoryEstimate::Part& p : estimate_memory(even).parts) QVERIFY(p.category != "allocator_rounding");
    // The CPU plan has none: the host's limit is on tensors (the tracker), not blocks.
    c.parallel.device = "cpu";
    QCOMPARE(estimate_memory(c).bytes_of("allocator_rounding"), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestParameterBlockRounding)
#include "test_parameter_block_rounding.moc"
