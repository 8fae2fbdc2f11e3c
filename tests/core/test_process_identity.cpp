// process_is_alive: this process is alive; a pid that is not one (zero, negative, or a damaged
// value beyond pid_t that would wrap onto a real pid or onto 0, "this process group") is not.
#include <QtTest>

#include <unistd.h>

#include <cstdint>

#include "core/store/process_identity.h"

using namespace mok;

class TestProcessIdentity : public QObject {
  Q_OBJECT
 private slots:
  void thisProcessIsAlive() { QVERIFY(process_is_alive(current_process_identity())); }

  void pidsOutsidePidTAreNotAlive() {
    ProcessIdentity who = current_process_identity();
    const int64_t own = who.pid;
    for (const int64_t pid : {int64_t(0), int64_t(-1), int64_t(1) << 32, (int64_t(1) << 32) + own}) {
      who.pid = pid;
      QVERIFY2(!process_is_alive(who), qPrintable(QString("pid %1 reported alive").arg(pid)));
    }
  }
};

QTEST_MAIN(TestProcessIdentity)
#include "test_process_identity.moc"
