// RankRendezvous (core/parallel/rank_rendezvous.h), the meeting point of a process's rank
// threads that the peer data plane swaps addresses and events through:
//  - every post() returns every rank's post of the same round, and what it returned stays
//    valid until the caller posts again, however far the other ranks run ahead;
//  - abort() makes waiting ranks and later posts throw CommAborted.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel/rank_rendezvous.h"

using namespace mok;

namespace {

struct Record {
  int rank = -1;
  int64_t round = -1;
  std::vector<int64_t> payload;  // heap memory, so a torn read would show
};

Record record(int rank, int64_t round) { return {rank, round, std::vector<int64_t>(8, rank * 1000 + round)}; }

}  // namespace

class TestRankRendezvous : public QObject {
  Q_OBJECT
 private slots:
  void everyRoundHoldsEveryRanksPostOfThatRound() {
    constexpr int kRanks = 3;
    constexpr int64_t kRounds = 400;
    RankRendezvous<Record> rv(kRanks);
    std::mutex m;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
    for (int me = 0; me < kRanks; ++me) {
      threads.emplace_back([&, me] {
        for (int64_t round = 0; round < kRounds; ++round) {
          const std::vector<Record>& all = rv.post(me, record(me, round));
          // Read late now and then (the others may already be in the next round), as a data
          // plane does while it queues its copies.
          if ((round + me) % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          for (int r = 0; r < kRanks; ++r) {
            const Record& got = all[static_cast<size_t>(r)];
            const Record want = record(r, round);
            if (got.rank != want.rank || got.round != want.round || got.payload != want.payload) {
              std::lock_guard lock(m);
              failures.push_back("rank " + std::to_string(me) + " round " + std::to_string(round) + " saw rank " +
                                 std::to_string(got.rank) + "'s post of round " + std::to_string(got.round) +
                                 " in slot " + std::to_string(r));
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    QVERIFY2(failures.empty(), failures.empty() ? "" : failures.front().c_str());
  }

  void oneRankNeverWaits() {
    RankRendezvous<Record> rv(1);
    for (int64_t round = 0; round < 3; ++round) QCOMPARE(rv.post(0, record(0, round)).front().round, round);
  }

  void abortReleasesWaitingRanksAndRefusesLaterPosts() {
    constexpr int kRanks = 3;
    RankRendezvous<Record> rv(kRanks);
    std::atomic<int> aborted{0};
    std::vector<std::thread> waiting;
    for (int me = 0; me < kRanks - 1; ++me) {
      waiting.emplace_back([&, me] {
        try {
          rv.post(me, record(me, 0));  // rank 2 never comes
        } catch (const CommAborted&) {
          aborted.fetch_add(1);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    QCOMPARE(aborted.load(), 0);  // still waiting for rank 2
    rv.abort();
    for (auto& t : waiting) t.join();
    QCOMPARE(aborted.load(), kRanks - 1);
    QVERIFY_THROWS_EXCEPTION(CommAborted, rv.post(2, record(2, 0)));
  }
};

QTEST_GUILESS_MAIN(TestRankRendezvous)
#include "test_rank_rendezvous.moc"
