#pragma once
// The MoK dispatch plan on the GPU (core/parallel/mok_dispatcher.h), so that only row counts
// cross to the host. CPU references: CpuOps::slot_share_counts, ship_rows and
// scatter_positions (core/backend/cpu_ops.cpp). Pairs are p = t·k + s. Integer counts use
// integer atomics (exact, so the result does not depend on their order); the row plan is a
// fixed-order scan. Asynchronous on `stream`; nothing is allocated here.

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

// counts (E·k), zeroed here: counts[e·k + m − 1] += 1 for each slot of a token on expert e
// whose token has m slots on experts of e's owner.
void slot_share_counts(const int32_t* expert, const int32_t* owner, int64_t n, int k, int E, int32_t* counts,
                       cudaStream_t stream);

// Rows to ship per destination rank q < R: tokens with a slot whose expert e has dest[e] = q.
// Count pass (fill = false): rows (R) i64. Fill pass: with the same inputs, writes each row
// (destination-major, tokens ascending) at row_base[q] + its rank among q's tokens: token,
// head_pair, and k entries in slot order (entry = local_index[e], gate, pair), padded with
// −1 / 0 / −1. One block: a token-order scan over n tokens per destination. gate float.
void ship_rows(bool fill, const int32_t* expert, const float* gate, const int32_t* dest, const int32_t* local_index,
               int64_t n, int k, int R, const int64_t* row_base, int64_t* rows, int32_t* token, int32_t* head_pair,
               int32_t* entry, float* entry_gate, int32_t* pair, cudaStream_t stream);

// out[index[i]] = base + i where index[i] ≥ 0.
void scatter_positions(const int32_t* index, int64_t m, int32_t base, int32_t* out, cudaStream_t stream);

}  // namespace mok::cuda
