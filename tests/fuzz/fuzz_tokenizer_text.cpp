// Fuzz target: the tokenizer file (tokenizer.txt of a checkpoint, or one a user passes).
// Each input ends in a TokenizerError, or a tokenizer that prints back to text it reads
// again identically and encodes bytes losslessly with ids inside its vocabulary.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/data/tokenizer.h"
#include "tests/fuzz/fuzz_require.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mok::fuzz::fuzz_require;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<mok::Tokenizer> tok;
  try {
    tok = mok::Tokenizer::from_text(text);
  } catch (const mok::TokenizerError& e) {
    fuzz_require(std::string(e.what()).size() > 0, "a TokenizerError has a message");
    return 0;
  }
  const std::string printed = tok->to_text();
  std::unique_ptr<mok::Tokenizer> again;
  try {
    again = mok::Tokenizer::from_text(printed);
  } catch (const mok::TokenizerError& e) {
    mok::fuzz::fuzz_failure(std::string("a printed tokenizer reads again, but: ") + e.what());
  }
  fuzz_require(again->to_text() == printed, "the printed tokenizer reads back to the same one");
  const std::string sample = std::string("the cat sat, 3.14 times; \xC3\xA9t\xC3\xA9 \xFF\x00 end", 34) +
                             std::string(text.substr(0, 256));
  const std::vector<int32_t> ids = tok->encode(sample);
  for (int32_t id : ids) fuzz_require(id >= 0 && id < tok->vocab_size(), "ids lie in the vocabulary");
  fuzz_require(tok->decode(ids) == sample, "decode(encode(text)) == text");
  return 0;
}
