// Tokenizers: byte and BPE round trips on any bytes, the expected first merges and
// tie-break, vocabulary size, deterministic training, and save → load → same encodings.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/data/corpus.h"
#include "core/data/tokenizer_factory.h"
#include "core/util/counter_rng.h"

namespace {
std::string random_bytes(uint64_t seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(mok::counter_bits(seed, 5, i) & 0xff);
  return s;
}

// Random text from a small alphabet of ASCII and multi-byte characters, with spaces/newlines.
std::string random_text(uint64_t seed, size_t chars) {
  static const char* const alphabet[] = {"a", "b", "e", "t", "h", " ", " ", "\n", ".", ",", "1", "7",
                                         "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "  ", "\t"};
  std::string s;
  for (size_t i = 0; i < chars; ++i) s += alphabet[mok::counter_bits(seed, 9, i) % 17];
  return s;
}

std::string brown_slice(size_t max_bytes) {
  const mok::Corpus c = mok::load_corpus("brown");
  std::string s;
  for (const auto& d : c.documents) {
    if (s.size() >= max_bytes) break;
    s += d.text + "\n\n";
  }
  return s;
}

// Reference trainer: recounts every pair from scratch before each merge (slow, obvious).
std::vector<std::pair<int, int>> reference_merges(const std::string& text, int merges) {
  std::map<std::string, int64_t> counts;
  mok::bpe_pieces(text, [&](std::string_view p) { ++counts[std::string(p)]; });
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [w, c] : counts) words.push_back({std::vector<int32_t>(w.begin(), w.end()), c});
  for (auto& w : words)
    for (auto& s : w.first) s = static_cast<unsigned char>(s);
  std::vector<std::pair<int, int>> out;
  for (int k = 0; k < merges; ++k) {
    std::map<std::pair<int, int>, int64_t> pairs;
    for (const auto& [syms, c] : words)
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += c;
    if (pairs.empty()) break;
    auto best = pairs.begin();  // map order = (left, right) order, so ties keep the smallest
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    out.emplace_back(a, b);
    for (auto& [syms, c] : words) {
      std::vector<int32_t> merged;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          merged.push_back(256 + k);
          ++i;
        } else {
          merged.push_back(syms[i]);
        }
      }
      syms = merged;
    }
  }
  return out;
}

std::vector<std::pair<int, int>> merge_pairs(const mok::BpeTokenizer& t) {
  std::vector<std::pair<int, int>> out;
  for (const auto& m : t.merges()) out.emplace_back(m.left, m.right);
  return out;
}
}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT
 private slots:
  void byteTokenizerRoundTrips() {
    const mok::ByteTokenizer t;
    QCOMPARE(t.vocab_size(), 256);
    const std::string s = random_bytes(1, 5000);
    const auto ids = t.encode(s);
    QCOMPARE(ids.size(), s.size());
    for (size_t i = 0; i < s.size(); ++i) QCOMPARE(ids[i], int32_t(static_cast<unsigned char>(s[i])));
    QCOMPARE(t.decode(ids), s);
    const std::vector<int32_t> bad = {5, 256};
    QVERIFY_THROWS_EXCEPTION(mok::TokenizerError, t.decode(bad));
  }

  void piecesCoverTheText() {
    const std::string s = "Hello,  world!\n\n  It's 2024 \xC3\xA9t\xC3\xA9 ok " + std::string(200, 'x');
    std::vector<std::string> pieces;
    mok::bpe_pieces(s, [&](std::string_view p) { pieces.emplace_back(p); });
    std::string joined;
    for (const auto& p : pieces) {
      QVERIFY(!p.empty() && p.size() <= mok::kBpeMaxPieceBytes);
      joined += p;
    }
    QCOMPARE(joined, s);
    QCOMPARE(pieces[0], std::string("Hello"));
    QCOMPARE(pieces[1], std::string(","));
    QCOMPARE(pieces[2], std::string(" "));        // the extra space of a double space
    QCOMPARE(pieces[3], std::string(" world"));  // a word keeps its leading space
    QVERIFY(std::find(pieces.begin(), pieces.end(), std::string(" 2024")) != pieces.end());
    QVERIFY(std::find(pieces.begin(), pieces.end(), std::string(" \xC3\xA9t\xC3\xA9")) != pieces.end());
  }

  void bpeLearnsTheExpectedFirstMerges() {
    // Pieces "ab", " ab", " ab", " cd": (a,b)=3 first, then (' ',ab)=2, then the tie
    // (' ',c)=(c,d)=1 goes to the smaller left id (' ' = 32 < 'c' = 99).
    const std::string text = "ab ab ab cd";
    const auto t = mok::BpeTokenizer::train({text}, 260);
    QCOMPARE(t.vocab_size(), 260);
    const std::vector<std::pair<int, int>> want = {{'a', 'b'}, {' ', 256}, {' ', 'c'}, {258, 'd'}};
    QCOMPARE(merge_pairs(t), want);
    QCOMPARE(t.encode(" ab"), std::vector<int32_t>({257}));
    QCOMPARE(t.encode(" cd"), std::vector<int32_t>({259}));
    QCOMPARE(t.encode("abcd"), std::vector<int32_t>({256, 'c', 'd'}));
    QCOMPARE(t.token_bytes(259), std::string(" cd"));
  }

  void bpeMergesRepeatsLeftToRight() {
    const auto t = mok::BpeTokenizer::train({"aaaa"}, 258);
    const std::vector<std::pair<int, int>> want = {{'a', 'a'}, {256, 256}};
    QCOMPARE(merge_pairs(t), want);
    QCOMPARE(t.encode("aaaa"), std::vector<int32_t>({257}));
    QCOMPARE(t.encode("aaa"), std::vector<int32_t>({256, 'a'}));
    QCOMPARE(t.encode("aaaaa"), std::vector<int32_t>({257, 'a'}));
  }

  void bpeMatchesTheReferenceTrainer() {
    // Incremental pair-count updates give the same merges as recounting everything.
    for (uint64_t seed : {31ull, 32ull}) {
      const std::string text = random_text(seed, 6000) + " aaaaaaa aaaa abab ababab";
      const auto t = mok::BpeTokenizer::train({text}, 256 + 150);
      QCOMPARE(merge_pairs(t), reference_merges(text, 150));
    }
  }

  void bpeStopsWhenNoPairIsLeft() {
    const auto t = mok::BpeTokenizer::train({"a b"}, 1000);
    QCOMPARE(t.vocab_size(), 257);  // only (' ', 'b') is a pair
    QVERIFY_THROWS_EXCEPTION(mok::TokenizerError, mok::BpeTokenizer::train({"abc"}, 255));
  }

  void bpeRoundTripsAnyBytes() {
    const auto t = mok::BpeTokenizer::train({random_text(3, 20000)}, 400);
    QCOMPARE(t.vocab_size(), 400);
    for (uint64_t seed = 10; seed < 15; ++seed) {
      const std::string bytes = random_bytes(seed, 3000);
      QCOMPARE(t.decode(t.encode(bytes)), bytes);
      const std::string text = random_text(seed, 3000);
      const auto ids = t.encode(text);
      QVERIFY(ids.size() < text.size());  // merges learned on this kind of text compress it
      QCOMPARE(t.decode(ids), text);
    }
    QCOMPARE(t.decode(t.encode("")), std::string());
  }

  void bpeOnBrownHonorsVocabAndRoundTrips() {
    if (mok::find_brown_corpus_dir().empty()) QSKIP("Brown corpus folder missing (run tools/bootstrap.sh build)");
    const std::string text = brown_slice(600'000);
    int calls = 0, last = 0;
    const auto t = mok::BpeTokenizer::train({text}, 1024, [&](int done, int total) {
      ++calls;
      last = done;
      QCOMPARE(total, 768);
    });
    QCOMPARE(t.vocab_size(), 1024);
    QCOMPARE(calls, 768);
    QCOMPARE(last, 768);
    const auto ids = t.encode(text);
    for (int32_t id : ids) QVERIFY(id >= 0 && id < 1024);
    QCOMPARE(t.decode(ids), text);
    const double bytes_per_token = double(text.size()) / double(ids.size());
    QVERIFY2(bytes_per_token > 2.0, qPrintable(QString::number(bytes_per_token)));
    // " the" is among the commonest words of English and gets a single token.
    QCOMPARE(t.encode(" the").size(), size_t(1));

    // Training is deterministic.
    const auto again = mok::BpeTokenizer::train({text}, 1024);
    QCOMPARE(merge_pairs(again), merge_pairs(t));
  }

  void saveAndLoadGiveIdenticalEncodings() {
    QTemporaryDir tmp;
    const std::string text = random_text(21, 30000);
    const auto t = mok::BpeTokenizer::train({text}, 600);
    const std::string path = (tmp.path() + "/tok.txt").toStdString();
    t.save(path);
    const auto loaded = mok::Tokenizer::load(path);
    QCOMPARE(loaded->name(), std::string("bpe"));
    QCOMPARE(loaded->vocab_size(), t.vocab_size());
    QCOMPARE(loaded->to_text(), t.to_text());
    QCOMPARE(loaded->fingerprint(), t.fingerprint());
    const std::string probe = random_text(22, 5000) + random_bytes(23, 500);
    QCOMPARE(loaded->encode(probe), t.encode(probe));

    const auto byte = mok::Tokenizer::from_text(mok::ByteTokenizer().to_text());
    QCOMPARE(byte->name(), std::string("byte"));
    QVERIFY(byte->fingerprint() != t.fingerprint());
  }

  void rejectsBadTokenizerText() {
    const std::string good = mok::BpeTokenizer::train({"ab ab ab cd"}, 260).to_text();
    QVERIFY(mok::Tokenizer::from_text(good) != nullptr);
    auto fails = [](const std::string& text, const char* needle) {
      try {
        mok::Tokenizer::from_text(text);
      } catch (const mok::TokenizerError& e) {
        return std::string(e.what()).find(needle) != std::string::npos;
      }
      return false;
    };
    QVERIFY(fails("mok-tokenizer 2\ntype byte\nvocab_size 256\nend\n", "version 2"));
    QVERIFY(fails("hello\n", "header"));
    QVERIFY(fails("mok-tokenizer 1\ntype wordpiece\nend\n", "wordpiece"));
    QVERIFY(fails("mok-tokenizer 1\ntype bpe\npretokenizer ws-class-1\nvocab_size 257\nmerges 1\n97 300\nend\n",
                  "refers to an id"));
    QVERIFY(fails("mok-tokenizer 1\ntype bpe\npretokenizer ws-class-1\nvocab_size 258\nmerges 2\n97 98\n", "merge line"));
    QVERIFY(fails(good.substr(0, good.size() - 4), "end"));
    // Found by tests/fuzz/fuzz_tokenizer_text: an id that wrapped through int32 onto 256, and
    // merges that double a token each time (2^40 bytes by the last).
    QVERIFY(fails("mok-tokenizer 1\ntype bpe\npretokenizer ws-class-1\nvocab_size 258\nmerges 2\n97 98\n"
                  "4294967552 99\nend\n",
                  "merge id 4294967552 is out of range"));
    std::string doubling = "mok-tokenizer 1\ntype bpe\npretokenizer ws-class-1\nvocab_size 296\nmerges 40\n97 97\n";
    for (int k = 0; k < 39; ++k) doubling += std::to_string(256 + k) + " " + std::to_string(256 + k) + "\n";
    QVERIFY(fails(doubling + "end\n", "makes a token of 128 bytes, longer than any piece (64)"));
    QVERIFY_THROWS_EXCEPTION(mok::TokenizerError, mok::Tokenizer::load("/nonexistent/dir/tok.txt"));
  }

  void factoryMakesBothKinds() {
    mok::CorpusSplit split;
    split.train.push_back({"a", "the cat sat on the mat, the end"});
    split.val.push_back({"b", "held out"});
    QCOMPARE(mok::make_tokenizer("byte", 512, split)->vocab_size(), 256);
    const auto bpe = mok::make_tokenizer("bpe", 270, split);
    QCOMPARE(bpe->name(), std::string("bpe"));
    QCOMPARE(bpe->vocab_size(), 270);
    QVERIFY_THROWS_EXCEPTION(mok::TokenizerError, mok::make_tokenizer("sentencepiece", 512, split));
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
