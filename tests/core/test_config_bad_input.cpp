// Configs that used to be read wrongly or refused with a misleading message: an unclosed
// quote, bytes YAML cannot hold, explicit tags, deep nesting, over-long run names, a stray
// comma, out-of-range counts, and paths that are not regular files. Each must be refused at its file:line:column and key.
#include <QtTest>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/config/config_io.h"
#include "core/data/corpus.h"

using namespace mok;

#define COMPARE_STR(a, b) QCOMPARE(QString::fromStdString(std::string(a)), QString::fromStdString(std::string(b)))

namespace {

// The ConfigError `text` (parsed as file "mine.yaml") is refused with; fails the test when
// it parses.
ConfigError refusal(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_experiment_config(text, "mine.yaml", overrides);
  } catch (const ConfigError& e) {
    return e;
  }
  return ConfigError("(parsed)", 0, 0, "", "no error");
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

class TestConfigBadInput : public QObject {
  Q_OBJECT
 private slots:
  // yaml-cpp reads `name: 'fz` to the end of the file: every key below became the name and
  // the defaults ran.
  void unclosedQuoteIsRefusedAtItsKey() {
    const ConfigError e = refusal("name: 'fz\nseed: 5\nmodel: {layers: 2}\n");
    COMPARE_STR(e.file, "mine.yaml");
    QCOMPARE(e.line, 1);
    QCOMPARE(e.column, 7);
    COMPARE_STR(e.key_path, "name");
    QVERIFY2(contains(e.message, "never closed"), e.what());
  }

  // A quote that closes lines later (on a quote further down) swallowed the lines between.
  void quoteClosedOnALaterLineIsRefused() {
    const ConfigError e = refusal("model:\n  moe_layers: \"1,\n  layers: 4\n  d_model: \"\n");
    QCOMPARE(e.line, 2);
    QCOMPARE(e.column, 15);
    COMPARE_STR(e.key_path, "model.moe_layers");
    QVERIFY2(contains(e.message, "closes only on line 4"), e.what());
  }

  void quotesOnOneLineAndBlockScalarsStillRead() {
    const ExperimentConfig c = parse_experiment_config(
        "name: 'it''s \"fine\"'\nmodel:\n  moe_layers: \"a\\x6cl\"\ndata:\n  corpus: |\n    my corpus\n", "mine.yaml");
    COMPARE_STR(c.name, "it's \"fine\"");
    COMPARE_STR(c.model.moe_layers, "all");
    COMPARE_STR(c.data.corpus, "my corpus\n");
  }

  // yaml-cpp read a NUL byte as part of an escape and said "unknown escape character: z".
  void nulByteIsNamedWithItsPlace() {
    const ConfigError e = refusal(std::string("name: a\0b\nseed: 5\n", 17));
    QCOMPARE(e.line, 1);
    QCOMPARE(e.column, 8);
    COMPARE_STR(e.key_path, "name");
    QVERIFY2(contains(e.message, "NUL byte"), e.what());
  }

  void invalidUtf8IsNamedWithItsPlaceAndKey() {
    // Latin-1 é in a value, two levels down; the column counts characters (ü is one).
    const ConfigError e = refusal("name: \xC3\xBC\nrouting:\n  policy: caf\xE9\n");
    QCOMPARE(e.line, 3);
    QCOMPARE(e.column, 14);
    COMPARE_STR(e.key_path, "routing.policy");
    QVERIFY2(contains(e.message, "0xE9") && contains(e.message, "UTF-8"), e.what());
  }

  void controlCharacterInAnOverrideIsRefused() {
    const ConfigError e = refusal("name: x\n", {"name=a\x1b[31mb"});
    COMPARE_STR(e.file, "--set");
    QCOMPARE(e.line, 1);
    QCOMPARE(e.column, 7);
    QVERIFY2(contains(e.message, "escape character"), e.what());
  }

  // "expected an integer, got '2'" gave no clue that the value was a string by its tag.
  void stringTagIsNamedInTheMessage() {
    const ConfigError e = refusal("model:\n  layers: !!str 2\n");
    QCOMPARE(e.line, 2);
    COMPARE_STR(e.key_path, "model.layers");
    QVERIFY2(contains(e.message, "tagged !!str"), e.what());
  }

  void matchingTagsAreAccepted() {
    const ExperimentConfig c =
        parse_experiment_config("model:\n  layers: !!int 3\ntrain:\n  lr: !!float 0.01\n", "mine.yaml");
    QCOMPARE(c.model.layers, 3);
    QCOMPARE(c.train.lr, 0.01);
  }

  // yaml-cpp's recursion guard said only "bad file".
  void deepNestingSaysSo() {
    const ConfigError e = refusal("name: x\nmodel: " + std::string(3000, '[') + std::string(3000, ']') + "\n");
    QCOMPARE(e.line, 2);
    QVERIFY(e.column > 0);
    QVERIFY2(contains(e.message, "nested more than"), e.what());
  }

  // A 300-character name trained and then failed to create its checkpoint folder.
  void overlongNameIsRefused() {
    const ConfigError e = refusal("seed: 1\nname: " + std::string(300, 'n') + "\n");
    QCOMPARE(e.line, 2);
    COMPARE_STR(e.key_path, "name");
    QVERIFY2(contains(e.message, "300 bytes") && contains(e.message, "128"), e.what());
    QVERIFY(contains(refusal("name: x\n", {"name=\"a\\nb\""}).message, "control characters"));
    // The longest accepted name still reads.
    const std::string longest(kMaxRunNameBytes, 'n');
    COMPARE_STR(parse_experiment_config("name: " + longest + "\n", "mine.yaml").name, longest);
  }

  // A FIFO blocked the reader; /dev/zero never ends; both are said to be what they are.
  // yaml-cpp 0.7's LoadAll looped on these forever, allocating until the process was killed
  // (found by tests/fuzz/fuzz_config_yaml).
  void strayCommaIsASyntaxErrorNotAHang() {
    for (const char* text : {", data: {seq_len: 16}}\n", ",\n", "name: a\n,\n"}) {
      const ConfigError e = refusal(text);
      QVERIFY2(e.line >= 1 && contains(e.what(), "YAML syntax error"), e.what());
    }
    const ConfigError e = refusal(", data: {seq_len: 16}}\n");
    COMPARE_STR(e.what(), "mine.yaml:1:1: YAML syntax error: unexpected ','");
  }

  // The validator built an owner per expert before reporting the count out of range.
  void outOfRangeCountsAreReportedNotAllocated() {
    const ConfigError e = refusal("model: {experts: 2147483647}\n");
    COMPARE_STR(e.key_path, "model.experts");
    QCOMPARE(e.line, 1);
  }

  void specialFilesAreRefusedByWhatTheyAre() {
    QTemporaryDir dir;
    const std::string fifo = dir.filePath("pipe").toStdString();
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    try {
      load_experiment_config(fifo);
      QFAIL("a FIFO was read as a config");
    } catch (const ConfigError& e) {
      QVERIFY2(contains(e.message, "FIFO") && contains(e.message, "not a regular file"), e.what());
    }
    try {
      load_experiment_config("/dev/zero");
      QFAIL("/dev/zero was read as a config");
    } catch (const ConfigError& e) {
      QVERIFY2(contains(e.message, "character device"), e.what());
    }
    try {
      load_corpus(fifo);
      QFAIL("a FIFO was read as a corpus");
    } catch (const CorpusError& e) {
      QVERIFY2(contains(e.what(), "FIFO") && contains(e.what(), "not a regular file or folder"), e.what());
    }
    try {
      load_corpus("/dev/null");
      QFAIL("/dev/null was read as a corpus");
    } catch (const CorpusError& e) {
      QVERIFY2(contains(e.what(), "character device"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestConfigBadInput)
#include "test_config_bad_input.moc"
