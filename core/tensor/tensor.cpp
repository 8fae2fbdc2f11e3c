#include "core/tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

MOK_NN_BEGIN

namespace {
constexpr int64_t kAlignBytes = 64;  // cache line; also what AVX-512 loads like
}

ByteBuffer::ByteBuffer(int64_t bytes, MemTag tag)
    : bytes_(bytes), tag_(std::move(tag)), tracker_(&MemoryTracker::current()) {
  if (bytes < 0) throw std::invalid_argument("ByteBuffer: negative size");
  if (bytes == 0) return;
  const int64_t rounded = (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignBytes, rounded));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded);
  tracker_->add(tag_, bytes_);
}

ByteBuffer::~ByteBuffer() { reset(); }

void ByteBuffer::reset() {
  if (data_) {
    tracker_->remove(tag_, bytes_);
    std::free(data_);
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

Tensor::Tensor(std::vector<int64_t> shape, MemTag tag) : shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in " + shape_string());
    numel_ *= d;
  }
  buffer_ = ByteBuffer(numel_ * static_cast<int64_t>(sizeof(real)), std::move(tag));
}

Tensor Tensor::clone(MemTag tag) const {
  Tensor t(shape_, std::move(tag));
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
