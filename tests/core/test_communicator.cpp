// Communicator over local ranks (threads): all-to-all delivers exactly, all-reduce gives the
// same bits on every rank and in every run, and the byte counters equal an independent
// count; failures in one rank reach the caller instead of hanging the others.
#include <QtTest>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/parallel/local_communicator.h"
#include "mpi/comm_checks.h"

using namespace mok;

class TestCommunicator : public QObject {
  Q_OBJECT
 private slots:
  void collectivesOnOneToFourRanks() {
    for (int R : {1, 2, 3, 4}) {
      std::mutex m;
      std::vector<std::string> failures;
      std::atomic<int> ran{0};
      run_local_ranks(R, [&](Communicator& c) {
        auto f = comm_checks::run_all(c, 77 + R, 4);
        if (c.size() != R || std::string(c.kind()) != "local") f.push_back("size or kind");
        std::lock_guard<std::mutex> lock(m);
        failures.insert(failures.end(), f.begin(), f.end());
        ran++;
      });
      QCOMPARE(ran.load(), R);
      for (const auto& s : failures) qWarning("R=%d: %s", R, s.c_str());
      QVERIFY2(failures.empty(), "collective checks failed (see warnings)");
    }
  }

  void repeatedRunsAreBitwiseIdentical() {
    auto run_once = [](int R) {
      std::vector<std::vector<float>> out(R);
      run_local_ranks(R, [&](Communicator& c) {
        std::vector<float> x(5000);
        for (size_t i = 0; i < x.size(); ++i)
          x[i] = comm_checks::reduce_value(5, c.rank(), static_cast<int64_t>(i));
        c.all_reduce_sum(x.data(), static_cast<int64_t>(x.size()), CommPurpose::gradients);
        out[c.rank()] = x;
      });
      return out;
    };
    for (int R : {2, 3}) {
      const auto a = run_once(R), b = run_once(R);
      for (int r = 0; r < R; ++r) {
        QCOMPARE(std::memcmp(a[r].data(), b[r].data(), a[r].size() * 4), 0);
        QCOMPARE(std::memcmp(a[0].data(), a[r].data(), a[r].size() * 4), 0);
      }
    }
  }

  // Float sums are formed in double and rounded once, so the result does not depend on the
  // order the contributions are added in (for data of ordinary range).
  void floatAllReduceIsOrderIndependent() {
    const int R = 4;
    const int64_t n = 4000;
    std::vector<float> result(n);
    run_local_ranks(R, [&](Communicator& c) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = comm_checks::reduce_value(9, c.rank(), i);
      c.all_reduce_sum(x.data(), n, CommPurpose::gradients);
      if (c.rank() == 0) result = x;
    });
    int64_t differs_from_reverse = 0, float_order_differs = 0;
    for (int64_t i = 0; i < n; ++i) {
      double reverse = 0.0;
      float plain = 0.0f, plain_reverse = 0.0f;
      for (int r = R - 1; r >= 0; --r) reverse += comm_checks::reduce_value(9, r, i);
      for (int r = 0; r < R; ++r) plain += comm_checks::reduce_value(9, r, i);
      for (int r = R - 1; r >= 0; --r) plain_reverse += comm_checks::reduce_value(9, r, i);
      const float rf = static_cast<float>(reverse);
      if (std::memcmp(&rf, &result[i], 4) != 0) ++differs_from_reverse;
      if (plain != plain_reverse) ++float_order_differs;
    }
    QCOMPARE(differs_from_reverse, int64_t{0});
    QVERIFY(float_order_differs > 0);  // the data would expose order dependence
  }

  void selfSendsAreLocalNotRemote() {
    const int R = 3;
    std::vector<CommStats> stats(R);
    std::vector<std::vector<int64_t>> got(R);
    run_local_ranks(R, [&](Communicator& c) {
      const int me = c.rank();
      std::vector<int64_t> counts(R, 0);
      counts[me] = 10;           // ten floats to itself
      counts[(me + 1) % R] = 3;  // three to the next rank
      std::vector<float> send(13, 1.0f), recv;
      got[me] = c.all_to_all_v(send.data(), counts, recv, CommPurpose::dispatch);
      stats[me] = c.stats();
    });
    for (int me = 0; me < R; ++me) {
      const CommStats& s = stats[me];
      QCOMPARE(got[me][me], int64_t{10});
      QCOMPARE(got[me][(me + R - 1) % R], int64_t{3});
      QCOMPARE(s.local_bytes(CommPurpose::dispatch), int64_t{40});
      QCOMPARE(s.remote_sent(CommPurpose::dispatch), int64_t{12});
      QCOMPARE(s.remote_received(CommPurpose::dispatch), int64_t{12});
      QCOMPARE(s.remote_messages[static_cast<int>(CommPurpose::dispatch)], int64_t{1});
      QCOMPARE(s.remote_sent(CommPurpose::control), int64_t{16});  // the count exchange
      QCOMPARE(s.local_bytes(CommPurpose::control), int64_t{8});
      QCOMPARE(s.remote_sent_total(), int64_t{28});
      QCOMPARE(s.remote_received_total(), int64_t{28});
    }
  }

  void statsSinceGivesDeltas() {
    std::vector<CommStats> delta(2), total(2), after_reset(2);
    run_local_ranks(2, [&](Communicator& c) {
      float v[4] = {1, 2, 3, 4};
      c.broadcast(v, 16, 0, CommPurpose::weights);
      c.add_overlapped_seconds(2.0);  // before the mark: not in the delta
      const CommStats mark = c.stats();
      c.broadcast(v, 8, 1, CommPurpose::weights);
      c.add_wall_seconds(0.5);
      c.add_overlapped_seconds(0.25 * (c.rank() + 1));
      delta[c.rank()] = c.stats().since(mark);
      total[c.rank()] = c.stats();
      c.reset_stats();
      after_reset[c.rank()] = c.stats();
    });
    for (int r = 0; r < 2; ++r) {
      QCOMPARE(delta[r].calls, int64_t{1});
      QCOMPARE(delta[r].remote_sent(CommPurpose::weights), r == 1 ? int64_t{8} : int64_t{0});
      QCOMPARE(delta[r].remote_received(CommPurpose::weights), r == 0 ? int64_t{8} : int64_t{0});
      QCOMPARE(total[r].remote_sent(CommPurpose::weights), r == 0 ? int64_t{16} : int64_t{8});
      QCOMPARE(total[r].calls, int64_t{2});
      // Time added by another transport: waited (wall, on top of the broadcast's own) and
      // overlapped with compute (only what was added after the mark).
      QVERIFY(delta[r].wall_seconds >= 0.5);
      QCOMPARE(delta[r].overlapped_seconds, 0.25 * (r + 1));
      QCOMPARE(total[r].overlapped_seconds, 2.0 + 0.25 * (r + 1));
      QCOMPARE(after_reset[r].remote_sent_total(), int64_t{0});
      QCOMPARE(after_reset[r].wall_seconds, 0.0);
      QCOMPARE(after_reset[r].overlapped_seconds, 0.0);
      QCOMPARE(after_reset[r].calls, int64_t{0});
      QCOMPARE(after_reset[r].ranks, 2);
      QCOMPARE(after_reset[r].self, r);
    }
  }

  void exceptionInOneRankReachesCaller() {
    bool caught = false;
    try {
      run_local_ranks(4, [](Communicator& c) {
        c.barrier();
        if (c.rank() == 2) throw std::logic_error("rank two gives up");
        c.barrier();  // the others wait here until the group is aborted
        std::vector<float> x(10, 1.0f);
        c.all_reduce_sum(x.data(), 10, CommPurpose::gradients);
      });
    } catch (const std::logic_error& e) {
      caught = QString(e.what()) == "rank two gives up";
    }
    QVERIFY(caught);
  }

  void aFailingRankRunsEveryRanksAbortHooksOnce() {
    // What a GPU transport relies on to release peers that wait on the device: when one rank
    // fails, every registered hook runs once; a hook removed before the failure does not.
    std::atomic<int> ran{0}, removed_ran{0};
    int token_a = 0, token_b = 0;
    try {
      run_local_ranks(3, [&](Communicator& comm) {
        comm.add_abort_hook(&token_a, [&] { ran++; });
        if (comm.rank() == 0) {
          comm.add_abort_hook(&token_b, [&] { removed_ran++; });
          comm.remove_abort_hook(&token_b);
        }
        comm.barrier();
        if (comm.rank() == 2) throw std::runtime_error("rank 2 failed");
        comm.barrier();  // ranks 0 and 1 wait here until the group gives up
      });
      QFAIL("the failure did not reach the caller");
    } catch (const std::runtime_error& e) {
      QCOMPARE(QString(e.what()), QString("rank 2 failed"));
    }
    QCOMPARE(ran.load(), 3);  // one hook per rank (same owner key, three registrations), once
    QCOMPARE(removed_ran.load(), 0);
  }

  // The rank that finds the mismatch throws only once every rank has finished reading the
  // mailboxes: it used to throw at once and free its buffers while rank 1 was still copying
  // from them (a use after free ThreadSanitizer reported). Rank 1's exchange now completes.
  void countMismatchIsReported() {
    QString message;
    std::atomic<bool> rank1_done{false};
    try {
      run_local_ranks(2, [&](Communicator& c) {
        std::vector<int64_t> send = {1, 1}, recv = {1, 1};
        if (c.rank() == 0) recv[1] = 2;  // expects more than rank 1 sends
        float out[3] = {};
        float in[2] = {1, 2};
        c.all_to_all_v(in, send, out, recv, CommPurpose::dispatch);
        if (c.rank() == 1) rank1_done = true;
      });
    } catch (const CommAborted&) {
      message = "aborted";
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    QVERIFY2(message.contains("expected 8 bytes from rank 1, which sent 4"), qPrintable(message));
    QVERIFY(rank1_done);
  }

  void badArgumentsThrow() {
    run_local_ranks(1, [](Communicator& c) {
      std::vector<int64_t> two = {1, 1};
      float x = 0;
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                               c.all_to_all_v(&x, two, &x, two, CommPurpose::dispatch));
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                               c.broadcast(&x, 4, 1, CommPurpose::weights));
    });
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, run_local_ranks(0, [](Communicator&) {}));
  }
};

QTEST_GUILESS_MAIN(TestCommunicator)
#include "test_communicator.moc"
