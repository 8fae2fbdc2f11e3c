#include "core/data/tokenizer_factory.h"

#include "core/data/byte_tokenizer.h"

namespace mok {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, int vocab_size, const CorpusSplit& split,
                                          const BpeTokenizer::Progress& progress) {
  if (kind == "byte") return std::make_unique<ByteTokenizer>();
  if (kind == "bpe") {
    std::vector<std::string_view> texts;
    texts.reserve(split.train.size());
    for (const auto& d : split.train) texts.emplace_back(d.text);
    return std::make_unique<BpeTokenizer>(BpeTokenizer::train(texts, vocab_size, progress));
  }
  throw TokenizerError("unknown tokenizer '" + kind + "' (byte or bpe)");
}

}  // namespace mok
