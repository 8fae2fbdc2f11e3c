#include "core/backend/cross_entropy_kernel.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

CrossEntropySum cross_entropy_forward(real* logits, const int32_t* targets, int64_t n, int64_t vocab,
                                      bool write_grad) {
  for (int64_t r = 0; r < n; ++r)
    if (targets[r] >= vocab)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(targets[r]) +
                                  " outside the vocabulary of " + std::to_string(vocab));
  CrossEntropySum out;
  out.loss_sum = parallel_sum(n, 32, [&](int64_t r0, int64_t r1) {
    double s = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      real* x = logits + r * vocab;
      const int32_t t = targets[r];
      if (t < 0) {
        if (write_grad) std::fill(x, x + vocab, real(0));
        continue;
      }
      real m = x[0];
      for (int64_t j = 1; j < vocab; ++j) m = std::max(m, x[j]);
      real sum = 0;
      for (int64_t j = 0; j < vocab; ++j) sum += std::exp(x[j] - m);
      const real lse = m + std::log(sum);
      s += static_cast<double>(lse - x[t]);
      if (write_grad) {
        for (int64_t j = 0; j < vocab; ++j) x[j] = std::exp(x[j] - lse);
        x[t] -= real(1);
      }
    }
    return s;
  });
  for (int64_t r = 0; r < n; ++r) out.count += targets[r] >= 0;
  return out;
}

MOK_NN_END
