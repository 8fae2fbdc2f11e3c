#pragma once
// Tensor: a dense, row-major, owning array of `real` with a shape, whose bytes are counted
// by the MemoryTracker that was current when it was allocated (under its MemTag).
// ByteBuffer: the same for raw bytes (compact copies: 8-/4-bit codes, scales).
// Both are move-only; copy explicitly with clone().

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "core/real.h"
#include "core/tensor/memory_tracker.h"

MOK_NN_BEGIN

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(int64_t bytes, MemTag tag);  // zero-filled
  // Contents undefined: only for a caller that writes every byte before reading any.
  static ByteBuffer uninitialized(int64_t bytes, MemTag tag);
  ~ByteBuffer();
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  int64_t size() const { return bytes_; }
  const MemTag& tag() const { return tag_; }
  void reset();  // frees the bytes now

 private:
  ByteBuffer(int64_t bytes, MemTag tag, bool zero_fill);
  uint8_t* data_ = nullptr;
  int64_t bytes_ = 0;
  MemTag tag_;
  MemoryTracker* tracker_ = nullptr;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of `shape`, counted under `tag` (workspace unless said).
  explicit Tensor(std::vector<int64_t> shape, MemTag tag = {});
  Tensor(std::initializer_list<int64_t> shape, MemTag tag = {})
      : Tensor(std::vector<int64_t>(shape), std::move(tag)) {}
  // Contents undefined: for an op that overwrites every element of its output before
  // anything reads it (saves the zero-fill pass over fresh activations).
  static Tensor uninitialized(std::vector<int64_t> shape, MemTag tag = {});

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  Tensor clone(MemTag tag) const;
  Tensor clone() const { return clone(buffer_.tag()); }

  real* data() { return reinterpret_cast<real*>(buffer_.data()); }
  const real* data() const { return reinterpret_cast<const real*>(buffer_.data()); }
  std::span<real> span() { return {data(), static_cast<size_t>(numel_)}; }
  std::span<const real> span() const { return {data(), static_cast<size_t>(numel_)}; }
  real& operator[](int64_t i) { return data()[i]; }
  real operator[](int64_t i) const { return data()[i]; }

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * static_cast<int64_t>(sizeof(real)); }
  bool empty() const { return numel_ == 0; }
  const MemTag& tag() const { return buffer_.tag(); }

  // Same data, new shape with the same element count.
  void reshape(std::vector<int64_t> shape);
  void fill(real value);
  void zero() { fill(real(0)); }
  void reset() { buffer_.reset(); shape_.clear(); numel_ = 0; }
  std::string shape_string() const;

 private:
  Tensor(std::vector<int64_t> shape, MemTag tag, bool zero_fill);
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  ByteBuffer buffer_;
};

MOK_NN_END
