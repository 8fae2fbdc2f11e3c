#pragma once
// Deterministic train/validation split of a corpus, by document.
//
// Documents are taken in name order; document i (0-based) of n goes to validation when
// floor((i+1)·f) > floor(i·f), f = val_fraction: round-down(n·f) documents, evenly spread
// (for Brown, f = 0.05 picks every 20th file, so every genre is represented). When that
// picks none and n ≥ 2, the last document is held out. No seed and no thread count enters.
// A single-document corpus is cut instead: its last f of bytes (moved forward to the next
// line start if one lies within 1/10 of the held-out part, then to a UTF-8 character
// boundary) becomes the validation document.

#include "core/data/corpus.h"

namespace mok {

struct CorpusSplit {
  std::vector<Document> train;
  std::vector<Document> val;

  int64_t train_bytes() const;
  int64_t val_bytes() const;
};

// val_fraction must lie in (0, 1); throws CorpusError otherwise.
CorpusSplit split_corpus(const Corpus& corpus, double val_fraction);

}  // namespace mok
