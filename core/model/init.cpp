#include "core/model/init.h"

#include "core/util/counter_rng.h"

MOK_NN_BEGIN

uint64_t parameter_stream(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Parameter make_parameter(const std::string& name, std::vector<int64_t> shape, double std,
                         uint64_t seed, real fill, bool weight_decay, bool expert) {
  Parameter p;
  p.name = name;
  p.value = Tensor(shape, MemTag{MemCategory::parameters, -1, ""});
  p.grad = Tensor(shape, MemTag{MemCategory::gradients, -1, ""});
  p.weight_decay = weight_decay;
  p.expert = expert;
  const uint64_t stream = parameter_stream(name);
  real* v = p.value.data();
  for (int64_t i = 0; i < p.value.numel(); ++i)
    v[i] = std > 0 ? static_cast<real>(std * counter_normal(seed, stream, i)) : fill;
  return p;
}

MOK_NN_END
