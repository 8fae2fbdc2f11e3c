// MOK_OP_PROFILE=FIRST:COUNT (core/train/op_profile_window.h): the window of steps a run
// profiles op by op. Only two positive integers around one colon name a window; anything
// else profiles nothing (and the run says so).
#include <QtTest>

#include <cstdlib>

#include "core/train/op_profile_window.h"

using namespace mok;

class TestOpProfileWindow : public QObject {
  Q_OBJECT
 private slots:
  void twoPositiveIntegersNameTheWindow() {
    const auto w = parse_op_profile_steps("6:5");
    QVERIFY(w.has_value());
    QCOMPARE(w->first, int64_t{6});
    QCOMPARE(w->count, int64_t{5});
    const auto big = parse_op_profile_steps("1:100000");
    QVERIFY(big.has_value());
    QCOMPARE(big->count, int64_t{100000});
  }

  void anythingElseIsRefused() {
    for (const char* bad : {"", "6", "6:", ":5", "0:5", "6:0", "-1:5", "6:-2", "6:5:1", "a:b", " 6:5", "6:5 ",
                            "6.5:2", "99999999999999999999:1"})
      QVERIFY2(!parse_op_profile_steps(bad).has_value(), bad);
  }

  void aMalformedVariableWarnsAndAWellFormedOneDoesNot() {
    qputenv("MOK_OP_PROFILE", "steps 6 to 10");
    const OpProfileWindow bad;
    QVERIFY2(bad.warning().find("MOK_OP_PROFILE='steps 6 to 10'") != std::string::npos, bad.warning().c_str());
    QVERIFY2(bad.warning().find("FIRST:COUNT") != std::string::npos, bad.warning().c_str());
    qputenv("MOK_OP_PROFILE", "6:5");
    QVERIFY(OpProfileWindow().warning().empty());
    qunsetenv("MOK_OP_PROFILE");
    QVERIFY(OpProfileWindow().warning().empty());
  }
};

QTEST_GUILESS_MAIN(TestOpProfileWindow)
#include "test_op_profile_window.moc"
