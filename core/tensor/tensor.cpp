#include "core/tensor/tensor.h"

#include "core/tensor/block_cache.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

MOK_NN_BEGIN

ByteBuffer::ByteBuffer(int64_t bytes, MemTag tag) : ByteBuffer(bytes, std::move(tag), true) {}

ByteBuffer ByteBuffer::uninitialized(int64_t bytes, MemTag tag) {
  return ByteBuffer(bytes, std::move(tag), false);
}

ByteBuffer::ByteBuffer(int64_t bytes, MemTag tag, bool zero_fill)
    : bytes_(bytes), tag_(std::move(tag)), tracker_(&MemoryTracker::current()) {
  if (bytes < 0) throw std::invalid_argument("ByteBuffer: negative size");
  if (bytes == 0) return;
  data_ = static_cast<uint8_t*>(BlockCache::allocate(bytes));
#ifndef NDEBUG
  if (!zero_fill) std::memset(data_, 0xff, bytes);  // NaN for float/double: reads show up
#endif
  if (zero_fill) std::memset(data_, 0, bytes);
  tracker_->add(tag_, bytes_);
}

ByteBuffer::~ByteBuffer() { reset(); }

void ByteBuffer::reset() {
  if (data_) {
    tracker_->remove(tag_, bytes_);
    BlockCache::release(data_, bytes_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), tag_(std::move(other.tag_)), tracker_(other.tracker_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    bytes_ = other.bytes_;
    tag_ = std::move(other.tag_);
    tracker_ = other.tracker_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Tensor::Tensor(std::vector<int64_t> shape, MemTag tag) : Tensor(std::move(shape), std::move(tag), true) {}

Tensor Tensor::uninitialized(std::vector<int64_t> shape, MemTag tag) {
  return Tensor(std::move(shape), std::move(tag), false);
}

Tensor::Tensor(std::vector<int64_t> shape, MemTag tag, bool zero_fill) : shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in " + shape_string());
    numel_ *= d;
  }
  const int64_t bytes = numel_ * static_cast<int64_t>(sizeof(real));
  buffer_ = zero_fill ? ByteBuffer(bytes, std::move(tag)) : ByteBuffer::uninitialized(bytes, std::move(tag));
}

Tensor Tensor::clone(MemTag tag) const {
  Tensor t = uninitialized(shape_, std::move(tag));
  if (numel_) std::memcpy(t.data(), data(), bytes());
  return t;
}

void Tensor::reshape(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != numel_) {
    throw std::invalid_argument("Tensor::reshape: " + shape_string() + " has " +
                                std::to_string(numel_) + " elements, new shape has " +
                                std::to_string(n));
  }
  shape_ = std::move(shape);
}

void Tensor::fill(real value) {
  real* p = data();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + ")";
}

MOK_NN_END
