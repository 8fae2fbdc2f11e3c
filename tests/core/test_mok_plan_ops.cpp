// The MoK plan's ops on the CPU (core/backend/ops.h; the CUDA versions are checked against
// the same semantics by mok-gpu-check), on a routing small enough to write out by hand:
// 4 tokens, k = 2, experts 0–1 on rank 0 and 2–3 on rank 1, token 2's second slot dropped;
// and those rows cut into chunks (row_chunk_keys, ship_rows' counts by chunk).
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

  // The same rows cut into C = 2 chunks of each rank's 2 experts (local expert l in chunk l):
  // keys c·R + q of each row's lowest and highest entry, and the rows per key counted by
  // ship_rows itself. Rank 0's rows: tokens 0 (local 0), 2 (1), 3 (0); rank 1's: tokens 0
  // (0), 1 (1 and 0), 3 (1).
  void chunkKeysAndCountsFollowEachRowsLowestAndHighestEntry() {
    Ops& ops = cpu_context().ops();
    Tensor gate = Tensor::empty({8}, kRealDType, cpu_allocator());
    for (int i = 0; i < 8; ++i) gate.data()[i] = static_cast<real>(i + 1);
    ShipChunks cut;
    cut.chunks = 2;
    cut.locals = {2, 2};
    const ShipRows s = ops.ship_rows(i32(kExpert), gate, i32(kOwner), i32(kLocal), 2, 2, false, &cut);
    QCOMPARE(s.rows, (std::vector<int64_t>{3, 3}));
    QCOMPARE(s.chunk_lo, (std::vector<int64_t>{2, 2, 1, 1}));  // (chunk 0: rank 0, 1), (chunk 1: …)
    QCOMPARE(s.chunk_hi, (std::vector<int64_t>{2, 1, 1, 2}));
    Tensor lo = i32(std::vector<int32_t>(6, -9)), hi = i32(std::vector<int32_t>(6, -9));
    ops.row_chunk_keys(s.entry, s.rows, cut, lo, hi);
    QCOMPARE(values(lo), (std::vector<int32_t>{0, 2, 0, 1, 1, 3}));
    QCOMPARE(values(hi), (std::vector<int32_t>{0, 2, 0, 1, 3, 3}));
    // Three chunks, rank 0 with 3 experts (chunk l each), rank 1 with 2 (chunks 0 and 1, its
    // chunk 2 empty): the keys say c·2 + q again.
    cut.chunks = 3;
    cut.locals = {3, 2};
    ops.row_chunk_keys(s.entry, s.rows, cut, lo, hi);
    QCOMPARE(values(lo), (std::vector<int32_t>{0, 2, 0, 1, 1, 3}));
    QCOMPARE(values(hi), (std::vector<int32_t>{0, 2, 0, 1, 3, 3}));
    cut.locals = {3, 1};  // rank 1's local expert 1 is not one of 1
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ops.row_chunk_keys(s.entry, s.rows, cut, lo, hi));
    // The index tables move with their rows: gather_rows on i32 (the pairs of rows 4, 0, 4).
    Tensor moved = Tensor::empty({3, 2}, DType::i32, cpu_allocator());
    ops.gather_rows(s.pair, i32({4, 0, 4}), 1, moved);
    QCOMPARE(values(moved), (std::vector<int32_t>{2, 3, 0, -1, 2, 3}));
  }

  void badChunksAreRefused() {
    Ops& ops = cpu_context().ops();
    Tensor gate = Tensor::empty({8}, kRealDType, cpu_allocator());
    ShipChunks cut;
    cut.chunks = 2;
    cut.locals = {2};  // one rank's count for two ranks
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             ops.ship_rows(i32(kExpert), gate, i32(kOwner), i32(kLocal), 2, 2, false, &cut));
    cut.locals = {2, 2};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,  // the fixed layout has rows without entries
                             ops.ship_rows(i32(kExpert), gate, i32(kOwner), i32(kLocal), 2, 2, true, &cut));
    Tensor lo = i32({0}), hi = i32({0});
    Tensor pads = Tensor::empty({1, 2}, DType::i32, cpu_allocator());
    pads.data_as<int32_t>()[0] = pads.data_as<int32_t>()[1] = -1;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ops.row_chunk_keys(pads, {1, 0}, cut, lo, hi));
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
