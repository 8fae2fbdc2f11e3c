#include "kernels/checks/cuda_op_checks.h"

#include "kernels/checks/check_util.h"
#include "kernels/cuda_backend.h"

namespace mok::cuda {

std::vector<OpCheck> run_cuda_op_checks(unsigned long long seed) {
  register_cuda_backend();  // the model checks build CUDA execution contexts
  CheckInputs in{seed};
  std::vector<OpCheck> out;
  check_elementwise(in, out);
  check_gemm(in, out);
  check_moe_routing(in, out);
  check_attention(in, out);
  check_sketch(in, out);
  check_model_training(in, out);
  return out;
}

}  // namespace mok::cuda
