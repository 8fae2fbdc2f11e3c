// tokenizer.json for mok's tokenizers (core/interop/hf_tokenizer_json.h): GPT-2's byte table;
// the Split regex cuts text exactly as bpe_pieces does, run over the mapped characters with
// std::wregex (an ECMAScript engine) and, where libonig is installed, with Oniguruma in its
// default Ruby syntax, the engine and syntax of the tokenizers library; written files read
// back to the same merges; vocabularies JSON cannot hold and files in another layout are
// refused with a reason.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/interop/hf_tokenizer_json.h"
#include "core/util/counter_rng.h"

#if MOK_HAVE_ONIGURUMA
#include <oniguruma.h>
#endif

namespace fs = std::filesystem;
using namespace mok;

namespace {

std::wstring wide(const std::string& utf8) {
  std::wstring out;
  for (size_t i = 0; i < utf8.size();) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0xf0) cp = c & 0x07, len = 4;
    else if (c >= 0xe0) cp = c & 0x0f, len = 3;
    else if (c >= 0xc0) cp = c & 0x1f, len = 2;
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3f);
    out += static_cast<wchar_t>(cp);
    i += len;
  }
  return out;
}

std::wstring mapped(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_level_char(b);
  return wide(s);
}

// tokenizers' Split(pattern, "isolated"): every match a piece, and every gap between them.
std::vector<std::wstring> regex_pieces(const std::wregex& re, const std::wstring& text) {
  std::vector<std::wstring> out;
  size_t last = 0;
  for (auto it = std::wsregex_iterator(text.begin(), text.end(), re); it != std::wsregex_iterator(); ++it) {
    const size_t b = static_cast<size_t>(it->position()), e = b + static_cast<size_t>(it->length());
    if (b > last) out.push_back(text.substr(last, b - last));
    if (e > b) out.push_back(text.substr(b, e - b));
    last = e;
  }
  if (last < text.size()) out.push_back(text.substr(last));
  return out;
}

std::vector<std::wstring> mok_pieces(const std::string& text) {
  std::vector<std::wstring> out;
  bpe_pieces(text, [&](std::string_view p) { out.push_back(mapped(p)); });
  return out;
}

std::string write_temp(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// Edge cases, and random texts over an alphabet that has every class, multi-byte letters,
// the characters special inside a regex class, and runs longer than a 64-byte piece.
std::vector<std::string> split_test_texts() {
  std::vector<std::string> texts = {
      "", " ", "  ", "word", " word", "  word", "\n word", " \nword", "\t word", "a  b", "x \n", "end ",
      "The jury said, \"It's 1961!\"  Then\n\n  nothing.", "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac""5",
      "a\x01\x7f[b]^c\\d-e", std::string(70, ' ') + "word", std::string(65, ' ') + "w", std::string(66, ' ') + "w",
      std::string(64, ' ') + "\nw", " " + std::string(130, 'a'), std::string(64, 'b') + "c",
      std::string(200, '\n') + "x", std::string(100, '7') + " " + std::string(3, '.')};
  const std::vector<std::string> alphabet = {" ", "\n", "\t", "\r", "a", "Z", "7", ".", "-", "\\", "]", "[", "^", "&",
                                             "\xc3\xa9", "\xe2\x82\xac", "\x01", "\x7f"};
  CounterRng rng(2024, 1);
  for (int n = 0; n < 300; ++n) {
    std::string t;
    const int runs = 1 + static_cast<int>(rng.next_u64() % 8);
    for (int r = 0; r < runs; ++r) {
      const std::string& a = alphabet[rng.next_u64() % alphabet.size()];
      const uint64_t len = rng.next_u64() % 4 == 0 ? 60 + rng.next_u64() % 12 : 1 + rng.next_u64() % 3;
      for (uint64_t k = 0; k < len; ++k) t += a;
    }
    texts.push_back(t);
  }
  return texts;
}

}  // namespace

class TestHfTokenizerJson : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

 private slots:
  void byteTableIsGpt2s() {
    QCOMPARE(byte_level_char(' '), std::string("\u0120"));  // Ġ
    QCOMPARE(byte_level_char('\n'), std::string("\u010a"));  // Ċ
    QCOMPARE(byte_level_char('A'), std::string("A"));
    QCOMPARE(byte_level_char(0), std::string("\u0100"));
    QCOMPARE(byte_level_char(0x7f), std::string("\u0121"));
    QCOMPARE(byte_level_char(0xad), std::string("\u0143"));
    QCOMPARE(byte_level_char(0xe9), std::string("\u00e9"));
    std::set<std::string> all;
    for (int b = 0; b < 256; ++b) all.insert(byte_level_char(static_cast<uint8_t>(b)));
    QCOMPARE(all.size(), size_t(256));
  }

  void splitRegexCutsAsBpePieces() {
    const std::wregex re(wide(mok_bpe_split_regex()), std::regex::ECMAScript);
    for (const std::string& t : split_test_texts()) {
      const auto want = mok_pieces(t), got = regex_pieces(re, mapped(t));
      if (want != got) {
        QString w, g;
        for (const auto& p : want) w += "[" + QString::fromStdWString(p) + "]";
        for (const auto& p : got) g += "[" + QString::fromStdWString(p) + "]";
        QFAIL(qPrintable("pieces differ for '" + QString::fromUtf8(t.c_str()) + "'\n mok:   " + w + "\n regex: " + g));
      }
    }
  }

  // The same with the tokenizers library's engine: Oniguruma, Ruby syntax, UTF-8, and its
  // find_iter (the next search starts where a match ended).
  void splitRegexCutsAsBpePiecesInOniguruma() {
#if MOK_HAVE_ONIGURUMA
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
    const std::string pattern = mok_bpe_split_regex();
    regex_t* re = nullptr;
    OnigErrorInfo info;
    const int rc = onig_new(&re, reinterpret_cast<const UChar*>(pattern.data()),
                            reinterpret_cast<const UChar*>(pattern.data() + pattern.size()), ONIG_OPTION_NONE,
                            ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &info);
    QCOMPARE(rc, int(ONIG_NORMAL));
    OnigRegion* region = onig_region_new();
    for (const std::string& t : split_test_texts()) {
      std::string m;
      for (unsigned char b : t) m += byte_level_char(b);
      std::vector<std::string> got, want;
      bpe_pieces(t, [&](std::string_view p) {
        std::string s;
        for (unsigned char b : p) s += byte_level_char(b);
        want.push_back(s);
      });
      const auto* begin = reinterpret_cast<const UChar*>(m.data());
      const auto* end = begin + m.size();
      size_t last = 0;
      while (last < m.size() &&
             onig_search(re, begin, end, begin + last, end, region, ONIG_OPTION_NONE) >= 0) {
        const size_t b = static_cast<size_t>(region->beg[0]), e = static_cast<size_t>(region->end[0]);
        QVERIFY(e > b);  // the expression never matches empty text
        if (b > last) got.push_back(m.substr(last, b - last));
        got.push_back(m.substr(b, e - b));
        last = e;
      }
      if (last < m.size()) got.push_back(m.substr(last));
      QVERIFY2(got == want, t.c_str());
    }
    onig_region_free(region, 1);
    onig_free(re);
    onig_end();
#else
    QSKIP("libonig (Debian: libonig-dev) is not installed");
#endif
  }

  void writtenFilesReadBackToTheSameTokenizer() {
    QVERIFY(tmp_.isValid());
    const std::string text =
        "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary election "
        "produced no evidence that any irregularities took place. The jury further said in term-end "
        "presentments that the City Executive Committee deserves the praise and thanks of the City.";
    const BpeTokenizer bpe = BpeTokenizer::train({text, text}, 300);
    std::string why;
    const std::string json = mok_tokenizer_json(bpe, &why);
    QVERIFY2(!json.empty(), why.c_str());
    QVERIFY(json.find("\"Split\"") != std::string::npos);
    const auto back = tokenizer_from_hf_json(write_temp(fs::path(tmp_.path().toStdString()) / "bpe.json", json));
    QCOMPARE(back->name(), std::string("bpe"));
    QCOMPARE(back->to_text(), bpe.to_text());
    QVERIFY(back->encode(text) == bpe.encode(text));

    const std::string byte_json = mok_tokenizer_json(ByteTokenizer(), &why);
    QVERIFY(byte_json.find("\"merges\":[]") != std::string::npos);
    const auto byte_back = tokenizer_from_hf_json(write_temp(fs::path(tmp_.path().toStdString()) / "byte.json", byte_json));
    QCOMPARE(byte_back->name(), std::string("byte"));
  }

  void vocabularyWithRepeatedBytesHasNoJson() {
    // Two merges that spell "abc": (ab, c) and (a, bc).
    const BpeTokenizer bpe({{'a', 'b'}, {'b', 'c'}, {256, 'c'}, {'a', 257}});
    std::string why;
    QVERIFY(mok_tokenizer_json(bpe, &why).empty());
    QVERIFY2(why.find("258") != std::string::npos && why.find("259") != std::string::npos, why.c_str());
  }

  void otherLayoutsAreRefused() {
    QVERIFY(tmp_.isValid());
    std::string json = mok_tokenizer_json(ByteTokenizer(), nullptr);
    // Swap the ids of bytes 'A' and 'B': no longer id = byte.
    const auto a = json.find("\"A\":65"), b = json.find("\"B\":66");
    QVERIFY(a != std::string::npos && b != std::string::npos);
    json.replace(a, 6, "\"A\":66");
    json.replace(b, 6, "\"B\":65");
    const std::string path = write_temp(fs::path(tmp_.path().toStdString()) / "swapped.json", json);
    try {
      tokenizer_from_hf_json(path);
      QFAIL("a permuted vocabulary was accepted");
    } catch (const TokenizerError& e) {
      QVERIFY2(QString(e.what()).contains("id 65 is not byte 65"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestHfTokenizerJson)
#include "test_hf_tokenizer_json.moc"
