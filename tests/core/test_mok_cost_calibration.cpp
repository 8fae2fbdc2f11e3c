// calibrate_mok_cost over local ranks:
//  - every rank gets the same link and compute rates (the cost model's decisions must agree
//    across ranks), both positive and finite;
//  - through an emulated link that sleeps its modeled time, the measured bandwidth cannot
//    exceed the emulated one (the probe takes at least that long): the probe goes through the
//    communicator, not around it;
//  - through a rank's data plane the probe is that plane's traffic (every byte counted);
//  - bad arguments are refused.
#include <QtTest>

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/parallel/local_communicator.h"
#include "core/parallel/mok_cost_calibration.h"

using namespace mok;

class TestMokCostCalibration : public QObject {
  Q_OBJECT
 private slots:
  void everyRankGetsTheSameRates();
  void emulatedLinkBoundsTheMeasuredBandwidth();
  void theProbeGoesThroughTheDataPlane();
  void badArgumentsAreRefused();
};

namespace {

std::vector<MokCalibration> calibrate(int R, const LinkModel& link, int64_t probe) {
  std::vector<MokCalibration> out(static_cast<size_t>(R));
  std::mutex m;
  run_local_ranks(
      R,
      [&](Communicator& comm) {
        const MokCalibration c = calibrate_mok_cost(comm, 64, 32, probe);
        std::lock_guard<std::mutex> lock(m);
        out[static_cast<size_t>(comm.rank())] = c;
      },
      link);
  return out;
}

}  // namespace

void TestMokCostCalibration::everyRankGetsTheSameRates() {
  for (int R : {2, 3}) {
    const auto cal = calibrate(R, LinkModel{}, int64_t{1} << 18);
    for (const MokCalibration& c : cal) {
      QVERIFY(std::isfinite(c.link_gbps) && c.link_gbps > 0);
      QVERIFY(std::isfinite(c.compute_gflops) && c.compute_gflops > 0);
      QCOMPARE(c.link_gbps, cal[0].link_gbps);  // exactly: one maximised time on every rank
      QCOMPARE(c.compute_gflops, cal[0].compute_gflops);
    }
  }
}

void TestMokCostCalibration::emulatedLinkBoundsTheMeasuredBandwidth() {
  LinkModel slow;
  slow.gbps = 0.05;  // 1 MiB per peer → ≥ 21 ms per probe
  slow.latency_us = 10;
  slow.sleep = true;
  const auto cal = calibrate(2, slow, int64_t{1} << 20);
  qInfo("emulated 0.05 GB/s, measured %.4g GB/s", cal[0].link_gbps);
  QVERIFY(cal[0].link_gbps > 0);
  QVERIFY2(cal[0].link_gbps <= 0.05, qPrintable(QString::number(cal[0].link_gbps)));
}

void TestMokCostCalibration::theProbeGoesThroughTheDataPlane() {
  constexpr int64_t kProbe = 1001;  // bytes: 251 f32 words, 1004 bytes, per peer and repeat
  std::mutex m;
  std::vector<int64_t> sent(2, -1);
  std::vector<MokCalibration> cal(2);
  run_local_ranks(2, [&](Communicator& comm) {
    HostDataPlane plane(comm);
    const int64_t before = comm.stats().sent(CommPurpose::control, 1 - comm.rank());
    const MokCalibration c = calibrate_mok_cost(plane, 64, 32, kProbe);
    const int64_t after = comm.stats().sent(CommPurpose::control, 1 - comm.rank());
    std::lock_guard<std::mutex> lock(m);
    sent[static_cast<size_t>(comm.rank())] = after - before;
    cal[static_cast<size_t>(comm.rank())] = c;
  });
  for (int r = 0; r < 2; ++r) {
    // Four probes of 1004 bytes to the peer, plus the two 8-byte maxima and nothing else large.
    QVERIFY2(sent[r] >= 4 * 1004 && sent[r] < 4 * 1004 + 256, qPrintable(QString::number(sent[r])));
    QVERIFY(cal[r].link_gbps > 0 && std::isfinite(cal[r].link_gbps));
    QCOMPARE(cal[r].link_gbps, cal[0].link_gbps);
    QCOMPARE(cal[r].compute_gflops, cal[0].compute_gflops);
  }
  // The rate is priced on the bytes that moved: (R − 1) · 1004 over the timed seconds.
  QCOMPARE(cal[0].link_gbps, 1004.0 / cal[0].link_seconds / 1e9);
}

void TestMokCostCalibration::badArgumentsAreRefused() {
  bool refused = false;
  try {
    run_local_ranks(2, [](Communicator& comm) { calibrate_mok_cost(comm, 0, 32); });
  } catch (const std::invalid_argument&) {
    refused = true;
  }
  QVERIFY(refused);
}

QTEST_GUILESS_MAIN(TestMokCostCalibration)
#include "test_mok_cost_calibration.moc"
