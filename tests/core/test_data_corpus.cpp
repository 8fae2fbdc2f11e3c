// Corpus loading and splitting: Brown tag stripping and detokenization, the real Brown
// corpus, UTF-8 files and folders, errors for bad input, and the deterministic split.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/data/corpus.h"
#include "core/data/corpus_split.h"

namespace fs = std::filesystem;

namespace {
void write_file(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string error_of(const std::string& spec) {
  try {
    mok::load_corpus(spec);
  } catch (const mok::CorpusError& e) {
    return e.what();
  }
  return "";
}

mok::Corpus numbered_corpus(int n) {
  mok::Corpus c;
  c.source = "test";
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "doc%03d", i);
    c.documents.push_back({name, "text of " + std::string(name)});
  }
  return c;
}
}  // namespace

class TestDataCorpus : public QObject {
  Q_OBJECT
 private slots:
  void stripsTagsAfterLastSlash() {
    QCOMPARE(mok::brown_detokenize_line("\tThe/at jury/nn said/vbd ./."), std::string("The jury said."));
    // Words may contain '/': the tag is after the last one.
    QCOMPARE(mok::brown_detokenize_line("and/or/cc 1/2/cd mg/l/hr/nn //in"), std::string("and/or 1/2 mg/l/hr /"));
    // Tag suffixes (-hl, -tl, *) go with the tag.
    QCOMPARE(mok::brown_detokenize_line("Merger/nn-hl proposed/vbn-hl"), std::string("Merger proposed"));
    QCOMPARE(mok::brown_detokenize_line("didn't/dod* go/vb"), std::string("didn't go"));
  }

  void detokenizesPunctuationAndQuotes() {
    QCOMPARE(mok::brown_detokenize_line("produced/vbd ``/`` no/at evidence/nn ''/'' that/cs ,/, he/pps said/vbd ./."),
             std::string("produced \"no evidence\" that, he said."));
    QCOMPARE(mok::brown_detokenize_line("(/( see/vb below/rb )/) ;/. why/wrb ?/. yes/rb !/. :/:"),
             std::string("(see below); why? yes!:"));
    QCOMPARE(mok::brown_detokenize_line("the/at farmers/nns '/' land/nn"), std::string("the farmers' land"));
    QCOMPARE(mok::brown_detokenize_line("one/cd --/-- two/cd"), std::string("one -- two"));
    QCOMPARE(mok::brown_detokenize_line("   \t  "), std::string());
  }

  void keepsSentenceAndParagraphLines() {
    const std::string tagged =
        "\n\n\tFirst/od sentence/nn ./.\nSecond/od one/cd ./.\n\n\n\tNew/jj paragraph/nn ./.\n\n";
    QCOMPARE(mok::brown_file_to_text(tagged), std::string("First sentence.\nSecond one.\n\nNew paragraph."));
  }

  void loadsTheBrownCorpus() {
    if (mok::find_brown_corpus_dir().empty()) QSKIP("Brown corpus folder missing (run tools/bootstrap.sh build)");
    const mok::Corpus c = mok::load_corpus("brown");
    QCOMPARE(c.documents.size(), size_t(500));
    QCOMPARE(c.documents.front().name, std::string("ca01"));
    QCOMPARE(c.documents.back().name, std::string("cr09"));
    QVERIFY(c.total_bytes() > 5'000'000 && c.total_bytes() < 8'000'000);
    QVERIFY(c.documents.front().text.starts_with("The Fulton County Grand Jury said Friday an investigation of "
                                                 "Atlanta's recent primary election produced \"no evidence\""));
    for (const auto& d : c.documents) {
      QVERIFY2(d.text.find("/at ") == std::string::npos, d.name.c_str());
      QVERIFY2(d.text.find("/nn") == std::string::npos, d.name.c_str());
      QVERIFY2(d.text.find("``") == std::string::npos, d.name.c_str());
      QVERIFY2(d.text.find(" ,") == std::string::npos, d.name.c_str());
      QCOMPARE(mok::find_invalid_utf8(d.text), int64_t(-1));
    }
    // The hash is a function of the content.
    QCOMPARE(c.content_hash(), mok::load_corpus("brown").content_hash());
  }

  void loadsAFileAndAFolder() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const fs::path root(tmp.path().toStdString());
    write_file(root / "one.txt", "\xEF\xBB\xBFh\xC3\xA9llo w\xC3\xB6rld\n");
    const mok::Corpus file = mok::load_corpus((root / "one.txt").string());
    QCOMPARE(file.documents.size(), size_t(1));
    QCOMPARE(file.documents[0].name, std::string("one.txt"));
    QCOMPARE(file.documents[0].text, std::string("h\xC3\xA9llo w\xC3\xB6rld\n"));  // BOM dropped

    const fs::path dir = root / "folder";
    write_file(dir / "b.txt", "bee");
    write_file(dir / "a" / "z.md", "zed");
    write_file(dir / "a" / "c.txt", "sea");
    write_file(dir / ".hidden", "no");
    write_file(dir / ".git" / "config", "no");
    write_file(dir / "empty.txt", "");
    const mok::Corpus folder = mok::load_corpus(dir.string());
    QCOMPARE(folder.documents.size(), size_t(3));
    QCOMPARE(folder.documents[0].name, std::string("a/c.txt"));
    QCOMPARE(folder.documents[1].name, std::string("a/z.md"));
    QCOMPARE(folder.documents[2].name, std::string("b.txt"));
    QCOMPARE(folder.documents[0].text, std::string("sea"));
    QCOMPARE(folder.documents[2].text, std::string("bee"));
  }

  void rejectsInvalidUtf8WithOffset() {
    QCOMPARE(mok::find_invalid_utf8("plain"), int64_t(-1));
    QCOMPARE(mok::find_invalid_utf8("\xF0\x9F\x98\x80 ok \xE2\x82\xAC"), int64_t(-1));
    QCOMPARE(mok::find_invalid_utf8("ab\x80"), int64_t(2));          // stray continuation
    QCOMPARE(mok::find_invalid_utf8("abc\xC0\xAF"), int64_t(3));     // overlong '/'
    QCOMPARE(mok::find_invalid_utf8("x\xED\xA0\x80"), int64_t(1));   // surrogate
    QCOMPARE(mok::find_invalid_utf8("xy\xE2\x82"), int64_t(2));      // truncated
    QCOMPARE(mok::find_invalid_utf8("\xF4\x90\x80\x80"), int64_t(0));  // above U+10FFFF

    QTemporaryDir tmp;
    const fs::path root(tmp.path().toStdString());
    write_file(root / "dir" / "good.txt", "fine");
    write_file(root / "dir" / "bad.txt", "hello \xFF world");
    const std::string msg = error_of((root / "dir").string());
    QVERIFY2(msg.find("bad.txt") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("offset 6") != std::string::npos, msg.c_str());
  }

  void rejectsEmptyAndMissingCorpora() {
    QTemporaryDir tmp;
    const fs::path root(tmp.path().toStdString());
    fs::create_directories(root / "empty");
    write_file(root / "empty" / ".hidden", "x");
    QVERIFY(error_of((root / "empty").string()).find("empty") != std::string::npos);
    write_file(root / "zero.txt", "");
    QVERIFY(error_of((root / "zero.txt").string()).find("empty") != std::string::npos);
    const std::string missing = error_of((root / "nope").string());
    QVERIFY2(missing.find("nope") != std::string::npos, missing.c_str());
  }

  void splitIsDeterministicAndDisjoint() {
    const mok::Corpus c = numbered_corpus(100);
    const mok::CorpusSplit a = mok::split_corpus(c, 0.1);
    const mok::CorpusSplit b = mok::split_corpus(c, 0.1);
    QCOMPARE(a.val.size(), size_t(10));
    QCOMPARE(a.train.size(), size_t(90));
    std::set<std::string> train, val;
    for (size_t i = 0; i < a.train.size(); ++i) {
      train.insert(a.train[i].name);
      QCOMPARE(a.train[i].name, b.train[i].name);
    }
    for (size_t i = 0; i < a.val.size(); ++i) {
      val.insert(a.val[i].name);
      QCOMPARE(a.val[i].name, b.val[i].name);
    }
    for (const auto& n : val) QVERIFY(!train.count(n));
    QCOMPARE(train.size() + val.size(), size_t(100));
    // Evenly spread: every 10th document.
    QCOMPARE(a.val[0].name, std::string("doc009"));
    QCOMPARE(a.val[9].name, std::string("doc099"));
  }

  void splitKeepsBothSidesNonEmpty() {
    for (int n : {2, 3, 7}) {
      const mok::CorpusSplit s = mok::split_corpus(numbered_corpus(n), 0.01);
      QCOMPARE(s.val.size(), size_t(1));
      QCOMPARE(s.train.size(), size_t(n - 1));
    }
    const mok::CorpusSplit most = mok::split_corpus(numbered_corpus(4), 0.99);
    QVERIFY(!most.train.empty());
    bool threw = false;
    try {
      mok::split_corpus(numbered_corpus(4), 1.0);
    } catch (const mok::CorpusError&) {
      threw = true;
    }
    QVERIFY(threw);
  }

  void splitsASingleDocumentByBytes() {
    mok::Corpus c;
    c.source = "one";
    std::string text;
    for (int i = 0; i < 1000; ++i) text += "line " + std::to_string(i) + " \xC3\xA9t\xC3\xA9\n";
    c.documents.push_back({"one.txt", text});
    const mok::CorpusSplit s = mok::split_corpus(c, 0.1);
    QCOMPARE(s.train.size(), size_t(1));
    QCOMPARE(s.val.size(), size_t(1));
    QCOMPARE(s.train[0].text + s.val[0].text, text);
    const double frac = double(s.val[0].text.size()) / double(text.size());
    QVERIFY(frac > 0.085 && frac <= 0.1);
    QCOMPARE(mok::find_invalid_utf8(s.val[0].text), int64_t(-1));
    QVERIFY(s.val[0].text.starts_with("line "));  // cut moved to a line start
  }

  void splitsBrownEvenly() {
    if (mok::find_brown_corpus_dir().empty()) QSKIP("Brown corpus folder missing (run tools/bootstrap.sh build)");
    const mok::CorpusSplit s = mok::split_corpus(mok::load_corpus("brown"), 0.05);
    QCOMPARE(s.val.size(), size_t(25));
    QCOMPARE(s.train.size(), size_t(475));
    std::set<char> genres;
    for (const auto& d : s.val) genres.insert(d.name[1]);
    QVERIFY(genres.size() >= 12);
  }
};

QTEST_GUILESS_MAIN(TestDataCorpus)
#include "test_data_corpus.moc"
