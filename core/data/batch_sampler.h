#pragma once
// Batches of (tokens, targets) windows from a TokenDataset; targets = tokens shifted by one.
//
// Training: row `row` of micro-batch `micro` of step `step` is the window starting at
//   counter_bits(seed, stream(step), micro·2³² + row) mod (train tokens − seq_len),
// a pure function of (seed, step, micro, row): independent of thread count, and a rank
// that reads rows [r0, r1) of the global batch gets exactly those rows of it.
//
// Validation: the non-overlapping windows k·seq_len, k = 0..W−1 (W = val_window_count),
// visited in a fixed order j → (j·P) mod W with P coprime to W and close to W·0.618, so any
// prefix of windows is spread evenly over the split and W windows cover it exactly once.
// Batch i holds windows i·batch .. i·batch+batch−1 of that order (wrapping after W).
//
// Buffers are row-major (batch, seq_len). Throws std::invalid_argument when a split has
// fewer than seq_len + 1 tokens.

#include <cstdint>

#include "core/data/token_dataset.h"

namespace mok {

int64_t train_window_start(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int64_t row, int seq_len);
void sample_train_row(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int64_t row, int seq_len,
                      int32_t* tokens, int32_t* targets);
void sample_train_batch(const TokenDataset& ds, uint64_t seed, int64_t step, int micro, int batch, int seq_len,
                        int32_t* tokens, int32_t* targets);

int64_t val_window_count(const TokenDataset& ds, int seq_len);
int64_t val_window_start(const TokenDataset& ds, int64_t window, int seq_len);
void val_batch(const TokenDataset& ds, int64_t i, int batch, int seq_len, int32_t* tokens, int32_t* targets);

}  // namespace mok
