#pragma once
// ByteTokenizer: id = byte value (0..255). Bits per byte equals bits per token.

#include "core/data/tokenizer.h"

namespace mok {

class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer();
  std::vector<int32_t> encode(std::string_view text) const override;
  int vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
  const std::string& token_bytes(int32_t id) const override;
  std::string to_text() const override;

 private:
  std::vector<std::string> bytes_;  // (256) one-byte strings
};

}  // namespace mok
