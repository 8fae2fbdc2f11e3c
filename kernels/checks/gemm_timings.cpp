#include "kernels/checks/check_util.h"

namespace mok::cuda {

void print_gemm_timings() {}

}  // namespace mok::cuda
