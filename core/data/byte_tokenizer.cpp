#include "core/data/byte_tokenizer.h"

namespace mok {

ByteTokenizer::ByteTokenizer() : bytes_(256) {
  for (int i = 0; i < 256; ++i) bytes_[i] = std::string(1, static_cast<char>(i));
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

const std::string& ByteTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= 256) throw TokenizerError("token id " + std::to_string(id) + " is outside the byte vocabulary");
  return bytes_[id];
}

std::string ByteTokenizer::to_text() const { return "mok-tokenizer 1\ntype byte\nvocab_size 256\nend\n"; }

}  // namespace mok
