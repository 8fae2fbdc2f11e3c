// The data plane of CPU ranks (core/parallel/data_plane.h): rows of any element type reach
// their peers in peer order, every byte is counted under its purpose as host messages are,
// the fixed-order all-reduce gives the Communicator's bits, and malformed calls are refused
// with a message that names the tensors; a group started beside the compute arrives at its
// finish, and the plane takes no other call while it is in flight. (The NCCL plane is checked on two GPUs by
// mok-gpu-check --checks parallel.)
#include <QtTest>

#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/parallel/data_plane.h"
#include "core/parallel/local_communicator.h"
#include "core/util/counter_rng.h"
#include "support/deferring_data_plane.h"

using namespace mok;

namespace {

constexpr int kR = 3;
constexpr int64_t kWidth = 5;

// Rows rank s sends to rank p (rank 2 sends none to rank 0).
int64_t rows_between(int s, int p) { return s == 2 && p == 0 ? 0 : 1 + 2 * s + 3 * p; }

float value(int s, int p, int64_t i) { return static_cast<float>(counter_normal(11, 100 * s + p, i)); }

}  // namespace

class TestDataPlane : public QObject {
  Q_OBJECT
 private slots:
  void rowsReachTheirPeersInOrderAndAreCounted() { rows_reach_their_peers(/*grouped=*/false); }

  // The same two exchanges as one group: the same rows, the same counts by purpose.
  void aGroupMovesAsItsExchangesOneByOne() { rows_reach_their_peers(/*grouped=*/true); }

  void aGroupIsCheckedWholeBeforeAnythingMoves() {
    LocalCommunicator comm(std::make_shared<LocalCommGroup>(1), 0);
    HostDataPlane plane(comm);
    Tensor a = cpu_context().zeros({4, 3}, DType::f32), b = cpu_context().zeros({4, 2}, DType::f32);
    Tensor out = cpu_context().zeros({4, 3}, DType::f32);
    const std::vector<int64_t> four{4}, three{3};
    const DataPlane::RowMove bad_second[] = {{&a, four, &out, four, CommPurpose::dispatch},
                                             {&a, four, &b, four, CommPurpose::control}};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, plane.all_to_all_rows_group(bad_second));
    QCOMPARE(comm.stats().calls, int64_t(0));  // the good first move did not go alone
    // The own block must be as many rows received as sent.
    const DataPlane::RowMove uneven[] = {{&a, four, &out, three, CommPurpose::dispatch}};
    QVERIFY_THROWS_EXCEPTION(std::logic_error, plane.all_to_all_rows_group(uneven));
    QVERIFY_THROWS_EXCEPTION(std::logic_error, plane.all_to_all_rows(a, four, out, three, CommPurpose::dispatch));
    QCOMPARE(comm.stats().calls, int64_t(0));
  }

  // Started on a plane that delivers only at finish: nothing before it, everything after it,
  // no other call in between; a Transfer dropped unfinished is finished by its destructor.
  void aStartedGroupArrivesAtFinish() {
    std::mutex m;
    std::vector<std::string> failures;
    run_local_ranks(2, [&](Communicator& comm) {
      const int me = comm.rank(), peer = 1 - me;
      test::DeferringDataPlane plane(comm);
      const std::vector<int64_t> counts{2, 2};
      std::vector<float> send(4 * kWidth), want(4 * kWidth);
      for (int64_t i = 0; i < 4 * kWidth; ++i) send[i] = value(me, 0, i);
      for (int64_t i = 0; i < 2 * kWidth; ++i) {
        want[(2 * me) * kWidth + i] = value(me, 0, (2 * me) * kWidth + i);             // own block
        want[(2 * peer) * kWidth + i] = value(peer, 0, (2 * me) * kWidth + i);  // the peer's block for me
      }
      auto fail = [&](const std::string& what) {
        std::lock_guard lock(m);
        failures.push_back("rank " + std::to_string(me) + ": " + what);
      };
      auto received = [](const Tensor& t) {
        std::vector<float> v(static_cast<size_t>(t.numel()));
        t.copy_to_host(v.data(), t.bytes());
        return v;
      };
      Tensor st = cpu_context().upload(send.data(), {4, kWidth}, DType::f32);
      Tensor rt = cpu_context().zeros({4, kWidth}, DType::f32);
      const DataPlane::RowMove move[] = {{&st, counts, &rt, counts, CommPurpose::dispatch}};
      {
        DataPlane::Transfer t = plane.start_group(move);
        if (!t.pending()) fail("not pending after start");
        for (float v : received(rt))
          if (!std::isnan(v)) fail("a row arrived before finish");
        try {
          plane.all_to_all_rows(st, counts, rt, counts, CommPurpose::dispatch);
          fail("a call while a group is in flight was taken");
        } catch (const std::logic_error&) {
        }
        try {
          DataPlane::Transfer second = plane.start_group(move);
          fail("a second group while one is in flight was taken");
        } catch (const std::logic_error&) {
        }
        DataPlane::Transfer moved = std::move(t);
        if (t.pending() || !moved.pending()) fail("a moved transfer did not move");
        plane.finish(moved);
        if (moved.pending()) fail("pending after finish");
        if (received(rt) != want) fail("rows after finish");
      }
      rt = cpu_context().zeros({4, kWidth}, DType::f32);
      const DataPlane::RowMove again[] = {{&st, counts, &rt, counts, CommPurpose::dispatch}};
      { DataPlane::Transfer dropped = plane.start_group(again); }
      if (received(rt) != want) fail("rows after a dropped transfer");
      plane.all_to_all_rows(st, counts, rt, counts, CommPurpose::combine);  // idle again
      if (!plane.fault().empty()) fail(plane.fault());
      if (comm.stats().sent(CommPurpose::dispatch, peer) != 2 * 2 * kWidth * 4)
        fail("dispatch bytes: each started group counted once");
    });
    for (const std::string& f : failures) qWarning("%s", f.c_str());
    QVERIFY(failures.empty());
  }

  // The host plane moves a started group at once.
  void theHostPlaneMovesAStartedGroupAtOnce() {
    LocalCommunicator comm(std::make_shared<LocalCommGroup>(1), 0);
    HostDataPlane plane(comm);
    std::vector<float> v(3 * kWidth);
    for (int64_t i = 0; i < 3 * kWidth; ++i) v[i] = value(0, 0, i);
    Tensor a = cpu_context().upload(v.data(), {3, kWidth}, DType::f32);
    Tensor b = cpu_context().zeros({3, kWidth}, DType::f32);
    const std::vector<int64_t> three{3};
    const DataPlane::RowMove move[] = {{&a, three, &b, three, CommPurpose::dispatch}};
    DataPlane::Transfer t = plane.start_group(move);
    std::vector<float> got(v.size());
    b.copy_to_host(got.data(), b.bytes());
    QVERIFY(got == v);
    plane.finish(t);
    QVERIFY(!t.pending());
  }

 private:
  static void rows_reach_their_peers(bool grouped) {
    std::mutex m;
    std::vector<std::string> failures;
    run_local_ranks(kR, [&](Communicator& comm) {
      const int me = comm.rank();
      std::unique_ptr<DataPlane> plane = make_data_plane(comm, cpu_context(), "nccl");
      const bool host = std::string(plane->kind()) == "host";
      std::vector<int64_t> send_rows(kR), recv_rows(kR);
      std::vector<float> send, want;
      for (int p = 0; p < kR; ++p) {
        send_rows[p] = rows_between(me, p);
        recv_rows[p] = rows_between(p, me);
        for (int64_t i = 0; i < send_rows[p] * kWidth; ++i) send.push_back(value(me, p, i));
      }
      for (int s = 0; s < kR; ++s)
        for (int64_t i = 0; i < recv_rows[s] * kWidth; ++i) want.push_back(value(s, me, i));
      const int64_t ns = static_cast<int64_t>(send.size()) / kWidth, nr = static_cast<int64_t>(want.size()) / kWidth;
      Tensor st = cpu_context().upload(send.data(), {ns, kWidth}, DType::f32);
      Tensor rt = cpu_context().empty({nr, kWidth}, DType::f32);
      // A 1-D tensor of i32: each element is a row.
      std::vector<int32_t> ids_send, ids_want;
      for (int p = 0; p < kR; ++p)
        for (int64_t i = 0; i < send_rows[p]; ++i) ids_send.push_back(1000 * me + 10 * p + static_cast<int32_t>(i));
      for (int s = 0; s < kR; ++s)
        for (int64_t i = 0; i < recv_rows[s]; ++i) ids_want.push_back(1000 * s + 10 * me + static_cast<int32_t>(i));
      Tensor is = cpu_context().upload(ids_send.data(), {ns}, DType::i32);
      Tensor ir = cpu_context().empty({nr}, DType::i32);
      if (grouped) {
        const DataPlane::RowMove moves[] = {{&st, send_rows, &rt, recv_rows, CommPurpose::combine},
                                            {&is, send_rows, &ir, recv_rows, CommPurpose::control}};
        plane->all_to_all_rows_group(moves);
      } else {
        plane->all_to_all_rows(st, send_rows, rt, recv_rows, CommPurpose::combine);
        plane->all_to_all_rows(is, send_rows, ir, recv_rows, CommPurpose::control);
      }
      std::vector<float> got(want.size());
      rt.copy_to_host(got.data(), rt.bytes());
      std::vector<int32_t> ids_got(ids_want.size());
      ir.copy_to_host(ids_got.data(), ir.bytes());

      const CommStats& st_ = comm.stats();
      std::lock_guard lock(m);
      if (!host) failures.push_back("rank " + std::to_string(me) + ": a CPU rank's plane is not the host's");
      if (got != want) failures.push_back("rank " + std::to_string(me) + ": rows differ");
      if (ids_got != ids_want) failures.push_back("rank " + std::to_string(me) + ": ids differ");
      for (int p = 0; p < kR; ++p) {
        if (st_.sent(CommPurpose::combine, p) != send_rows[p] * kWidth * 4 ||
            st_.received(CommPurpose::combine, p) != recv_rows[p] * kWidth * 4)
          failures.push_back("rank " + std::to_string(me) + ": combine bytes with peer " + std::to_string(p));
        if (st_.sent(CommPurpose::control, p) != send_rows[p] * 4)
          failures.push_back("rank " + std::to_string(me) + ": control bytes to peer " + std::to_string(p));
      }
    });
    for (const std::string& f : failures) qWarning("%s", f.c_str());
    QVERIFY(failures.empty());
  }

 private slots:
  void allReduceGivesTheCommunicatorsBits() {
    constexpr int64_t n = 1001;
    std::mutex m;
    std::vector<std::vector<float>> via_plane(kR), via_comm(kR);
    run_local_ranks(kR, [&](Communicator& comm) {
      const int me = comm.rank();
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = value(me, 9, i) * (i % 7 == 0 ? 1e6f : 1.0f);
      std::vector<float> direct = v;
      comm.all_reduce_sum(direct.data(), n, CommPurpose::gradients);
      HostDataPlane plane(comm);
      Tensor t = cpu_context().upload(v.data(), {n}, DType::f32);
      plane.all_reduce_sum(t, CommPurpose::gradients);
      std::vector<float> got(n);
      t.copy_to_host(got.data(), t.bytes());
      std::lock_guard lock(m);
      via_plane[me] = got;
      via_comm[me] = direct;
    });
    for (int r = 0; r < kR; ++r) {
      QCOMPARE(std::memcmp(via_plane[r].data(), via_comm[r].data(), n * sizeof(float)), 0);
      QCOMPARE(std::memcmp(via_plane[r].data(), via_plane[0].data(), n * sizeof(float)), 0);
    }
  }

  void malformedCallsAreRefusedByName() {
    LocalCommunicator comm(std::make_shared<LocalCommGroup>(1), 0);
    {
      HostDataPlane plane(comm);
      Tensor a = cpu_context().zeros({4, 3}, DType::f32), b = cpu_context().zeros({4, 2}, DType::f32);
      Tensor c = cpu_context().zeros({4, 3}, DType::i32);
      const std::vector<int64_t> four{4}, five{5}, two_peers{2, 2};
      auto refused = [&](auto call, const char* needle) {
        try {
          call();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what()).find(needle) != std::string::npos;
        }
        return false;
      };
      QVERIFY(refused([&] { plane.all_to_all_rows(a, four, b, four, CommPurpose::dispatch); }, "row width"));
      QVERIFY(refused([&] { plane.all_to_all_rows(a, four, c, four, CommPurpose::dispatch); }, "element type"));
      QVERIFY(refused([&] { plane.all_to_all_rows(a, five, a, five, CommPurpose::dispatch); }, "5 rows to send"));
      QVERIFY(refused([&] { plane.all_to_all_rows(a, two_peers, a, two_peers, CommPurpose::dispatch); },
                      "one row count per rank"));
      QVERIFY(refused([&] { plane.all_reduce_sum(c, CommPurpose::gradients); }, "f32 or f64"));
    }
  }

  void transfersOfAnotherTransportAreCounted() {
    auto group = std::make_shared<LocalCommGroup>(2);
    LocalCommunicator comm(group, 1);  // rank 1 of 2: counting needs no peer
    const std::vector<int64_t> sent{100, 7}, received{90, 9};
    const int64_t calls = comm.stats().calls;
    comm.count_transfer(sent, received, CommPurpose::dispatch, 0.25);
    QCOMPARE(comm.stats().calls, calls + 1);
    QCOMPARE(comm.stats().sent(CommPurpose::dispatch, 0), int64_t(100));
    QCOMPARE(comm.stats().received(CommPurpose::dispatch, 0), int64_t(90));
    QCOMPARE(comm.stats().remote_sent(CommPurpose::dispatch), int64_t(100));  // peer 0 is remote, 1 is self
    QCOMPARE(comm.stats().local_bytes(CommPurpose::dispatch), int64_t(7));
    QVERIFY(comm.stats().wall_seconds >= 0.25);
  }
};

QTEST_GUILESS_MAIN(TestDataPlane)
#include "test_data_plane.moc"
