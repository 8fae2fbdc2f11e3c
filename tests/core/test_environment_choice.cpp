// Kernel switches read from the environment (core/util/environment_choice.h): unset or empty
// means the default, a listed value is taken, and a typo is refused with the values listed
// instead of silently meaning the default.
#include <QtTest>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/util/environment_choice.h"

using namespace mok;

class TestEnvironmentChoice : public QObject {
  Q_OBJECT
  static constexpr const char* kName = "MOK_TEST_ENVIRONMENT_CHOICE";
 private slots:
  void cleanup() { unsetenv(kName); }

  void unsetOrEmptyIsTheDefault() {
    unsetenv(kName);
    QCOMPARE(QString::fromStdString(environment_choice(kName, {"own", "cudnn"})), QString());
    setenv(kName, "", 1);
    QCOMPARE(QString::fromStdString(environment_choice(kName, {"own", "cudnn"})), QString());
  }

  void aListedValueIsTaken() {
    setenv(kName, "cudnn", 1);
    QCOMPARE(QString::fromStdString(environment_choice(kName, {"own", "cudnn"})), QString("cudnn"));
  }

  void aTypoIsRefusedWithTheValues() {
    setenv(kName, "Own", 1);
    try {
      environment_choice(kName, {"own", "cudnn"});
      QFAIL("a value that is not listed was taken");
    } catch (const std::invalid_argument& e) {
      const QString message = e.what();
      QVERIFY2(message.contains("MOK_TEST_ENVIRONMENT_CHOICE=Own"), qPrintable(message));
      QVERIFY2(message.contains("own, cudnn"), qPrintable(message));
    }
  }
};

QTEST_APPLESS_MAIN(TestEnvironmentChoice)
#include "test_environment_choice.moc"
