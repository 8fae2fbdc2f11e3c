// The CUDA kernels against their CPU references (kernels/checks/cuda_op_checks.h). Without a CUDA
// device (CI) the suite skips with the reason; the GPU machine runs it and tools/gpu.
#include <QtTest>

#include <chrono>

#include "kernels/checks/cuda_op_checks.h"
#include "kernels/device_info.h"

class TestCudaOps : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    const auto q = mok::cuda::query_devices();
    if (q.devices.empty()) {
      QSKIP(qPrintable("no CUDA device here (" + QString::fromStdString(q.unavailable_reason) +
                       "); these checks run on a GPU machine"));
    }
    qInfo("device: %s (sm_%d%d)", q.devices[0].name.c_str(), q.devices[0].sm_major, q.devices[0].sm_minor);
  }

  void kernelsMatchReferences() {
    const auto seed = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (const auto& check : mok::cuda::run_cuda_op_checks(seed)) {
      qInfo("%-28s rel.err %.3e (tol %.0e)", check.name.c_str(), check.relative_error, check.tolerance);
      QVERIFY2(check.passed(), check.name.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestCudaOps)
#include "test_cuda_ops.moc"
