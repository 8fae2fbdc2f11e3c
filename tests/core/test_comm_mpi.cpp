// MpiCommunicator, one process per rank: `mpirun -np R --oversubscribe` runs the helper
// mok_mpi_comm_check (tests/mpi), whose ranks check exact all-to-all delivery, bitwise
// identical all-reduce results and byte counters, and exit non-zero on any failure.
#include <QtTest>

#include <unistd.h>

#include "core/parallel/mpi_communicator.h"

class TestCommMpi : public QObject {
  Q_OBJECT

  static QStringList mpirun_args(int ranks, const QString& program) {
    QStringList args = {"-np", QString::number(ranks), "--oversubscribe"};
    if (geteuid() == 0) args << "--allow-run-as-root";
    args << program;
    return args;
  }

  void run_job(int ranks) {
#if !defined(MOK_MPI_CHECK_PATH)
    QFAIL("this build has no MPI support: install libopenmpi-dev (tools/bootstrap.sh does) "
          "and reconfigure");
#else
    QVERIFY(mok::mpi_available());
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    QVERIFY2(!mpirun.isEmpty(),
             "mpirun not found on PATH: install openmpi-bin (tools/bootstrap.sh does)");
    QProcess job;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    // Containers often forbid the cross-memory-attach single-copy path; plain shared
    // memory works everywhere.
    env.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    job.setProcessEnvironment(env);
    job.start(mpirun, mpirun_args(ranks, MOK_MPI_CHECK_PATH));
    QVERIFY2(job.waitForStarted(30000), "mpirun did not start");
    QVERIFY2(job.waitForFinished(120000), "mpirun job did not finish within 120 s");
    const QString out = QString::fromLocal8Bit(job.readAllStandardOutput());
    const QString err = QString::fromLocal8Bit(job.readAllStandardError());
    const QString both = "stdout:\n" + out + "\nstderr:\n" + err;
    QVERIFY2(job.exitStatus() == QProcess::NormalExit && job.exitCode() == 0, qPrintable(both));
    for (int r = 0; r < ranks; ++r)
      QVERIFY2(out.contains(QString("rank %1 of %2: ok (0 failures").arg(r).arg(ranks)),
               qPrintable(both));
#endif
  }

 private slots:
  void launchDetectionReadsTheEnvironment() {
    const QByteArray saved = qgetenv("OMPI_COMM_WORLD_SIZE");
    qputenv("OMPI_COMM_WORLD_SIZE", "2");
    QVERIFY(mok::mpi_launch_detected());
    if (saved.isNull()) qunsetenv("OMPI_COMM_WORLD_SIZE");
    else qputenv("OMPI_COMM_WORLD_SIZE", saved);
  }
  void twoProcesses() { run_job(2); }
  void threeProcesses() { run_job(3); }
};

QTEST_GUILESS_MAIN(TestCommMpi)
#include "test_comm_mpi.moc"
