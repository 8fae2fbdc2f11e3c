#include "kernels/checks/check_util.h"

namespace mok::cuda {

void check_attention(CheckInputs&, std::vector<OpCheck>&) {}

}  // namespace mok::cuda
