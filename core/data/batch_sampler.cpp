#include "core/data/batch_sampler.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/util/counter_rng.h"

namespace mok {

namespace {

constexpr uint64_t kTrainStreamSalt = 0x7472616964617461ull;

void check_size(size_t n, int seq_len, const char* side) {
  if (seq_len < 1) throw std::invalid_argument("seq_len must be at least 1");
  if (n < static_cast<size_t>(seq_len) + 1) {
    throw std::invalid_argument(std::string("the ") + side + " split has " + std::to_string(n) +
                                " tokens, fewer than seq_len + 1 = " + std::to_string(seq_len + 1) +
                                "; use a shorter seq_len or a larger corpus / val_fraction");
  }
}

void copy_window(const std::vector<int32_t>& src, int64_t start, int seq_len, int32_t* tokens, int32_t* targets) {
  std::copy_n(src.data() + start, seq_len, tokens);
  std::copy_n(src.data() + start + 1, seq_len, targets);
}

// Stride of the validation visiting order: coprime to w, near w·0.618.
int64_t val_stride(int64_t w) {
  if (w <= 2) return 1;
  int64_t p = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(w) * 0.6180339887498949));
  while (std::gcd(p, w) != 1) ++p;
  return p;
}

}  // namespace

int64_t train_window_start(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int64_t row, int seq_len) {
  check_size(ds.train.size(), seq_len, "train");
  const uint64_t range = ds.train.size() - static_cast<uint64_t>(seq_len);  // starts 0..range-1
  const uint64_t stream = mix64(kTrainStreamSalt ^ static_cast<uint64_t>(step));
  const uint64_t counter = (static_cast<uint64_t>(static_cast<uint32_t>(micro)) << 32) | static_cast<uint64_t>(row);
  return static_cast<int64_t>(counter_bits(seed, stream, counter) % range);
}

void sample_train_row(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int64_t row, int seq_len,
                      int32_t* tokens, int32_t* targets) {
  copy_window(ds.train, train_window_start(ds, seed, step, micro, row, seq_len), seq_len, tokens, targets);
}

void sample_train_batch(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int batch, int seq_len,
                        int32_t* tokens, int32_t* targets) {
  for (int r = 0; r < batch; ++r) {
    sample_train_row(ds, seed, step, micro, r, seq_len, tokens + static_cast<int64_t>(r) * seq_len,
                     targets + static_cast<int64_t>(r) * seq_len);
  }
}

int64_t val_window_count(const TokenDataset& ds, int seq_len) {
  check_size(ds.val.size(), seq_len, "validation");
  return static_cast<int64_t>((ds.val.size() - 1) / static_cast<size_t>(seq_len));
}

int64_t val_window_start(const TokenDataset& ds, int64_t window, int seq_len) {
  const int64_t w = val_window_count(ds, seq_len);
  const int64_t j = window % w;
  // (j·P) mod W without overflow for any realistic W.
  const int64_t k = static_cast<int64_t>((static_cast<unsigned __int128>(j) * val_stride(w)) % w);
  return k * seq_len;
}

void val_batch(const TokenDataset& ds, int64_t i, int batch, int seq_len, int32_t* tokens, int32_t* targets) {
  for (int r = 0; r < batch; ++r) {
    const int64_t start = val_window_start(ds, i * batch + r, seq_len);
    copy_window(ds.val, start, seq_len, tokens + static_cast<int64_t>(r) * seq_len,
                targets + static_cast<int64_t>(r) * seq_len);
  }
}

}  // namespace mok
