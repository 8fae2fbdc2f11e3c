#include "core/kittens/quantized_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/util/counter_rng.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {
constexpr int64_t kRowGrain = 16;

int qmax_for(int bits) { return bits == 8 ? 127 : 7; }
}  // namespace

int64_t QuantizedMatrix::bytes_for(int64_t rows, int64_t cols, int bits) {
  return rows * row_bytes(cols, bits) + rows * static_cast<int64_t>(sizeof(float));
}

void QuantizedMatrix::reset() {
  codes_.reset();
  scales_.reset();
  rows_ = cols_ = 0;
}

float QuantizedMatrix::scale(int64_t row) const {
  float s;
  std::memcpy(&s, scales_.data() + row * sizeof(float), sizeof(float));
  return s;
}

double QuantizedMatrix::quantize(const real* x, int64_t rows, int64_t cols,
                                 const QuantizeOptions& options, const MemTag& tag) {
  if (options.bits != 8 && options.bits != 4)
    throw std::invalid_argument("QuantizedMatrix: bits must be 8 or 4, got " + std::to_string(options.bits));
  reset();
  rows_ = rows;
  cols_ = cols;
  bits_ = options.bits;
  const int64_t rb = row_bytes(cols, bits_);
  codes_ = ByteBuffer(rows * rb, tag);
  scales_ = ByteBuffer(rows * static_cast<int64_t>(sizeof(float)), tag);
  const int qmax = qmax_for(bits_);
  std::vector<double> row_err(rows, 0.0);

  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * cols;
      double absmax = 0.0;
      for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(static_cast<double>(xr[c])));
      const float s = static_cast<float>(absmax / qmax);
      std::memcpy(scales_.data() + r * sizeof(float), &s, sizeof(float));
      uint8_t* codes = codes_.data() + r * rb;
      double err = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        int q = 0;
        if (s > 0.0f) {
          const double t = static_cast<double>(xr[c]) / static_cast<double>(s);
          double qd;
          if (options.stochastic) {
            const double u = counter_uniform(options.seed, options.stream,
                                             static_cast<uint64_t>(r * cols + c));
            qd = std::floor(t + u);
          } else {
            qd = std::nearbyint(t);
          }
          q = static_cast<int>(std::clamp(qd, -static_cast<double>(qmax), static_cast<double>(qmax)));
        }
        const double d = static_cast<double>(xr[c]) - static_cast<double>(q) * static_cast<double>(s);
        err += d * d;
        if (bits_ == 8) {
          codes[c] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const uint8_t nib = static_cast<uint8_t>(q + 8);  // 1..15
          codes[c / 2] |= (c % 2 == 0) ? nib : static_cast<uint8_t>(nib << 4);
        }
      }
      row_err[r] = err;
    }
  });
  double total = 0.0;
  for (double e : row_err) total += e;
  return total;
}

void QuantizedMatrix::dequantize_rows(int64_t r0, int64_t r1, real* out) const {
  const int64_t rb = row_bytes(cols_, bits_);
  parallel_for(r1 - r0, kRowGrain, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const int64_t r = r0 + i;
      const double s = scale(r);
      const uint8_t* codes = codes_.data() + r * rb;
      real* o = out + i * cols_;
      if (bits_ == 8) {
        for (int64_t c = 0; c < cols_; ++c)
          o[c] = static_cast<real>(static_cast<int8_t>(codes[c]) * s);
      } else {
        for (int64_t c = 0; c < cols_; ++c) {
          const uint8_t byte = codes[c / 2];
          const int nib = (c % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          o[c] = static_cast<real>((nib - 8) * s);
        }
      }
    }
  });
}

void QuantizedMatrix::dequantize(real* out) const { dequantize_rows(0, rows_, out); }

MOK_NN_END
