// Stacked experts: a GroupedSwiGlu over expert segments computes bitwise what separate
// SwiGluMlp experts compute on the same rows (forward, gated backward, weight gradients),
// with empty segments; each expert's named parameters are views of its block and start from
// the values a separate expert of that name and seed would have. A pass by ranges of experts
// (what a dispatcher whose rows arrive in chunks runs) gives the whole pass's bits.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/config/experiment_config.h"
#include "core/kittens/kitten_saved_input_policy.h"
#include "core/model/expert_bank.h"
#include "core/util/counter_rng.h"

using namespace mok;

namespace {

constexpr int kExperts = 4;
constexpr int64_t kD = 8, kF = 12;

std::vector<GroupedSwiGlu::ExpertSpec> specs() {
  std::vector<GroupedSwiGlu::ExpertSpec> s;
  for (int e = 0; e < kExperts; ++e) s.push_back({"moe.expert" + std::to_string(e), static_cast<uint64_t>(40 + e)});
  return s;
}

Tensor random_rows(int64_t rows, int64_t cols, uint64_t stream) {
  Tensor t({rows, cols});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<real>(counter_normal(5, stream, i));
  return t;
}

Tensor rows_of(const Tensor& t, int64_t r0, int64_t r1) {
  Tensor out({r1 - r0, t.dim(1)});
  std::memcpy(out.data(), t.data() + r0 * t.dim(1), out.bytes());
  return out;
}

bool same(const real* a, const real* b, int64_t n) { return std::memcmp(a, b, n * sizeof(real)) == 0; }

}  // namespace

class TestGroupedExperts : public QObject {
  Q_OBJECT
 private slots:
  void expertViewsStartFromTheirNamedValues() {
    ExpertBank bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    QCOMPARE(bank.grouped->groups(), kExperts);
    for (int e = 0; e < kExperts; ++e) {
      SwiGluMlp alone("moe.expert" + std::to_string(e), kD, kF, 0.3, 0.2, 40 + e, 0, "moe.expert", true);
      SwiGluMlp& view = *bank.experts[e];
      QCOMPARE(view.up().weight().name, alone.up().weight().name);
      QVERIFY(view.up().weight().value.is_view());
      QVERIFY(same(view.up().weight().value.data(), alone.up().weight().value.data(), kD * 2 * kF));
      QVERIFY(same(view.down().weight().value.data(), alone.down().weight().value.data(), kF * kD));
    }
  }

  void aBankOfSomeExpertsStacksOnlyThose() {
    ExpertBank bank = make_stacked_expert_bank(specs(), {false, true, false, true}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    QCOMPARE(bank.grouped->groups(), 2);
    QVERIFY(!bank.experts[0] && bank.experts[1] && !bank.experts[2] && bank.experts[3]);
    SwiGluMlp alone("moe.expert3", kD, kF, 0.3, 0.2, 43, 0, "moe.expert", true);
    QVERIFY(same(bank.experts[3]->up().weight().value.data(), alone.up().weight().value.data(), kD * 2 * kF));
  }

  void groupedEqualsSeparateExpertsBitwise_data() {
    QTest::addColumn<bool>("recompute_hidden");
    QTest::newRow("hidden kept") << false;
    QTest::newRow("hidden recomputed") << true;
  }

  void groupedEqualsSeparateExpertsBitwise() {
    QFETCH(bool, recompute_hidden);
    const std::vector<int64_t> offsets = {0, 5, 5, 17, 20};  // expert 1 gets no rows
    const int64_t m = offsets.back();
    ExpertBank bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    bank.grouped->set_recompute_hidden(recompute_hidden);
    std::vector<std::unique_ptr<SwiGluMlp>> alone;
    for (int e = 0; e < kExperts; ++e) {
      alone.push_back(std::make_unique<SwiGluMlp>("moe.expert" + std::to_string(e), kD, kF, 0.3, 0.2, 40 + e, 0,
                                                  "moe.expert", true));
      alone.back()->set_recompute_hidden(recompute_hidden);
    }
    const Tensor xs = random_rows(m, kD, 1), dys = random_rows(m, kD, 2), gate_rows = random_rows(m, 1, 3);
    Tensor gate = gate_rows.clone();
    gate.reshape({m});

    Tensor ys = bank.grouped->forward(xs.clone(), offsets, true);
    Tensor dgate({m});
    Tensor dxs = bank.grouped->backward_gated(dys, gate, dgate);

    for (int e = 0; e < kExperts; ++e) {
      const int64_t r0 = offsets[e], r1 = offsets[e + 1];
      if (r0 == r1) {
        // No rows: no gradient at all, as a separate expert that never ran.
        for (real g : bank.experts[e]->up().weight().grad.span()) QCOMPARE(g, real(0));
        continue;
      }
      Tensor y = alone[e]->forward(rows_of(xs, r0, r1), true);
      QVERIFY2(same(y.data(), ys.data() + r0 * kD, y.numel()), qPrintable(QString("forward of expert %1").arg(e)));
      Tensor g({r1 - r0}), dg({r1 - r0});
      std::memcpy(g.data(), gate.data() + r0, g.bytes());
      Tensor dx = alone[e]->backward_gated(rows_of(dys, r0, r1), &g, &dg);
      QVERIFY(same(dx.data(), dxs.data() + r0 * kD, dx.numel()));
      QVERIFY(same(dg.data(), dgate.data() + r0, dg.numel()));
      QVERIFY(same(alone[e]->up().weight().grad.data(), bank.experts[e]->up().weight().grad.data(), kD * 2 * kF));
      QVERIFY(same(alone[e]->down().weight().grad.data(), bank.experts[e]->down().weight().grad.data(), kF * kD));
    }
  }

  void rangesGiveTheWholePassBitwise_data() {
    QTest::addColumn<QString>("keeping");
    for (const char* k : {"exact", "hidden recomputed", "input rebuilt", "lowbit", "rsvd"})
      QTest::newRow(k) << QString(k);
  }

  // Experts [0, 1), [1, 3), [3, 4) one range after another (expert 1 has no rows) against one
  // pass: outputs, input and gate gradients, and weight gradients bit for bit, for each way
  // the inputs are kept for backward (whole, rebuilt, kitten copies of all rows or per expert).
  void rangesGiveTheWholePassBitwise() {
    QFETCH(QString, keeping);
    const std::vector<int64_t> offsets = {0, 5, 5, 17, 20};
    const int64_t m = offsets.back();
    const Tensor xs = random_rows(m, kD, 6), dys = random_rows(m, kD, 7), gate_rows = random_rows(m, 1, 8);
    Tensor gate = gate_rows.clone();
    gate.reshape({m});
    KittensConfig kc;
    kc.mode = "kitten";
    kc.method = keeping == "lowbit" ? "lowbit" : "rsvd";
    kc.rank = 3;
    const bool kittens = keeping == "lowbit" || keeping == "rsvd";
    const GroupedSwiGlu::InputRebuild rebuild = [&] { return xs.clone(); };
    struct Pass {
      std::unique_ptr<SavedInputPolicy> policy;
      ExpertBank bank;
      Tensor ys, dxs, dgate;
    };
    auto run = [&](bool by_ranges) {
      Pass p;
      p.bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
      GroupedSwiGlu& g = *p.bank.grouped;
      if (kittens) {
        p.policy = std::make_unique<KittenSavedInputPolicy>(kc, 1, 17, 10);
        g.set_policy(p.policy.get());
      }
      g.set_recompute_hidden(keeping == "hidden recomputed");
      g.set_rebuild_input(keeping == "input rebuilt");
      const GroupedSwiGlu::InputRebuild* rb = keeping == "input rebuilt" ? &rebuild : nullptr;
      p.dgate = Tensor({m});
      const std::vector<std::pair<int, int>> ranges = {{0, 1}, {1, 3}, {3, 4}};
      if (!by_ranges) {
        p.ys = g.forward(xs.clone(), offsets, true);
        Tensor dys_gated({m, kD});
        cpu_context().ops().scale_rows(dys, gate, dys_gated);
        p.dxs = g.backward_gated(dys, std::move(dys_gated), gate, p.dgate, rb);
        return p;
      }
      g.begin_forward(xs.clone(), offsets, true);
      for (auto [g0, g1] : ranges) g.forward_experts(g0, g1);
      p.ys = g.end_forward();
      g.begin_backward(gate, p.dgate, rb);
      for (auto [g0, g1] : ranges) g.backward_experts(dys, g0, g1);
      p.dxs = g.end_backward();
      return p;
    };
    const Pass whole = run(false), ranged = run(true);
    QVERIFY(same(ranged.ys.data(), whole.ys.data(), m * kD));
    QVERIFY(same(ranged.dxs.data(), whole.dxs.data(), m * kD));
    QVERIFY(same(ranged.dgate.data(), whole.dgate.data(), m));
    for (int e = 0; e < kExperts; ++e) {
      QVERIFY2(same(ranged.bank.experts[e]->up().weight().grad.data(), whole.bank.experts[e]->up().weight().grad.data(),
                    kD * 2 * kF),
               qPrintable(QString("up gradient of expert %1").arg(e)));
      QVERIFY2(same(ranged.bank.experts[e]->down().weight().grad.data(),
                    whole.bank.experts[e]->down().weight().grad.data(), kF * kD),
               qPrintable(QString("down gradient of expert %1").arg(e)));
    }
    // The gradients are not all zero (the comparison could fail).
    real sum = 0;
    for (real v : ranged.bank.experts[3]->up().weight().grad.span()) sum += std::abs(v);
    QVERIFY(sum > 0);
  }

  // A range of segments counts its rows from its first and keeps the whole pass's group
  // count, by which a GPU picks its product method (so the range rounds as the pass does).
  void segmentRangesKeepThePassGroupCount() {
    const RowSegments whole(std::vector<int64_t>{0, 5, 5, 17, 20});
    QCOMPARE(whole.pass_groups(), 4);
    const RowSegments mid = whole.range(1, 3);
    QCOMPARE(mid.groups(), 2);
    QCOMPARE(mid.rows(), int64_t(12));
    QCOMPARE(mid.host(), (std::vector<int64_t>{0, 0, 12}));
    QCOMPARE(mid.pass_groups(), 4);
    const RowSegments last = mid.range(1, 2);  // a range of a range: still the pass's count
    QCOMPARE(last.host(), (std::vector<int64_t>{0, 12}));
    QCOMPARE(last.pass_groups(), 4);
    const RowSegments copy = last;
    QCOMPARE(copy.pass_groups(), 4);
    QCOMPARE(whole.range(0, 4).host(), whole.host());
    QCOMPARE(whole.range(2, 2).rows(), int64_t(0));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, whole.range(3, 2));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, whole.range(0, 5));
  }

  void rangesGoInOrder() {
    ExpertBank bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    GroupedSwiGlu& g = *bank.grouped;
    const std::vector<int64_t> offsets = {0, 3, 6, 9, 12};
    QVERIFY_THROWS_EXCEPTION(std::logic_error, g.forward_experts(0, 1));  // no begin
    g.begin_forward(random_rows(12, kD, 9), offsets, false);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, g.forward_experts(1, 2));  // a gap
    g.forward_experts(0, 2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, g.end_forward());  // before the last range
    g.forward_experts(2, 4);
    QCOMPARE(g.end_forward().dim(0), int64_t(12));
    // A pass an exception left unfinished (a step recording that falls back to op by op) is
    // dropped by the next begin.
    g.begin_forward(random_rows(12, kD, 10), offsets, true);
    g.forward_experts(0, 1);
    QCOMPARE(g.forward(random_rows(12, kD, 11), offsets, false).dim(0), int64_t(12));
  }

  void keepsTheTakenRowsAsSavedActivationsWithoutACopy() {
    MemoryTracker tracker;
    ScopedMemoryTracker track(tracker);
    ExpertBank bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    const std::vector<int64_t> offsets = {0, 3, 6, 9, 12};
    Tensor xs = random_rows(12, kD, 4);
    const int64_t before = tracker.live_total();
    Tensor ys = bank.grouped->forward(std::move(xs), offsets, true);
    const auto saved = tracker.saved_by_layer_kind();
    QCOMPARE(saved.at({0, "moe.expert.up.input"}).live, int64_t(12 * kD * sizeof(real)));
    QCOMPARE(saved.at({0, "moe.expert.act.input"}).live, int64_t(12 * 2 * kF * sizeof(real)));
    QCOMPARE(saved.at({0, "moe.expert.down.input"}).live, int64_t(12 * kF * sizeof(real)));
    // xs itself became the saved copy: the live total grew by a, h and ys only.
    QCOMPARE(tracker.live_total() - before, int64_t((12 * 2 * kF + 12 * kF + 12 * kD) * sizeof(real)));
  }

  void refusesOffsetsThatDoNotFitTheRows() {
    ExpertBank bank = make_stacked_expert_bank(specs(), {}, kD, kF, 0.3, 0.2, 0, "moe.expert");
    using Offsets = std::vector<int64_t>;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             bank.grouped->forward(random_rows(6, kD, 5), RowSegments(Offsets{0, 2, 4, 5}), false));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             bank.grouped->forward(random_rows(6, kD, 5), RowSegments(Offsets{0, 2, 4, 5, 7}), false));
    // segments that are no segments: a first offset other than 0, offsets going back
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, RowSegments(Offsets{1, 2, 4, 5, 6}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, RowSegments(Offsets{0, 2, 1, 5, 6}));
  }
};

QTEST_GUILESS_MAIN(TestGroupedExperts)
#include "test_grouped_experts.moc"
