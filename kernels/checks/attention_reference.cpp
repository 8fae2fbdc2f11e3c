#include "kernels/checks/attention_reference.h"

#include <algorithm>
#include <thread>

#include "core/backend/causal_attention.h"
#include "core/util/thread_pool.h"

namespace mok::cuda {

AttentionReference attention_reference(const std::vector<float>& qkv, const std::vector<float>& d_o, int B,
                                       int S, int H, int hd) {
  static ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  ScopedThreadPool use(pool);
  const std::vector<double> qkv64(qkv.begin(), qkv.end()), do64(d_o.begin(), d_o.end());
  AttentionReference ref;
  ref.o.resize(size_t(B) * S * H * hd);
  ref.lse.resize(size_t(B) * H * S);
  ref.dqkv.resize(qkv.size());
  mok::f64::causal_attention_forward(qkv64.data(), B, S, H, hd, ref.o.data(), ref.lse.data());
  mok::f64::causal_attention_backward(qkv64.data(), do64.data(), ref.lse.data(), B, S, H, hd, ref.dqkv.data());
  return ref;
}

}  // namespace mok::cuda
