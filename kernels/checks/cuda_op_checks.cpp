#include "kernels/checks/cuda_op_checks.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/checks/check_util.h"
#include "kernels/cuda_backend.h"

namespace mok::cuda {

const std::vector<std::string>& cuda_check_groups() {
  static const std::vector<std::string> groups = {"elementwise", "gemm",   "moe",   "attention", "sketch",
                                                  "kittens",     "lowbit", "model", "graph", "parallel"};
  return groups;
}

std::vector<OpCheck> run_cuda_op_checks(unsigned long long seed, const std::vector<std::string>& groups) {
  for (const std::string& g : groups)
    if (std::find(cuda_check_groups().begin(), cuda_check_groups().end(), g) == cuda_check_groups().end())
      throw std::invalid_argument("unknown check group '" + g + "'");
  auto wanted = [&](const char* g) { return groups.empty() || std::find(groups.begin(), groups.end(), g) != groups.end(); };
  register_cuda_backend();  // the model checks build CUDA execution contexts
  CheckInputs in{seed};
  std::vector<OpCheck> out;
  if (wanted("elementwise")) check_elementwise(in, out);
  if (wanted("gemm")) check_gemm(in, out);
  if (wanted("moe")) {
    check_moe_routing(in, out);
    check_mok_plan(in, out);
    check_grouped_ranges(in, out);
  }
  if (wanted("attention")) {
    check_attention(in, out);
    check_cudnn_attention(in, out);
    check_cached_attention(in, out);
  }
  if (wanted("sketch")) check_sketch(in, out);
  if (wanted("kittens")) check_kittens(in, out);
  else if (wanted("lowbit")) check_lowbit_rows(in, out);  // the row codes alone (for racecheck)
  if (wanted("model")) check_model_training(in, out);
  if (wanted("graph")) check_step_graphs(in, out);
  if (wanted("parallel")) check_parallel(in, out);
  return out;
}

}  // namespace mok::cuda
