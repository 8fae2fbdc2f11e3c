// CommWorker and ChunkLayout, the two pieces of MokDispatcher's overlap:
//  - jobs run one at a time in submission order, on another thread (or inline), while the
//    caller goes on; wait/drain return only when the jobs are done; a job's exception
//    reaches the caller at the next wait, later jobs are skipped, and the worker is usable
//    again afterwards;
//  - a chunk-major layout puts every row exactly once, chunk c contiguous, peers in order
//    inside a chunk, and the rows of a (chunk, peer) block in their original order.
#include <QtTest>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/parallel/chunk_layout.h"
#include "core/parallel/comm_worker.h"

using namespace mok;

class TestCommWorker : public QObject {
  Q_OBJECT
 private slots:
  void runsJobsInOrderOnAnotherThread();
  void inlineModeRunsInsideSubmit();
  void failureReachesTheCallerAndIsReportedOnce();
  void inlineSwitchOnlyWhenIdle();
  void chunkLayoutIsChunkMajorAndStable();
};

void TestCommWorker::runsJobsInOrderOnAnotherThread() {
  CommWorker w(true);
  std::vector<int> order;
  std::atomic<int> running{0}, finished{0};
  bool overlapped = false, other_thread = true;
  const std::thread::id me = std::this_thread::get_id();
  std::vector<CommWorker::Ticket> t;
  for (int i = 0; i < 20; ++i)
    t.push_back(w.submit([&, i] {
      overlapped |= running.fetch_add(1) != 0;
      other_thread &= std::this_thread::get_id() != me;
      order.push_back(i);
      running.fetch_sub(1);
      finished.fetch_add(1);
    }));
  w.wait(t[9]);
  QVERIFY(finished.load() >= 10);  // everything up to ticket 9 is done
  w.drain();
  QCOMPARE(order.size(), size_t(20));
  for (int i = 0; i < 20; ++i) QCOMPARE(order[i], i);
  QVERIFY(!overlapped);   // one job at a time
  QVERIFY(other_thread);  // not on the caller's thread
}

void TestCommWorker::inlineModeRunsInsideSubmit() {
  CommWorker w(false);
  int done = 0;
  const std::thread::id me = std::this_thread::get_id();
  bool same_thread = false;
  w.submit([&] {
    ++done;
    same_thread = std::this_thread::get_id() == me;
  });
  QCOMPARE(done, 1);  // before any wait
  QVERIFY(same_thread);
  w.drain();
  QCOMPARE(done, 1);
}

void TestCommWorker::failureReachesTheCallerAndIsReportedOnce() {
  for (bool threaded : {true, false}) {
    CommWorker w(threaded);
    int ran = 0;
    w.submit([&] { ++ran; });
    const auto bad = w.submit([] { throw std::runtime_error("peer gone"); });
    w.submit([&] { ++ran; });  // skipped: its inputs may depend on the failed job
    bool caught = false;
    try {
      w.wait(bad);
    } catch (const std::runtime_error& e) {
      caught = QString(e.what()) == "peer gone";
    }
    QVERIFY(caught);
    QCOMPARE(ran, 1);
    w.drain();  // already reported: no second throw
    w.submit([&] { ++ran; });
    w.drain();
    QCOMPARE(ran, 2);  // usable again
  }
}

void TestCommWorker::inlineSwitchOnlyWhenIdle() {
  CommWorker w(true);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  w.submit([gate] { gate.wait(); });
  bool refused = false;
  try {
    w.set_inline(true);  // a job is pending
  } catch (const std::logic_error&) {
    refused = true;
  }
  QVERIFY(refused);
  release.set_value();
  w.drain();
  w.set_inline(true);
  QVERIFY(!w.threaded());
  const std::thread::id me = std::this_thread::get_id();
  bool same = false;
  w.submit([&] { same = std::this_thread::get_id() == me; });
  QVERIFY(same);  // ran inside submit
  w.set_inline(false);
  QVERIFY(w.threaded());
  w.submit([&] { same = std::this_thread::get_id() == me; });
  w.drain();
  QVERIFY(!same);
}

void TestCommWorker::chunkLayoutIsChunkMajorAndStable() {
  // Three peers with 4, 0 and 5 rows; keys in [0, 3).
  const std::vector<int64_t> rows = {4, 0, 5};
  const std::vector<int> key = {2, 0, 2, 1, /* peer 2: */ 0, 0, 2, 1, 0};
  const ChunkLayout lay(rows, key, 3);
  QCOMPARE(lay.start, (std::vector<int64_t>{0, 4, 6, 9}));
  QCOMPARE(lay.counts(0, 1), (std::vector<int64_t>{1, 0, 3}));
  QCOMPARE(lay.counts(1, 10), (std::vector<int64_t>{10, 0, 10}));
  QCOMPARE(lay.counts(2, 1), (std::vector<int64_t>{2, 0, 1}));
  // chunk 0: peer 0 row 1, peer 2 rows 4, 5, 8; chunk 1: rows 3, 7; chunk 2: rows 0, 2, 6.
  QCOMPARE(lay.pos, (std::vector<int64_t>{6, 0, 7, 4, 1, 2, 8, 5, 3}));
  bool threw = false;
  try {
    ChunkLayout(rows, std::vector<int>{0, 0, 0}, 3);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  QVERIFY(threw);
  QCOMPARE(expert_chunk(0, 5, 2), 0);
  QCOMPARE(expert_chunk(2, 5, 2), 0);
  QCOMPARE(expert_chunk(3, 5, 2), 1);
  QCOMPARE(expert_chunk(0, 1, 4), 0);  // fewer experts than chunks: some chunks stay empty
}

QTEST_GUILESS_MAIN(TestCommWorker)
#include "test_comm_worker.moc"
