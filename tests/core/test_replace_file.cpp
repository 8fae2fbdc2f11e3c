// A file written whole or not at all (core/util/replace_file.h): the contents land, an old file
// is replaced whole, and a failed write (an exception of the writer, no such folder, a folder
// in the way, a flush to disk that fails) leaves the old file as it was and nothing else in the
// folder.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/util/replace_file.h"

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The folder's entries by name: a leftover temporary would show here.
QStringList entries(const fs::path& dir) {
  QStringList names;
  for (const auto& e : fs::directory_iterator(dir)) names << QString::fromStdString(e.path().filename().string());
  names.sort();
  return names;
}

}  // namespace

class TestReplaceFile : public QObject {
  Q_OBJECT
 private slots:
  void writesAndReplacesWhole() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path target = fs::path(dir.path().toStdString()) / "metrics.csv";
    mok::replace_file(target.string(), std::string_view("first\n"));
    QCOMPARE(read_all(target), std::string("first\n"));
    mok::replace_file(target.string(), [](std::ostream& out) { out << "second, longer\n" << 42 << '\n'; });
    QCOMPARE(read_all(target), std::string("second, longer\n42\n"));
    QCOMPARE(entries(target.parent_path()), QStringList{"metrics.csv"});
  }

  void aThrowingWriterLeavesTheOldFile() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path target = fs::path(dir.path().toStdString()) / "config.yaml";
    mok::replace_file(target.string(), std::string_view("kept: true\n"));
    auto half_then_fail = [](std::ostream& out) {
      out << "half a fi";
      throw std::runtime_error("the store went away");
    };
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, mok::replace_file(target.string(), half_then_fail));
    QCOMPARE(read_all(target), std::string("kept: true\n"));
    QCOMPARE(entries(target.parent_path()), QStringList{"config.yaml"});
    QVERIFY(!fs::exists(mok::replace_file_temporary(target.string())));
  }

  // The flush to disk fails (here the temporary vanished before it, so the flush cannot open
  // it): an error that says so, the old file kept, and nothing published in its place.
  void aFailedFlushPublishesNothing() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path target = fs::path(dir.path().toStdString()) / "state.json";
    mok::replace_file(target.string(), std::string_view("{\"step\": 4}\n"));
    const std::string tmp = mok::replace_file_temporary(target.string());
    auto write_then_lose = [&](std::ostream& out) {
      out << "{\"step\": 8}\n";
      out.flush();
      fs::remove(tmp);  // the stream still writes to the unlinked file; the flush finds none
    };
    try {
      mok::replace_file(target.string(), write_then_lose);
      QFAIL("published a file that was never flushed");
    } catch (const mok::ReplaceFileError& e) {
      QVERIFY2(QString(e.what()).contains("state.json: cannot write: cannot flush to disk"), e.what());
    }
    QCOMPARE(read_all(target), std::string("{\"step\": 4}\n"));
    QCOMPARE(entries(target.parent_path()), QStringList{"state.json"});
  }

  void unwritablePlacesSayWhy() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path root(dir.path().toStdString());
    // No such folder.
    try {
      mok::replace_file((root / "no" / "such" / "x.csv").string(), std::string_view("x"));
      QFAIL("wrote into a missing folder");
    } catch (const mok::ReplaceFileError& e) {
      QVERIFY2(QString(e.what()).contains("x.csv: cannot write: No such file or directory"), e.what());
      QCOMPARE(QString::fromStdString(e.reason), QString("No such file or directory"));
    }
    // A file where a folder should be.
    mok::replace_file((root / "plain").string(), std::string_view("a file"));
    QVERIFY_THROWS_EXCEPTION(mok::ReplaceFileError, mok::replace_file((root / "plain" / "x").string(), std::string_view("x")));
    // A folder at the target itself: the temporary is written, the rename refused, and removed.
    fs::create_directory(root / "taken");
    QVERIFY_THROWS_EXCEPTION(mok::ReplaceFileError, mok::replace_file((root / "taken").string(), std::string_view("x")));
    QVERIFY(fs::is_directory(root / "taken"));
    QCOMPARE(entries(root), (QStringList{"plain", "taken"}));
  }
};

QTEST_GUILESS_MAIN(TestReplaceFile)
#include "test_replace_file.moc"
