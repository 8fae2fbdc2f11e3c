#include "core/interop/hf_tokenizer_json.h"

#include <array>
#include <fstream>
#include <map>
#include <sstream>

#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/util/json_reader.h"
#include "core/util/json_writer.h"

namespace mok {

namespace {

// GPT-2's table: printable Latin-1 bytes keep their code point, the others (controls,
// space, 0x7f–0xa0, 0xad) take 256, 257, … in byte order.
std::array<uint32_t, 256> byte_to_code_point() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    cp[b] = printable ? static_cast<uint32_t>(b) : next++;
  }
  return cp;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

std::string mapped(const std::string& bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_level_char(b);
  return s;
}

// A character class of the mapped characters of the bytes `in` accepts.
template <class Pred>
std::string byte_class(Pred in, bool negate) {
  std::string s = negate ? "[^" : "[";
  for (int b = 0; b < 256; ++b)
    if (in(static_cast<unsigned char>(b))) {
      const std::string c = byte_level_char(static_cast<uint8_t>(b));
      // Escape what is special inside a class (only ASCII punctuation maps to itself).
      if (c == "\\" || c == "]" || c == "[" || c == "^" || c == "-") s += "\\";
      s += c;
    }
  return s + "]";
}

// bpe_pieces' byte classes (core/data/bpe_tokenizer.cpp).
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

void byte_level(JsonWriter& j) {
  j.begin_object();
  j.key("type").value("ByteLevel");
  j.key("add_prefix_space").value(false);
  j.key("trim_offsets").value(false);
  j.key("use_regex").value(false);
  j.end_object();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string byte_level_char(uint8_t byte) {
  static const std::array<uint32_t, 256> table = byte_to_code_point();
  return utf8(table[byte]);
}

std::string mok_bpe_split_regex() {
  const std::string sp = byte_level_char(' ');
  const std::string W = byte_class(is_space, false);
  const std::string not_W = byte_class(is_space, true);
  const std::string Wn = byte_class([](unsigned char c) { return is_space(c) && c != ' '; }, false);
  const std::string L = byte_class(is_letter, false);
  const std::string D = byte_class(is_digit, false);
  const std::string O = byte_class([](unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }, false);
  // Pieces of at most 64 bytes (= mapped characters):
  //   " " + a class run (the space a whitespace run leaves to the word after it), or a run;
  //   whitespace: a full 64-chunk of a longer run; a run's end that is not a space; a run
  //   up to its final space when a non-space follows (that space goes to the next piece);
  //   else the rest of the run (a run at the end of the text).
  std::string r;
  for (const std::string& cls : {L, D, O}) r += sp + cls + "{1,63}|" + cls + "{1,64}|";
  r += W + "{64}(?=" + W + ")|";
  r += W + "{0,63}" + Wn + "(?!" + W + ")|";
  r += W + "{1,64}(?=" + sp + not_W + ")|";
  r += W + "{1,64}";
  return r;
}

std::string mok_tokenizer_json(const Tokenizer& tok, std::string* why_not) {
  const bool bpe = tok.name() == "bpe";
  const auto* b = dynamic_cast<const BpeTokenizer*>(&tok);
  if (bpe && !b) {
    if (why_not) *why_not = "unknown BPE tokenizer class";
    return "";
  }
  // Vocabulary: id → mapped string; two ids of the same bytes cannot share one JSON key.
  std::map<std::string, int> vocab;
  std::vector<std::string> strings(tok.vocab_size());
  for (int id = 0; id < tok.vocab_size(); ++id) {
    strings[id] = mapped(tok.token_bytes(id));
    if (const auto [it, fresh] = vocab.emplace(strings[id], id); !fresh) {
      if (why_not)
        *why_not = "ids " + std::to_string(it->second) + " and " + std::to_string(id) +
                   " stand for the same bytes; a tokenizer.json vocabulary maps each string to one id";
      return "";
    }
  }
  JsonWriter j;
  j.begin_object();
  j.key("version").value("1.0");
  j.key("truncation").null();
  j.key("padding").null();
  j.key("added_tokens").begin_array().end_array();
  j.key("normalizer").null();
  j.key("pre_tokenizer");
  if (bpe) {
    j.begin_object();
    j.key("type").value("Sequence");
    j.key("pretokenizers").begin_array();
    byte_level(j);
    j.begin_object();
    j.key("type").value("Split");
    j.key("pattern").begin_object().key("Regex").value(mok_bpe_split_regex()).end_object();
    j.key("behavior").value("Isolated");
    j.key("invert").value(false);
    j.end_object();
    j.end_array();
    j.end_object();
  } else {
    byte_level(j);
  }
  j.key("post_processor").null();
  j.key("decoder");
  byte_level(j);
  j.key("model").begin_object();
  j.key("type").value("BPE");
  j.key("dropout").null();
  j.key("unk_token").null();
  j.key("continuing_subword_prefix").null();
  j.key("end_of_word_suffix").null();
  j.key("fuse_unk").value(false);
  j.key("byte_fallback").value(false);
  j.key("vocab").begin_object();
  for (int id = 0; id < tok.vocab_size(); ++id) j.key(strings[id]).value(id);
  j.end_object();
  j.key("merges").begin_array();
  if (b)
    for (const BpeTokenizer::Merge& m : b->merges()) j.value(strings[m.left] + " " + strings[m.right]);
  j.end_array();
  j.end_object();
  j.end_object();
  return j.str() + "\n";
}

std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const std::string& path) {
  JsonValue root;
  try {
    root = parse_json(slurp(path));
  } catch (const JsonParseError& e) {
    throw TokenizerError(path + ": not JSON: " + e.what());
  }
  auto fail = [&](const std::string& what) -> void {
    throw TokenizerError(path + ": " + what + "; mok reads byte-level BPE tokenizers whose ids 0..255 are the bytes "
                                              "and id 256+k is merge k (the layout `mok export --hf` writes)");
  };
  try {
    const JsonValue& model = root.at("model");
    if (model.at("type").as_string() != "BPE") fail("the model is " + model.at("type").as_string() + ", not BPE");
    if (const JsonValue* n = root.find("normalizer"); n && !n->is_null()) fail("it has a normalizer");
    if (const JsonValue* a = root.find("added_tokens"); a && a->is_array() && !a->as_array().empty())
      fail("it has added (special) tokens");
    const JsonValue& dec = root.at("decoder");
    if (dec.is_null() || dec.at("type").as_string() != "ByteLevel") fail("its decoder is not ByteLevel");
    // Inverse of the byte-level table: mapped string → bytes.
    std::map<std::string, unsigned char> char_byte;
    for (int b = 0; b < 256; ++b) char_byte[byte_level_char(static_cast<uint8_t>(b))] = static_cast<unsigned char>(b);
    auto unmap = [&](const std::string& s) {
      std::string bytes;
      size_t i = 0;
      while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        const auto it = char_byte.find(s.substr(i, len));
        if (it == char_byte.end()) fail("token '" + s + "' is not made of byte-level characters");
        bytes += static_cast<char>(it->second);
        i += len;
      }
      return bytes;
    };
    std::map<int64_t, std::string> by_id;
    for (const auto& [token, id] : model.at("vocab").as_object()) by_id[id.as_int64()] = token;
    const int64_t vocab = static_cast<int64_t>(by_id.size());
    if (vocab < 256 || by_id.begin()->first != 0 || by_id.rbegin()->first != vocab - 1)
      fail("its ids are not 0.." + std::to_string(vocab - 1) + " with at least the 256 bytes");
    for (int b = 0; b < 256; ++b)
      if (by_id[b] != byte_level_char(static_cast<uint8_t>(b))) fail("id " + std::to_string(b) + " is not byte " + std::to_string(b));
    std::map<std::string, int32_t> id_of;
    for (const auto& [id, token] : by_id) id_of[token] = static_cast<int32_t>(id);
    std::vector<BpeTokenizer::Merge> merges;
    for (const JsonValue& m : model.at("merges").as_array()) {
      std::string left, right;
      if (m.is_string()) {
        const std::string& s = m.as_string();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos) fail("merge '" + s + "' is not 'left right'");
        left = s.substr(0, sp);
        right = s.substr(sp + 1);
      } else {
        left = m.as_array().at(0).as_string();
        right = m.as_array().at(1).as_string();
      }
      const int64_t k = static_cast<int64_t>(merges.size());
      if (!id_of.count(left) || !id_of.count(right) || by_id[256 + k] != left + right)
        fail("merge " + std::to_string(k) + " ('" + left + "' '" + right + "') is not id " + std::to_string(256 + k));
      unmap(left + right);
      merges.push_back({id_of[left], id_of[right]});
    }
    if (static_cast<int64_t>(merges.size()) != vocab - 256)
      fail(std::to_string(vocab) + " ids but " + std::to_string(merges.size()) + " merges");
    if (merges.empty()) return std::make_unique<ByteTokenizer>();
    return std::make_unique<BpeTokenizer>(std::move(merges));
  } catch (const TokenizerError&) {
    throw;
  } catch (const std::exception& e) {
    throw TokenizerError(path + ": " + e.what());
  }
}

}  // namespace mok
