#pragma once
// make_tokenizer: the tokenizer a run's data config asks for. "byte" needs no data; "bpe"
// is trained on the train split only (never on validation text) with data.vocab_size.

#include <memory>
#include <string>

#include "core/data/bpe_tokenizer.h"
#include "core/data/corpus_split.h"

namespace mok {

// kind: "byte" | "bpe". Throws TokenizerError for an unknown kind or a bad vocab size.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, int vocab_size, const CorpusSplit& split,
                                          const BpeTokenizer::Progress& progress = {});

}  // namespace mok
