#pragma once
// TokenDataset: the train and validation splits as token arrays, plus their byte counts so
// that losses convert to bits per byte (the tokenizer-independent quality figure).
//
// Each document is encoded on its own (in parallel over documents, result independent of
// the thread count) and the documents are joined with the separator's tokens in between.
//
// Bits per byte: a mean loss of L nats per token over T tokens that stand for B bytes is
// L·T / (B·ln 2) bits per byte. For validation windows the trainer uses the split's mean
// bytes per token (B/T over the whole validation split), i.e. bpb = L / (ln 2 · bytes_per_token).

#include <cstdint>
#include <vector>

#include "core/data/corpus_split.h"
#include "core/data/tokenizer.h"

namespace mok {

struct TokenDataset {
  std::vector<int32_t> train;  // (train tokens)
  std::vector<int32_t> val;    // (val tokens)
  int64_t train_bytes = 0;     // bytes the train tokens stand for (separators included)
  int64_t val_bytes = 0;
  int vocab_size = 0;

  double train_bytes_per_token() const;
  double val_bytes_per_token() const;
};

TokenDataset build_token_dataset(const CorpusSplit& split, const Tokenizer& tokenizer,
                                 std::string_view separator = "\n\n");

// mean_loss_nats·tokens / (tokens·bytes_per_token·ln 2).
double bits_per_byte(double mean_loss_nats, int64_t tokens, double bytes_per_token);

}  // namespace mok
