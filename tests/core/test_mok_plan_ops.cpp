// The MoK plan's ops on the CPU (core/backend/ops.h; the CUDA versions are checked against
// the same semantics by mok-gpu-check), on a routing small enough to write out by hand:
// 4 tokens, k = 2, experts 0–1 on rank 0 and 2–3 on rank 1, token 2's second slot dropped.
#include <QtTest>

#include <vector>

#include "core/backend/exec_context.h"
#include "core/backend/ops.h"
#include "support/dispatch_fixture.h"

using namespace mok;

namespace {

Tensor i32(const std::vector<int32_t>& v) { return test::i32_tensor(v); }
std::vector<int32_t> values(const Tensor& t) { return test::i32_values(t); }

//           token:  0      1      2       3
const std::vector<int32_t> kExpert = {0, 2, 3, 2, 1, -1, 3, 0};
const std::vector<int32_t> kOwner = {0, 0, 1, 1};
const std::vector<int32_t> kLocal = {0, 1, 0, 1};

}  // namespace

class TestMokPlanOps : public QObject {
  Q_OBJECT
 private slots:
  void slotSharesCountTokensByTheirSlotsOnTheOwner() {
    Ops& ops = cpu_context().ops();
    Tensor counts = Tensor::empty({4 * 2}, DType::i32, cpu_allocator());
    ops.slot_share_counts(i32(kExpert), i32(kOwner), 2, counts);
    // counts[e·2 + m − 1]: expert 0: token 0 (m 1), token 3 (m 1); expert 1: token 2 (m 1);
    // expert 2: token 0 (m 1), token 1 (m 2, with 3); expert 3: token 1 (m 2), token 3 (m 1).
    QCOMPARE(values(counts), (std::vector<int32_t>{2, 0, 1, 0, 1, 1, 1, 1}));
  }

  void shipRowsAreOnePerTokenAndDestinationInOrder() {
    Ops& ops = cpu_context().ops();
    std::vector<float> g = {0.6f, 0.4f, 0.7f, 0.3f, 1.0f, 0.0f, 0.8f, 0.2f};
    Tensor gate = Tensor::empty({8}, kRealDType, cpu_allocator());
    for (int i = 0; i < 8; ++i) gate.data()[i] = static_cast<real>(g[i]);
    // Expert 3 is shadowed (not shipped): dest −1.
    const ShipRows s = ops.ship_rows(i32(kExpert), gate, i32({0, 0, 1, -1}), i32(kLocal), 2, 2);
    QCOMPARE(s.rows, (std::vector<int64_t>{3, 2}));       // rank 0: tokens 0, 2, 3; rank 1: 0, 1
    QCOMPARE(values(s.token), (std::vector<int32_t>{0, 2, 3, 0, 1}));
    QCOMPARE(values(s.head_pair), (std::vector<int32_t>{0, 4, 7, 1, 3}));
    QCOMPARE(values(s.entry), (std::vector<int32_t>{0, -1, 1, -1, 0, -1, 0, -1, 0, -1}));
    QCOMPARE(values(s.pair), (std::vector<int32_t>{0, -1, 4, -1, 7, -1, 1, -1, 3, -1}));
    const std::vector<real> gates(s.gate.data(), s.gate.data() + s.gate.numel());
    QCOMPARE(gates, (std::vector<real>{0.6f, 0, 1.0f, 0, 0.2f, 0, 0.4f, 0, 0.3f, 0}));
  }

  void aTokenWithTwoExpertsOnOneRankShipsOneRowWithBothEntries() {
    Ops& ops = cpu_context().ops();
    Tensor gate = Tensor::empty({8}, kRealDType, cpu_allocator());
    for (int i = 0; i < 8; ++i) gate.data()[i] = static_cast<real>(i + 1);
    const ShipRows s = ops.ship_rows(i32(kExpert), gate, i32(kOwner), i32(kLocal), 2, 2);
    QCOMPARE(s.rows, (std::vector<int64_t>{3, 3}));
    QCOMPARE(values(s.token), (std::vector<int32_t>{0, 2, 3, 0, 1, 3}));
    // Token 1 (experts 3 then 2 on rank 1): one row, entries in slot order.
    QCOMPARE(values(s.entry).at(8), 1);
    QCOMPARE(values(s.entry).at(9), 0);
    QCOMPARE(values(s.pair).at(8), 2);
    QCOMPARE(values(s.pair).at(9), 3);
  }

  void scatterPositionsSkipsNegativeIndices() {
    Ops& ops = cpu_context().ops();
    Tensor out = i32({-1, -1, -1, -1, -1, -1});
    ops.scatter_positions(i32({4, -1, 0, 5}), 10, out);
    QCOMPARE(values(out), (std::vector<int32_t>{12, -1, -1, -1, 10, 13}));
  }

  void rowsToPairsSkipsPads() {
    Ops& ops = cpu_context().ops();
    Tensor rows = Tensor::empty({3}, kRealDType, cpu_allocator());
    rows.data()[0] = 1.5f;
    rows.data()[1] = 2.5f;
    rows.data()[2] = 3.5f;
    Tensor pairs = Tensor::empty({4}, kRealDType, cpu_allocator());
    ops.rows_to_pairs(rows, i32({3, -1, 0}), pairs);
    const std::vector<real> got(pairs.data(), pairs.data() + 4);
    QCOMPARE(got, (std::vector<real>{3.5f, 0, 0, 1.5f}));
  }
};

QTEST_GUILESS_MAIN(TestMokPlanOps)
#include "test_mok_plan_ops.moc"
