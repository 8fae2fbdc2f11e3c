#pragma once
// Tokenizer: text ↔ token ids. Two kinds: ByteTokenizer (256 ids, one per byte) and
// BpeTokenizer (byte-level byte-pair encoding trained on the corpus).
//
// Every tokenizer is lossless on arbitrary bytes: decode(encode(s)) == s, UTF-8 or not.
// It serialises to a small versioned text format (to_text / from_text) that is stored with
// a run (save / load, or inside a checkpoint) and reloads to identical encodings:
//
//     mok-tokenizer 1
//     type bpe                  (or: type byte)
//     pretokenizer ws-class-1   (bpe only)
//     vocab_size 512
//     merges 256                (bpe only; then one "left right" id pair per line)
//     104 101
//     ...
//     end

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mok {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Thread-safe (no shared mutable state).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws TokenizerError on an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;

  virtual int vocab_size() const = 0;
  virtual std::string name() const = 0;  // "byte" | "bpe"
  // The bytes token `id` stands for.
  virtual const std::string& token_bytes(int32_t id) const = 0;

  virtual std::string to_text() const = 0;
  // 64-bit hash of to_text(): equal fingerprints ↔ identical encodings (for caches).
  uint64_t fingerprint() const;

  void save(const std::string& path) const;  // throws TokenizerError on I/O failure
  static std::unique_ptr<Tokenizer> load(const std::string& path);
  static std::unique_ptr<Tokenizer> from_text(std::string_view text);
};

}  // namespace mok
