// LinkModel: the modeled time of a collective follows the documented formula
// (latency + bytes / bandwidth per non-empty remote message, the larger of the send and
// receive sums), and a communicator accumulates exactly that in modeled_comm_seconds.
#include <QtTest>

#include <vector>

#include "core/parallel/local_communicator.h"

using namespace mok;

class TestCommLinkModel : public QObject {
  Q_OBJECT
 private slots:
  void messageCost() {
    LinkModel m{.gbps = 2.0, .latency_us = 5.0};
    QVERIFY(m.enabled());
    QCOMPARE(m.message_seconds(0), 0.0);
    QCOMPARE(m.message_seconds(2'000'000), 5e-6 + 1e-3);
    LinkModel off;
    QVERIFY(!off.enabled());
    QCOMPARE(off.message_seconds(1 << 20), 0.0);
  }

  void collectiveIsMaxOfSendAndReceive() {
    LinkModel m{.gbps = 1.0, .latency_us = 10.0};
    // rank 1 of 4: sends 1e6 B to rank 0, 3e6 B to itself (free), nothing to 2, 1e6 B to 3;
    // receives 4e6 B from rank 2 only.
    const std::vector<int64_t> send = {1'000'000, 3'000'000, 0, 1'000'000};
    const std::vector<int64_t> recv = {0, 3'000'000, 4'000'000, 0};
    const double send_s = 2 * (10e-6 + 1e-3);
    const double recv_s = 10e-6 + 4e-3;
    QCOMPARE(m.collective_seconds(send, recv, 1), std::max(send_s, recv_s));
    QCOMPARE(m.collective_seconds(recv, send, 1), std::max(send_s, recv_s));
    QCOMPARE(m.barrier_seconds(4), 3 * 10e-6);
    QCOMPARE(m.barrier_seconds(1), 0.0);
  }

  void fromConfig() {
    ParallelConfig p;
    p.link_gbps = 12.5;
    p.link_latency_us = 3.0;
    const LinkModel m = LinkModel::from_config(p, true);
    QCOMPARE(m.gbps, 12.5);
    QCOMPARE(m.latency_us, 3.0);
    QVERIFY(m.sleep);
    p.link_gbps = -1.0;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, LinkModel::from_config(p));
  }

  // Broadcast of B bytes on 3 ranks: the root sends two messages, the others receive one.
  void communicatorAccumulatesModeledTime() {
    for (bool sleep : {false, true}) {
      const LinkModel link{.gbps = 10.0, .latency_us = 50.0, .sleep = sleep};
      const int R = 3;
      const int64_t B = 400'000;
      std::vector<double> modeled(R);
      run_local_ranks(
          R,
          [&](Communicator& c) {
            std::vector<uint8_t> data(B, static_cast<uint8_t>(c.rank()));
            c.broadcast(data.data(), B, 0, CommPurpose::weights);
            c.barrier();
            modeled[c.rank()] = c.modeled_comm_seconds();
          },
          link);
      const double msg = 50e-6 + B / 10e9;
      const double barrier = 2 * 50e-6;
      QCOMPARE(modeled[0], 2 * msg + barrier);
      QCOMPARE(modeled[1], msg + barrier);
      QCOMPARE(modeled[2], msg + barrier);
    }
  }

  void noLinkNoModeledTime() {
    double modeled = -1;
    run_local_ranks(2, [&](Communicator& c) {
      std::vector<float> x(1000, 1.0f);
      c.all_reduce_sum(x.data(), 1000, CommPurpose::gradients);
      if (c.rank() == 0) modeled = c.modeled_comm_seconds();
    });
    QCOMPARE(modeled, 0.0);
  }
};

QTEST_GUILESS_MAIN(TestCommLinkModel)
#include "test_comm_link_model.moc"
