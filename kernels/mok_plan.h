#pragma once
// The MoK dispatch plan on the GPU (core/parallel/mok_dispatcher.h), so that only row counts
// cross to the host. CPU references: CpuOps::slot_share_counts, ship_rows and
// scatter_positions (core/backend/cpu_ops.cpp). Pairs are p = t·k + s. Integer counts use
// integer atomics (exact, so the result does not depend on their order); the rows' places
// come from an exclusive scan of integer flags. Asynchronous on `stream`; nothing is allocated here.

#include <cuda_runtime.h>

#include <cstdint>

#include "core/parallel/shadow_rule.h"

namespace mok::cuda {

// counts (E·k), zeroed here: counts[e·k + m − 1] += 1 for each slot of a token on expert e
// whose token has m slots on experts of e's owner.
void slot_share_counts(const int32_t* expert, const int32_t* owner, int64_t n, int k, int E, int32_t* counts,
                       cudaStream_t stream);

// The rank's choices from the slot-share counts (E·k): rows (E) f64 = Σ_m counts[e·k+m−1]/m,
// m ascending (0 for the rank's own experts); dest (E) = −1 where `rule` shadows e, else
// owner[e]. One thread an expert, the host's arithmetic in the host's order.
void shadow_decisions(const int32_t* counts, const int32_t* owner, int E, int k, int self, const ShadowRule& rule,
                      double* rows, int32_t* dest, cudaStream_t stream);

// Rows to ship per destination rank q < R: tokens with a slot whose expert e has dest[e] = q,
// placed destination-major, tokens ascending. Two passes over one workspace:
//   ship_rows_count  flags per (q, token), their exclusive scan (the rows' places) and the
//                    rows per destination, rows (R) i64 on the device;
//   ship_rows_fill   each row at its place: token, head_pair, and k entries in slot order
//                    (entry = local_index[e], gate, pair), padded with −1 / 0 / −1.
// The fill reads the workspace the count wrote (same inputs). gate float.
size_t ship_rows_workspace_bytes(int64_t n, int R);
void ship_rows_count(const int32_t* expert, const int32_t* dest, int64_t n, int k, int R, void* ws, size_t ws_bytes,
                     int64_t* rows, cudaStream_t stream);
void ship_rows_fill(const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
                    int64_t n, int k, int R, const void* ws, int32_t* token, int32_t* head_pair, int32_t* entry,
                    float* entry_gate, int32_t* pair, cudaStream_t stream);

// The rows' chunk counts (Ops::ship_rows with ShipChunks): counts (2·C·R) i64, rows to q by
// the chunk of their lowest entry there at c·R + q, then by their highest's; locals (R) the
// local experts of each rank. At most kMaxShipChunkCells cells (2·C·R).
constexpr int kMaxShipChunkCells = 8192;
void ship_chunk_counts(const int32_t* expert, const int32_t* dest, const int32_t* local_index, const int32_t* locals,
                       int64_t n, int k, int R, int C, int64_t* counts, cudaStream_t stream);
// Ops::row_chunk_keys: rows (rows, k) entries, offsets (R + 1) i64 the first row of each rank.
void row_chunk_keys(const int32_t* entry, int64_t rows, int k, const int64_t* offsets, const int32_t* locals, int R,
                    int C, int32_t* key_lo, int32_t* key_hi, cudaStream_t stream);

// The fill with every (q, token) a row at q·n + t (no count, no workspace): a token without
// entries on q gets an all-pad row with head_pair −1 (Ops::ship_rows with every_row).
void ship_rows_fill_every(const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
                          int64_t n, int k, int R, int32_t* token, int32_t* head_pair, int32_t* entry,
                          float* entry_gate, int32_t* pair, cudaStream_t stream);

// values[i] = pad where values[i] < 0 (m values).
void replace_negative(int32_t* values, int64_t m, int32_t pad, cudaStream_t stream);
// row_of_pair[i] = −1 where entry[i] = group (m values).
void unroute_group(const int32_t* entry, int64_t m, int32_t group, int32_t* row_of_pair, cudaStream_t stream);

// out[index[i]] = base + i where index[i] ≥ 0.
void scatter_positions(const int32_t* index, int64_t m, int32_t base, int32_t* out, cudaStream_t stream);

}  // namespace mok::cuda
