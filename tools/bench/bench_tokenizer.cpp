// bench_tokenizer: load the Brown corpus (or a path), train BPE at a few vocabulary sizes
// and encode the corpus, printing times and compression. Prints figures; never fails on time.
//   bench_tokenizer [corpus] [vocab sizes...]     e.g. bench_tokenizer brown 512 1024 4096
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/data/bpe_tokenizer.h"
#include "core/data/corpus.h"
#include "core/data/corpus_split.h"
#include "core/data/token_dataset.h"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "brown";
  std::vector<int> vocabs;
  for (int i = 2; i < argc; ++i) vocabs.push_back(std::atoi(argv[i]));
  if (vocabs.empty()) vocabs = {512, 1024, 2048, 4096};
  try {
    auto t0 = std::chrono::steady_clock::now();
    const mok::Corpus corpus = mok::load_corpus(spec);
    std::printf("load %s: %zu documents, %.2f MB in %.3f s\n", spec.c_str(), corpus.documents.size(),
                corpus.total_bytes() / 1e6, seconds_since(t0));
    const mok::CorpusSplit split = mok::split_corpus(corpus, 0.05);
    std::printf("split: %zu train (%.2f MB), %zu val (%.2f MB)\n", split.train.size(), split.train_bytes() / 1e6,
                split.val.size(), split.val_bytes() / 1e6);
    std::vector<std::string_view> texts;
    for (const auto& d : split.train) texts.emplace_back(d.text);
    for (int v : vocabs) {
      t0 = std::chrono::steady_clock::now();
      const mok::BpeTokenizer bpe = mok::BpeTokenizer::train(texts, v);
      const double train_s = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      const mok::TokenDataset ds = mok::build_token_dataset(split, bpe);
      const double encode_s = seconds_since(t0);
      std::printf("bpe vocab %5d: train %.3f s, encode %.3f s (%.1f MB/s), %.3f bytes/token train, %.3f val\n",
                  bpe.vocab_size(), train_s, encode_s, (ds.train_bytes + ds.val_bytes) / 1e6 / encode_s,
                  ds.train_bytes_per_token(), ds.val_bytes_per_token());
      size_t mismatched = 0;
      for (const auto& d : corpus.documents) mismatched += bpe.decode(bpe.encode(d.text)) != d.text;
      std::printf("  round trip over all %zu documents: %s\n", corpus.documents.size(),
                  mismatched ? "MISMATCH" : "exact");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
