#include "core/tensor/tensor.h"

#include <cstring>
#include <stdexcept>

MOK_NN_BEGIN

// --- ByteBuffer ---

ByteBuffer::ByteBuffer(int64_t bytes, MemTag tag) : ByteBuffer(bytes, std::move(tag), cpu_allocator(), true) {}

ByteBuffer ByteBuffer::uninitialized(int64_t bytes, MemTag tag) {
  return ByteBuffer(bytes, std::move(tag), cpu_allocator(), false);
}

ByteBuffer::ByteBuffer(int64_t bytes, MemTag tag, Allocator& allocator, bool zero_fill)
    : bytes_(bytes), tag_(std::move(tag)), tracker_(&MemoryTracker::current()), allocator_(&allocator),
      device_(allocator.device()) {
  if (bytes < 0) throw std::invalid_argument("ByteBuffer: negative size");
  if (bytes == 0) return;
  tracker_->check_room(tag_, bytes_, device_.type);  // parallel.device_memory_limit, before taking anything
  data_ = static_cast<uint8_t*>(allocator.allocate(bytes));
#ifndef NDEBUG
  if (!zero_fill) allocator.memset(data_, 0xff, bytes);  // NaN for floats: reads show up
#endif
  if (zero_fill) allocator.memset(data_, 0, bytes);
  tracker_->add(tag_, bytes_, device_.type);
}

ByteBuffer ByteBuffer::borrowed(void* data, int64_t bytes, Allocator& allocator) {
  if (bytes < 0 || (bytes > 0 && !data)) throw std::invalid_argument("ByteBuffer::borrowed: no memory to borrow");
  ByteBuffer b;
  b.data_ = static_cast<uint8_t*>(data);
  b.bytes_ = bytes;
  b.allocator_ = &allocator;
  b.device_ = allocator.device();
  b.borrowed_ = true;
  return b;
}

ByteBuffer::~ByteBuffer() { reset(); }

void ByteBuffer::retag(MemTag tag) {
  if (data_ && !borrowed_) {
    tracker_->remove(tag_, bytes_, device_.type);
    tracker_->add(tag, bytes_, device_.type);
  }
  tag_ = std::move(tag);
}

void ByteBuffer::reset() {
  if (data_ && !borrowed_) {
    tracker_->remove(tag_, bytes_, device_.type);
    allocator_->release(data_, bytes_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), tag_(std::move(other.tag_)), tracker_(other.tracker_),
      allocator_(other.allocator_), device_(other.device_), borrowed_(other.borrowed_) {
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
    allocator_ = other.allocator_;
    device_ = other.device_;
    borrowed_ = other.borrowed_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

// --- Tensor ---

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      std::string s = "(";
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
      throw std::invalid_argument("Tensor: negative dimension in " + s + ")");
    }
    n *= d;
  }
  return n;
}

Tensor::Tensor(std::vector<int64_t> shape, MemTag tag)
    : Tensor(std::move(shape), kRealDType, cpu_allocator(), std::move(tag), true) {}

Tensor Tensor::uninitialized(std::vector<int64_t> shape, MemTag tag) {
  return Tensor(std::move(shape), kRealDType, cpu_allocator(), std::move(tag), false);
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag) {
  return Tensor(std::move(shape), dtype, allocator, std::move(tag), false);
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag) {
  return Tensor(std::move(shape), dtype, allocator, std::move(tag), true);
}

Tensor Tensor::borrow(void* data, std::vector<int64_t> shape, DType dtype, Allocator& allocator) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<ByteBuffer>(ByteBuffer::borrowed(data, t.numel_ * dtype_size(dtype), allocator));
  return t;
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag, bool zero_fill)
    : shape_(std::move(shape)), dtype_(dtype) {
  numel_ = shape_numel(shape_);
  storage_ = std::make_shared<ByteBuffer>(numel_ * dtype_size(dtype), std::move(tag), allocator, zero_fill);
}

Allocator& Tensor::allocator() const {
  if (storage_ && storage_->allocator()) return *storage_->allocator();
  return cpu_allocator();
}

const MemTag& Tensor::tag() const {
  static const MemTag none;
  return storage_ ? storage_->tag() : none;
}

Tensor Tensor::clone(MemTag tag) const {
  Tensor t(shape_, dtype_, allocator(), std::move(tag), false);
  if (numel_) allocator().copy_within(t.raw(), raw(), bytes());
  return t;
}

bool Tensor::retag(MemTag tag) {
  if (!storage_ || view_ || storage_.use_count() != 1 || storage_->is_borrowed()) return false;
  storage_->retag(std::move(tag));
  return true;
}

Tensor Tensor::handle(int64_t offset_bytes, std::vector<int64_t> shape, bool view) const {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype_;
  t.storage_ = storage_;
  t.offset_bytes_ = offset_bytes;
  t.view_ = view;
  return t;
}

Tensor Tensor::share_as(MemTag tag) const {
  if (!storage_ || view_ || storage_->is_borrowed()) return {};
  storage_->retag(std::move(tag));
  return handle(offset_bytes_, shape_, false);
}

Tensor Tensor::share_or_clone(MemTag tag) const {
  Tensor t = share_as(tag);
  return t.storage_ || !storage_ ? std::move(t) : clone(std::move(tag));
}

Tensor Tensor::view(int64_t offset, std::vector<int64_t> shape) const {
  const int64_t n = shape_numel(shape);
  const int64_t size = storage_ ? storage_->size() / dtype_size(dtype_) : 0;
  const int64_t base = offset_bytes_ / dtype_size(dtype_);
  if (offset < 0 || base + offset + n > size)
    throw std::out_of_range("Tensor::view: elements [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                            ") outside a tensor of " + std::to_string(numel_));
  return handle(offset_bytes_ + offset * dtype_size(dtype_), std::move(shape), true);
}

void Tensor::check_host(DType want) const {
  if (dtype_ != want || (storage_ && !storage_->device().is_cpu()))
    throw std::logic_error(std::string("Tensor: host access as ") + dtype_name(want) + " to a tensor " + describe());
}

void Tensor::check_dtype(DType want) const {
  if (dtype_ != want)
    throw std::logic_error(std::string("Tensor: access as ") + dtype_name(want) + " to a tensor " + describe());
}

void Tensor::reshape(std::vector<int64_t> shape) {
  const int64_t n = shape_numel(shape);
  if (n != numel_) {
    throw std::invalid_argument("Tensor::reshape: " + shape_string() + " has " + std::to_string(numel_) +
                                " elements, new shape has " + std::to_string(n));
  }
  shape_ = std::move(shape);
}

void Tensor::fill(real value) {
  real* p = data();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

void Tensor::zero() {
  if (numel_) allocator().memset(raw(), 0, bytes());
}

void Tensor::copy_from_host(const void* src, int64_t bytes) {
  if (bytes != this->bytes())
    throw std::invalid_argument("Tensor::copy_from_host: " + std::to_string(bytes) + " bytes into " + describe());
  if (bytes) allocator().copy_from_host(raw(), src, bytes);
}

void Tensor::copy_to_host(void* dst, int64_t bytes) const {
  if (bytes != this->bytes())
    throw std::invalid_argument("Tensor::copy_to_host: " + describe() + " into " + std::to_string(bytes) + " bytes");
  if (bytes) allocator().copy_to_host(dst, raw(), bytes);
}

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + ")";
}

std::string Tensor::describe() const {
  return shape_string() + " " + dtype_name(dtype_) + " on " + device().str();
}

MOK_NN_END
