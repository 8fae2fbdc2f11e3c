#pragma once
// A tensor's elements copied to the host as T (the tensor's own element type), for the checks
// that run the float core's tensors on a GPU (parallel, MoK plan, grouped ranges).

#include <cstdint>
#include <vector>

#include "core/tensor/tensor.h"

namespace mok::cuda {

template <typename T>
std::vector<T> download(const mok::Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.bytes() / static_cast<int64_t>(sizeof(T))));
  if (!v.empty()) t.copy_to_host(v.data(), t.bytes());
  return v;
}

}  // namespace mok::cuda
