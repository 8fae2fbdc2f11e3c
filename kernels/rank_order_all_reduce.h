#pragma once
// The fixed-order all-reduce of the GPU data planes (core/parallel/data_plane.h), written once
// over a transport's two moves: chunk c of the array (elements [n·c/R, n·(c+1)/R)) belongs to
// rank c, which gathers every rank's copy of it into an (R, chunk) buffer, adds them in rank
// order (kernels/rank_order_sum.h) and hands the sum back to every rank. Each element is summed
// by one rank in one order, so every rank, every run and the host's reduction of the same
// values get the same bits, whatever moves the bytes (NCCL send/recv, peer copies).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "core/backend/exec_context.h"
#include "core/parallel/communicator.h"
#include "kernels/collective_timing.h"

namespace mok::cuda {

// The byte ranges of one all-reduce's chunks.
struct RankChunks {
  int ranks = 1, me = 0;
  int64_t n = 0, element_bytes = 0;
  int64_t offset(int c) const { return n * c / ranks * element_bytes; }  // of chunk c in the array
  int64_t bytes(int c) const { return offset(c + 1) - offset(c); }
};

// 1. scatter: every peer p gets chunk p of `base` (at base + offset(p)); from every peer s this
//    rank's chunk of s's array lands in row s of `parts` (parts + s · bytes(me)). The own
//    chunk is already in its row.
using ScatterMove = std::function<void(const uint8_t* base, uint8_t* parts, const RankChunks& chunks)>;
// 2. gather: every peer gets this rank's summed chunk (base + offset(me)); every peer s's
//    summed chunk lands at base + offset(s).
using GatherMove = std::function<void(uint8_t* base, const RankChunks& chunks)>;

// The plane an all-reduce runs in: its device, stream, host communicator (bytes are counted
// there by purpose and peer), timer and profiler; `name` ("NcclDataPlane") is said in errors,
// `profile_kind` ("nccl_all_reduce") labels the collective where MOK_OP_PROFILE shows it.
struct AllReducePlane {
  const mok::ExecContext& context;
  cudaStream_t stream;
  mok::Communicator& control;
  CollectiveTimer& timer;
  OpProfiler& profiler;
  const char* name;
  const char* profile_kind;
};

// Sums `data` (f32 or f64, on the plane's device) over the plane's ranks in place, the moves
// queued on its stream; nothing is queued, timed or profiled for one rank or an empty array.
void rank_order_all_reduce(const AllReducePlane& plane, mok::Tensor& data, mok::CommPurpose purpose,
                           const ScatterMove& scatter, const GatherMove& gather);

}  // namespace mok::cuda
