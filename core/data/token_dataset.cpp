#include "core/data/token_dataset.h"

#include <cmath>

#include "core/util/thread_pool.h"

namespace mok {

namespace {

void encode_side(const std::vector<Document>& docs, const Tokenizer& tok, std::string_view separator,
                 std::vector<int32_t>& out, int64_t& bytes) {
  std::vector<std::vector<int32_t>> parts(docs.size());
  parallel_for(static_cast<int64_t>(docs.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) parts[i] = tok.encode(docs[i].text);
  });
  const std::vector<int32_t> sep = tok.encode(separator);
  size_t total = 0;
  for (const auto& p : parts) total += p.size() + sep.size();
  out.clear();
  out.reserve(total);
  bytes = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i > 0) {
      out.insert(out.end(), sep.begin(), sep.end());
      bytes += static_cast<int64_t>(separator.size());
    }
    out.insert(out.end(), parts[i].begin(), parts[i].end());
    bytes += static_cast<int64_t>(docs[i].text.size());
  }
}

}  // namespace

double TokenDataset::train_bytes_per_token() const {
  return train.empty() ? 0.0 : static_cast<double>(train_bytes) / static_cast<double>(train.size());
}

double TokenDataset::val_bytes_per_token() const {
  return val.empty() ? 0.0 : static_cast<double>(val_bytes) / static_cast<double>(val.size());
}

TokenDataset build_token_dataset(const CorpusSplit& split, const Tokenizer& tokenizer, std::string_view separator) {
  TokenDataset ds;
  ds.vocab_size = tokenizer.vocab_size();
  encode_side(split.train, tokenizer, separator, ds.train, ds.train_bytes);
  encode_side(split.val, tokenizer, separator, ds.val, ds.val_bytes);
  return ds;
}

double bits_per_byte(double mean_loss_nats, int64_t tokens, double bytes_per_token) {
  const double bytes = static_cast<double>(tokens) * bytes_per_token;
  if (tokens <= 0 || !(bytes > 0)) return 0.0;
  return mean_loss_nats * static_cast<double>(tokens) / (bytes * std::log(2.0));
}

}  // namespace mok
