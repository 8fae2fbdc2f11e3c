#include "core/backend/row_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {
constexpr int64_t kRowGrain = 16;
}  // namespace

double quantize_rows_cpu(const real* x, int64_t rows, int64_t cols, const QuantizeOptions& options,
                         uint8_t* codes, float* scales) {
  const int bits = options.bits;
  const int64_t rb = quantized_row_bytes(cols, bits);
  const int qmax = quantized_qmax(bits);
  std::fill_n(codes, rows * rb, uint8_t{0});
  std::vector<double> row_err(rows, 0.0);

  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * cols;
      double absmax = 0.0;
      for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(static_cast<double>(xr[c])));
      const float s = static_cast<float>(absmax / qmax);
      scales[r] = s;
      uint8_t* row_codes = codes + r * rb;
      double err = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        int q = 0;
        if (s > 0.0f) {
          const double t = static_cast<double>(xr[c]) / static_cast<double>(s);
          double qd;
          if (options.stochastic) {
            const double u = counter_uniform(options.seed, options.stream, static_cast<uint64_t>(r * cols + c));
            qd = std::floor(t + u);
          } else {
            qd = std::nearbyint(t);
          }
          q = static_cast<int>(std::clamp(qd, -static_cast<double>(qmax), static_cast<double>(qmax)));
        }
        const double d = static_cast<double>(xr[c]) - static_cast<double>(q) * static_cast<double>(s);
        err += d * d;
        if (bits == 8) {
          row_codes[c] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const uint8_t nib = static_cast<uint8_t>(q + 8);  // 1..15
          row_codes[c / 2] |= (c % 2 == 0) ? nib : static_cast<uint8_t>(nib << 4);
        }
      }
      row_err[r] = err;
    }
  });
  double total = 0.0;
  for (double e : row_err) total += e;
  return total;
}

void dequantize_rows_cpu(const uint8_t* codes, const float* scales, int64_t rows, int64_t cols, int bits,
                         real* out) {
  const int64_t rb = quantized_row_bytes(cols, bits);
  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const double s = scales[r];
      const uint8_t* row_codes = codes + r * rb;
      real* o = out + r * cols;
      if (bits == 8) {
        for (int64_t c = 0; c < cols; ++c) o[c] = static_cast<real>(static_cast<int8_t>(row_codes[c]) * s);
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          const uint8_t byte = row_codes[c / 2];
          const int nib = (c % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          o[c] = static_cast<real>((nib - 8) * s);
        }
      }
    }
  });
}

MOK_NN_END
