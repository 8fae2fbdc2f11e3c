#include "core/data/corpus_split.h"

#include <cmath>

namespace mok {

namespace {
int64_t sum_bytes(const std::vector<Document>& docs) {
  int64_t n = 0;
  for (const auto& d : docs) n += static_cast<int64_t>(d.text.size());
  return n;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

int64_t CorpusSplit::train_bytes() const { return sum_bytes(train); }
int64_t CorpusSplit::val_bytes() const { return sum_bytes(val); }

CorpusSplit split_corpus(const Corpus& corpus, double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
    throw CorpusError("data.val_fraction must lie strictly between 0 and 1 (got " + std::to_string(val_fraction) + ")");
  }
  const auto& docs = corpus.documents;
  if (docs.empty()) throw CorpusError("cannot split an empty corpus");
  CorpusSplit split;

  if (docs.size() == 1) {
    const std::string& text = docs[0].text;
    const size_t n = text.size();
    if (n < 2) throw CorpusError("corpus '" + corpus.source + "' is too small to split (" + std::to_string(n) + " bytes)");
    const size_t held = std::max<size_t>(1, static_cast<size_t>(std::floor(static_cast<double>(n) * val_fraction)));
    size_t cut = n - held;
    // Prefer a line start shortly after the nominal cut, so the held-out text starts cleanly.
    const size_t nl = text[cut - 1] == '\n' ? std::string::npos : text.find('\n', cut);
    if (nl != std::string::npos && nl + 1 < n && nl + 1 - cut <= held / 10) cut = nl + 1;
    while (cut < n && is_continuation(static_cast<unsigned char>(text[cut]))) ++cut;
    if (cut == 0 || cut >= n) throw CorpusError("corpus '" + corpus.source + "' is too small to split");
    split.train.push_back({docs[0].name + "#train", text.substr(0, cut)});
    split.val.push_back({docs[0].name + "#val", text.substr(cut)});
    return split;
  }

  for (size_t i = 0; i < docs.size(); ++i) {
    const double a = std::floor(static_cast<double>(i) * val_fraction);
    const double b = std::floor(static_cast<double>(i + 1) * val_fraction);
    (b > a ? split.val : split.train).push_back(docs[i]);
  }
  if (split.val.empty()) {
    split.val.push_back(split.train.back());
    split.train.pop_back();
  }
  return split;
}

}  // namespace mok
