#include "kernels/rank_order_all_reduce.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/rank_order_sum.h"

namespace mok::cuda {

void rank_order_all_reduce(const AllReducePlane& plane, mok::Tensor& data, mok::CommPurpose purpose,
                           const ScatterMove& scatter, const GatherMove& gather) {
  const mok::ExecContext& context = plane.context;
  mok::Communicator& control = plane.control;
  const cudaStream_t stream = plane.stream;
  if (data.device() != context.device())
    throw std::logic_error(std::string(plane.name) + ": " + data.describe() + " is not on " + context.device().str());
  const int R = control.size(), me = control.rank();
  const int64_t n = data.numel();
  if (R == 1 || n == 0) return;
  if (data.dtype() != mok::DType::f32 && data.dtype() != mok::DType::f64)
    throw std::invalid_argument("DataPlane::all_reduce_sum: f32 or f64, not " + data.describe());
  const RankChunks chunks{R, me, n, mok::dtype_size(data.dtype())};
  const int64_t mine = chunks.bytes(me);
  auto* base = static_cast<uint8_t*>(data.raw());
  mok::Tensor parts = context.empty({static_cast<int64_t>(R) * (mine / chunks.element_bytes)}, data.dtype());
  auto* pbase = static_cast<uint8_t*>(parts.raw());
  const auto profiled = profile_collective(plane.profiler, plane.profile_kind, purpose);
  const auto timed = plane.timer.scope();

  // 1. reduce-scatter: chunk c of every rank to rank c; the own chunk is a local copy.
  std::vector<int64_t> sb(R), rb(R);
  for (int p = 0; p < R; ++p) {
    sb[p] = chunks.bytes(p);
    rb[p] = mine;
  }
  if (mine)
    MOK_CUDA_CHECK(cudaMemcpyAsync(pbase + me * mine, base + chunks.offset(me), mine, cudaMemcpyDeviceToDevice, stream));
  scatter(base, pbase, chunks);
  control.count_transfer(sb, rb, purpose, 0.0);

  // 2. the owner adds the copies in rank order.
  const int64_t len = mine / chunks.element_bytes;
  if (data.dtype() == mok::DType::f32)
    sum_rank_parts(static_cast<const float*>(parts.raw()), R, len, reinterpret_cast<float*>(base + chunks.offset(me)),
                   stream);
  else
    sum_rank_parts(static_cast<const double*>(parts.raw()), R, len,
                   reinterpret_cast<double*>(base + chunks.offset(me)), stream);

  // 3. all-gather: the owner's reduced chunk to everyone.
  for (int p = 0; p < R; ++p) {
    sb[p] = p == me ? 0 : mine;
    rb[p] = p == me ? 0 : chunks.bytes(p);
  }
  gather(base, chunks);
  control.count_transfer(sb, rb, purpose, 0.0);
}

}  // namespace mok::cuda
