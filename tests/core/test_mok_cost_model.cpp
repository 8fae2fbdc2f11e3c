// MokCostModel: on known token counts it picks the cheaper side of the ship/shadow
// crossover (≈ 1.5·f rows when the gradient add is negligible), ties go to
// ship, forced modes are obeyed, own experts are never shadowed, and the decision is the
// same on every call; a choice to shadow never turns into one to ship as rows grow (what
// MokDispatcher relies on to skip the row shares when no expert could be shadowed). Weights
// sent in bf16 cost half, and their gradients still return as floats. The rule as data
// (ShadowRule, what a GPU decides with) agrees with estimate() on every row count.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/parallel/mok_cost_model.h"

using namespace mok;

class TestMokCostModel : public QObject {
  Q_OBJECT
 private slots:
  void crossoverIsOneAndAHalfHidden();
  void picksTheCheaperSide();
  void computeMovesTheCrossoverLatencyDoesNot();
  void forcedModesAndOwnExperts();
  void parsesModes();
  void shadowingIsMonotoneInRows();
  void bf16WeightsGoInHalfTheBytes();
  void ruleAsDataAgreesWithEstimate();
};

void TestMokCostModel::crossoverIsOneAndAHalfHidden() {
  // No latency, free compute: shadow = passes·3df·B/bw, ship = passes·2ud·B/bw.
  for (int64_t f : {int64_t{64}, int64_t{256}, int64_t{1024}}) {
    const MokCostModel m(MokCostParams{25.0, 0.0, 1e12, ShadowMode::automatic}, 128, f);
    QVERIFY(std::fabs(m.crossover_rows(true) - 1.5 * f) <= 1e-3 * f);
    QVERIFY(std::fabs(m.crossover_rows(false) - 1.5 * f) <= 1e-3 * f);
  }
}

void TestMokCostModel::picksTheCheaperSide() {
  const int64_t d = 128, f = 64;
  const MokCostModel m(MokCostParams{25.0, 2.0, 50.0, ShadowMode::automatic}, d, f);
  for (bool training : {true, false}) {
    const double x = m.crossover_rows(training);
    // the gradient add (training only) makes shadowing a little dearer
    if (training) QVERIFY(x > 1.5 * f); else QVERIFY(std::fabs(x - 1.5 * f) < 1e-9 * f);
    for (double rows : {1.0, 10.0, x * 0.9, x * 0.999, x * 1.001, x * 1.1, 4 * x, 1000.0}) {
      const MokCostEstimate c = m.estimate(rows, training);
      QCOMPARE(c.shadow, c.shadow_seconds < c.ship_seconds);
      QCOMPARE(c.shadow, rows > x);
      // bytes: ship 2·u·d·B per pass, shadow 3·d·f·B per pass
      const int passes = training ? 2 : 1;
      QCOMPARE(c.shadow_bytes, static_cast<int64_t>(passes * 3 * d * f * sizeof(real)));
      QCOMPARE(c.ship_bytes,
               static_cast<int64_t>(std::llround(passes * 2.0 * rows * d * sizeof(real))));
    }
    // decide() on a known count vector: experts 0, 1 owned elsewhere below / above the line.
    const std::vector<double> rows = {x * 0.5, x * 2.0, x * 3.0, 0.0};
    const std::vector<int> owner = {1, 1, 0, 1};
    const auto s = m.decide(rows, owner, 0, training);
    QCOMPARE(s, (std::vector<uint8_t>{0, 1, 0, 0}));  // expert 2 is ours; expert 3 unused
  }
}

void TestMokCostModel::computeMovesTheCrossoverLatencyDoesNot() {
  const MokCostModel fast(MokCostParams{250.0, 0.0, 1e12, ShadowMode::automatic}, 64, 64);
  const MokCostModel lat(MokCostParams{250.0, 20.0, 1e12, ShadowMode::automatic}, 64, 64);
  const MokCostModel slow_add(MokCostParams{250.0, 0.0, 0.1, ShadowMode::automatic}, 64, 64);
  // Messages are batched per rank pair: latency does not price one expert.
  QCOMPARE(lat.crossover_rows(true), fast.crossover_rows(true));
  QVERIFY(slow_add.crossover_rows(true) > fast.crossover_rows(true));
  // The gradient add only exists when training.
  QVERIFY(std::fabs(slow_add.crossover_rows(false) - fast.crossover_rows(false)) < 1e-9);
  // Exactly at the crossover the costs tie: ship.
  const MokCostModel m(MokCostParams{8.0, 0.0, 1e300, ShadowMode::automatic}, 4, 2);
  QVERIFY(!m.estimate(3.0, true).shadow);  // 1.5·f = 3 rows, exact in binary
  QVERIFY(m.estimate(3.0 + 1e-9, true).shadow);
}

void TestMokCostModel::forcedModesAndOwnExperts() {
  const std::vector<double> rows = {0.5, 5000.0, 7.0, 0.0};
  const std::vector<int> owner = {1, 1, 2, 2};
  const MokCostModel never(MokCostParams{25.0, 2.0, 50.0, ShadowMode::never}, 128, 64);
  const MokCostModel always(MokCostParams{25.0, 2.0, 50.0, ShadowMode::always}, 128, 64);
  QCOMPARE(never.decide(rows, owner, 0, true), (std::vector<uint8_t>{0, 0, 0, 0}));
  QCOMPARE(always.decide(rows, owner, 0, true), (std::vector<uint8_t>{1, 1, 1, 0}));
  QCOMPARE(always.decide(rows, owner, 1, true), (std::vector<uint8_t>{0, 0, 1, 0}));
  const MokCostModel automatic(MokCostParams{25.0, 2.0, 50.0, ShadowMode::automatic}, 128, 64);
  QCOMPARE(automatic.decide(rows, owner, 0, true), automatic.decide(rows, owner, 0, true));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           MokCostModel(MokCostParams{0.0, 2.0, 50.0, ShadowMode::automatic}, 128, 64));
}

void TestMokCostModel::parsesModes() {
  QCOMPARE(parse_shadow_mode("auto"), ShadowMode::automatic);
  QCOMPARE(parse_shadow_mode("never"), ShadowMode::never);
  QCOMPARE(parse_shadow_mode("always"), ShadowMode::always);
  QCOMPARE(std::string(shadow_mode_name(ShadowMode::always)), std::string("always"));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_shadow_mode("sometimes"));
}

void TestMokCostModel::shadowingIsMonotoneInRows() {
  for (ShadowMode mode : {ShadowMode::automatic, ShadowMode::never, ShadowMode::always})
    for (bool training : {true, false})
      for (int64_t f : {int64_t{16}, int64_t{256}, int64_t{1024}}) {
        const MokCostModel m(MokCostParams{450.0, 3.0, 2e5, mode, 2.0}, 768, f);
        bool shadowed = false;
        for (double rows = 0.125; rows < 1e6; rows *= 1.07) {
          const bool now = m.decide({rows}, {1}, 0, training)[0] != 0;
          QVERIFY2(!shadowed || now, qPrintable(QString("mode %1, f %2: shadow at fewer rows, ship at %3")
                                                    .arg(shadow_mode_name(mode)).arg(f).arg(rows)));
          shadowed = now;
        }
        QCOMPARE(shadowed, mode != ShadowMode::never);  // enough rows always pay for a copy
      }
}

void TestMokCostModel::bf16WeightsGoInHalfTheBytes() {
  const int64_t d = 128, f = 64, P = 3 * d * f;
  MokCostParams bf16{25.0, 0.0, 1e12, ShadowMode::automatic};
  bf16.row_value_bytes = 2.0;
  bf16.weight_value_bytes = 2.0;
  const MokCostModel m(bf16, d, f);
  // Inference: weights in, 2 bytes each; rows out and back, 2 bytes a value.
  QCOMPARE(m.estimate(10.0, false).shadow_bytes, 2 * P);
  QCOMPARE(m.estimate(10.0, false).ship_bytes, static_cast<int64_t>(2 * 10 * d * 2));
  // Training: bf16 weights in, their fp32 gradient back.
  QCOMPARE(m.estimate(10.0, true).shadow_bytes, 2 * P + static_cast<int64_t>(sizeof(real)) * P);
  // The crossover, free compute: inference P·2 / (2·d·2) = 1.5·f rows, as with floats (rows
  // and weights both cost half); training (P·2 + P·B) / (2·2·d·2) = 3·f·(2 + B)/8 (2.25·f for
  // B = 4, where weights sent as floats made it 3·f).
  const double B = static_cast<double>(sizeof(real));
  QVERIFY(std::fabs(m.crossover_rows(false) - 1.5 * f) <= 1e-9 * f);
  QVERIFY(std::fabs(m.crossover_rows(true) - 3.0 * f * (2.0 + B) / 8.0) <= 1e-9 * f);
}

void TestMokCostModel::ruleAsDataAgreesWithEstimate() {
  int shadows = 0, ships = 0;
  for (ShadowMode mode : {ShadowMode::automatic, ShadowMode::never, ShadowMode::always})
    for (bool training : {true, false})
      for (int64_t f : {int64_t{16}, int64_t{256}, int64_t{1024}}) {
        MokCostParams p{450.0, 3.0, 2e5, mode, 2.0};
        p.weight_value_bytes = 2.0;
        const MokCostModel m(p, 768, f);
        const ShadowRule rule = m.rule(training);
        // Fractional row shares (sums of 1/m) around and across the crossover, and its edge.
        const double crossover = m.crossover_rows(training);
        std::vector<double> rows = {0.0, 1.0 / 3.0, crossover, std::nextafter(crossover, 0.0),
                                    std::nextafter(crossover, 1e9)};
        for (double u = 0.125; u < 1e5; u *= 1.013) rows.push_back(u);
        for (double u : rows) {
          const bool expected = u > 0.0 && (mode == ShadowMode::always ||
                                            (mode == ShadowMode::automatic && m.estimate(u, training).shadow));
          QVERIFY2(shadow_wins(rule, u) == expected,
                   qPrintable(QString("mode %1, f %2, %3 rows").arg(shadow_mode_name(mode)).arg(f).arg(u, 0, 'g', 17)));
          (expected ? shadows : ships)++;
        }
      }
  QVERIFY(shadows > 0 && ships > 0);
}

QTEST_GUILESS_MAIN(TestMokCostModel)
#include "test_mok_cost_model.moc"
