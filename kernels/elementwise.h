#pragma once
// Elementwise ops on flat device arrays of n elements (CUDA), T = float or bf16, arithmetic
// in float, one rounding to T at the store. 16-byte vector loads when every pointer is
// aligned to its pack, one element at a time otherwise; any n (a scalar tail).

#include <cuda_runtime.h>

#include <cstdint>

namespace mok::cuda {

// y += x
template <typename T>
void add_inplace(T* y, const T* x, int64_t n, cudaStream_t stream);

// y += (a + b): a and b added first, as the CPU does.
template <typename T>
void add2_inplace(T* y, const T* a, const T* b, int64_t n, cudaStream_t stream);

// out = x · f (out may equal x)
template <typename T>
void scale(const T* x, float f, T* out, int64_t n, cudaStream_t stream);

template <typename T>
void fill(T* x, float value, int64_t n, cudaStream_t stream);

// dst = src in D (round to nearest even into bf16). For S == D a byte copy; src and dst must
// not overlap. Instantiated for (float, bf16), (bf16, float), (float, float), (bf16, bf16).
template <typename S, typename D>
void convert(const S* src, D* dst, int64_t n, cudaStream_t stream);

}  // namespace mok::cuda
