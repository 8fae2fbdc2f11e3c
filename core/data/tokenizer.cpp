#include "core/data/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/util/replace_file.h"

namespace mok {

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 2);
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

uint64_t Tokenizer::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : to_text()) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void Tokenizer::save(const std::string& path) const {
  try {
    replace_file(path, to_text());  // whole or not at all
  } catch (const ReplaceFileError& e) {
    throw TokenizerError("cannot write tokenizer file '" + path + "': " + e.reason);
  }
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError("cannot open tokenizer file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return from_text(ss.str());
  } catch (const TokenizerError& e) {
    throw TokenizerError("tokenizer file '" + path + "': " + e.what());
  }
}

namespace {

// Line reader with line numbers for messages.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    size_t eol = text_.find('\n', pos_);
    if (eol == std::string_view::npos) eol = text_.size();
    line = text_.substr(pos_, eol - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = eol + 1;
    ++number_;
    return true;
  }
  std::string_view expect(const char* what) {
    std::string_view line;
    if (!next(line)) throw TokenizerError(std::string("unexpected end of text, expected ") + what);
    return line;
  }
  [[noreturn]] void fail(const std::string& msg) const {
    throw TokenizerError("line " + std::to_string(number_) + ": " + msg);
  }
  // "key value" → value; fails when the key differs.
  std::string_view value(const char* key) {
    std::string_view line = expect(key);
    const std::string k = std::string(key) + " ";
    if (line.substr(0, k.size()) != k) fail(std::string("expected '") + key + " ...', got '" + std::string(line) + "'");
    return line.substr(k.size());
  }
  long long integer(const char* key) { return parse_int(value(key)); }
  long long parse_int(std::string_view s) {
    if (s.empty() || s.size() > 18) fail("expected an integer, got '" + std::string(s) + "'");
    long long v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') fail("expected an integer, got '" + std::string(s) + "'");
      v = v * 10 + (c - '0');
    }
    return v;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int number_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_text(std::string_view text) {
  Lines lines(text);
  const std::string_view header = lines.expect("the header 'mok-tokenizer 1'");
  if (header.substr(0, 14) != "mok-tokenizer ") lines.fail("not a tokenizer (missing 'mok-tokenizer' header)");
  const long long version = lines.parse_int(header.substr(14));
  if (version != 1) lines.fail("unsupported tokenizer format version " + std::to_string(version) + " (this build reads 1)");
  const std::string type(lines.value("type"));
  std::unique_ptr<Tokenizer> tok;
  if (type == "byte") {
    if (lines.integer("vocab_size") != 256) lines.fail("a byte tokenizer has vocab_size 256");
    tok = std::make_unique<ByteTokenizer>();
  } else if (type == "bpe") {
    if (lines.value("pretokenizer") != "ws-class-1") lines.fail("unknown pretokenizer (this build knows ws-class-1)");
    const long long vocab = lines.integer("vocab_size");
    const long long count = lines.integer("merges");
    if (count > (1 << 20) || vocab != 256 + count) lines.fail("vocab_size must equal 256 + merges");
    std::vector<BpeTokenizer::Merge> merges;
    merges.reserve(count);
    for (long long k = 0; k < count; ++k) {
      const std::string_view line = lines.expect("a merge line");
      const size_t sp = line.find(' ');
      if (sp == std::string_view::npos) lines.fail("expected 'left right', got '" + std::string(line) + "'");
      const long long left = lines.parse_int(line.substr(0, sp)), right = lines.parse_int(line.substr(sp + 1));
      // Beyond int32 a cast would wrap an id onto a real one (4294967552 → 256); the
      // tokenizer checks the ids that survive it.
      if (std::max(left, right) > INT32_MAX)
        lines.fail("merge id " + std::to_string(std::max(left, right)) + " is out of range");
      merges.push_back({static_cast<int32_t>(left), static_cast<int32_t>(right)});
    }
    tok = std::make_unique<BpeTokenizer>(std::move(merges));
  } else {
    lines.fail("unknown tokenizer type '" + type + "' (byte or bpe)");
  }
  if (lines.expect("'end'") != "end") lines.fail("expected 'end'");
  return tok;
}

}  // namespace mok
