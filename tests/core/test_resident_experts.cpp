// How many MoE layers a generating rank holds whole (core/train/resident_experts.h): explicit
// counts are taken as asked (capped at the MoE layers), auto fills a GPU's memory as the
// generation plan prices it — no layer where the plan alone does not fit, every layer where
// all fit, and exactly as many as the room left holds in between — and holds none on CPU
// ranks, with classic dispatch or on one rank.
#include <QtTest>

#include <cmath>

#include "core/model/language_model.h"
#include "core/plan/generation_plan.h"
#include "core/train/resident_experts.h"

using namespace mok;

namespace {

// A 64 × 256 MoE shape on two GPU ranks, MoK dispatch (plan only: nothing runs).
ExperimentConfig gpu_moe() {
  ExperimentConfig c;
  c.model.layers = 12;
  c.model.d_model = 1024;
  c.model.heads = 16;
  c.model.experts = 64;
  c.model.top_k = 8;
  c.model.expert_hidden = 256;
  c.model.moe_layers = "all";
  c.data.seq_len = 1024;
  c.parallel.ranks = 2;
  c.parallel.device = "cuda";
  c.routing.dispatcher = "mok";
  return c;
}

double part(const ExperimentConfig& c, const GenerationShape& s, const std::string& name) {
  for (const MemoryEstimate::Part& p : estimate_generation_memory(c, s).memory.parts)
    if (p.category == name) return p.bytes;
  return 0.0;
}

}  // namespace

class TestResidentExperts : public QObject {
  Q_OBJECT

 private slots:
  void explicitCountsAreTakenAsAsked() {
    const ExperimentConfig c = gpu_moe();
    const GenerationShape s{64, 128, 64, 0};
    QCOMPARE(resident_layer_count("off", c, s, 0), 0);
    QCOMPARE(resident_layer_count("0", c, s, 0), 0);
    QCOMPARE(resident_layer_count("3", c, s, 0), 3);
    QCOMPARE(resident_layer_count("40", c, s, 0), 12);
    QCOMPARE(resident_layer_count("all", c, s, 0), 12);
    ExperimentConfig one = c;
    one.parallel.ranks = 1;
    QCOMPARE(resident_layer_count("all", one, s, 0), 0);  // one rank holds every expert already
  }

  void autoFillsWhatTheGpuLeaves() {
    const ExperimentConfig c = gpu_moe();
    const GenerationShape s{64, 128, 64, 0};
    const double base = estimate_generation_memory(c, s).memory.total_bytes();
    GenerationShape one = s;
    one.resident_layers = 1;
    const double per_layer = part(c, one, "resident_experts");
    // 32 experts not owned × 3·1024·256 weights × 2 bytes (the bf16 copies alone: no masters)
    QCOMPARE(per_layer, 32.0 * 3 * 1024 * 256 * 2);
    auto gpu = [&](double room) { return (base + room) / 0.9; };  // capacity that leaves `room` to the plan
    QCOMPARE(resident_layer_count("auto", c, s, gpu(-1.0)), 0);
    QCOMPARE(resident_layer_count("auto", c, s, gpu(0.5 * per_layer)), 0);
    QCOMPARE(resident_layer_count("auto", c, s, gpu(4.5 * per_layer)), 4);
    QCOMPARE(resident_layer_count("auto", c, s, gpu(100.0 * per_layer)), 12);
    QCOMPARE(resident_layer_count("off", c, s, gpu(100.0 * per_layer)), 0);
    QCOMPARE(resident_layer_count("0", c, s, gpu(100.0 * per_layer)), 0);
    // parallel.device_memory_limit wins over the device's size.
    ExperimentConfig limited = c;
    limited.parallel.device_memory_limit = std::to_string(static_cast<int64_t>(base + 2.5 * per_layer));
    QCOMPARE(resident_layer_count("auto", limited, s, gpu(100.0 * per_layer)), 2);
    // Not MoK, not a GPU: none.
    ExperimentConfig classic = c;
    classic.routing.dispatcher = "classic";
    QCOMPARE(resident_layer_count("auto", classic, s, gpu(100.0 * per_layer)), 0);
    ExperimentConfig cpu = c;
    cpu.parallel.device = "cpu";
    QCOMPARE(resident_layer_count("auto", cpu, s, 0), 0);
  }

  void everyMoeLayerResidentLeavesNoCommunication() {
    const ExperimentConfig c = gpu_moe();
    GenerationShape s{64, 128, 64, 11};
    QVERIFY(part(c, s, "communication") > 0.0);
    s.resident_layers = 12;
    QCOMPARE(part(c, s, "communication"), 0.0);
    QCOMPARE(part(c, s, "resident_experts"), 12.0 * 32 * 3 * 1024 * 256 * 2);
  }

  void theMaskTakesTheFirstMoeLayers() {
    ModelConfig m;
    m.layers = 6;
    m.experts = 8;
    m.moe_layers = "every_2";  // layers 1, 3, 5
    const std::vector<bool> two = resident_layer_mask(m, 2);
    QCOMPARE(two, (std::vector<bool>{false, true, false, true, false, false}));
    QCOMPARE(resident_layer_mask(m, 0), std::vector<bool>(6, false));
    QCOMPARE(resident_layer_mask(m, 9), (std::vector<bool>{false, true, false, true, false, true}));
  }

  void problemsNameTheSetting() {
    ExperimentConfig c = gpu_moe();
    QCOMPARE(resident_experts_problem("all", c), std::string());
    QCOMPARE(resident_experts_problem("7", c), std::string());
    QVERIFY(resident_experts_problem("-1", c).find("unknown '-1'") != std::string::npos);
    QVERIFY(resident_experts_problem("half", c).find("auto, off, all") != std::string::npos);
    c.routing.dispatcher = "classic";
    QVERIFY(resident_experts_problem("all", c).find("--dispatcher mok") != std::string::npos);
    QCOMPARE(resident_experts_problem("auto", c), std::string());
    QCOMPARE(resident_experts_problem("off", c), std::string());
  }
};

QTEST_GUILESS_MAIN(TestResidentExperts)
#include "test_resident_experts.moc"
