#pragma once
// Tensor: a dense, row-major array with a shape, an element type (DType) and a device, whose
// bytes come from that device's Allocator and are counted by the MemoryTracker that was
// current when they were allocated (under its MemTag, by device).
// ByteBuffer: the bytes behind tensors; also used alone for raw bytes (8-/4-bit codes).
//
// Ownership: a tensor owns its storage, or shares it as a view (view()): stacked expert
// weights (E, d, 2f) give each expert a named (d, 2f) view. Tensors are move-only; copy the
// contents explicitly with clone().
//
// Access: data(), span() and operator[] are the CPU core's: host memory of `real`. data_as<T>()
// is host memory of any element type; ptr<T>() / raw() give the address on any device, for
// kernels. Each checks what it assumes and says what it found.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/real.h"
#include "core/tensor/allocator.h"
#include "core/tensor/dtype.h"
#include "core/tensor/memory_tracker.h"

MOK_NN_BEGIN

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(int64_t bytes, MemTag tag);  // host, zero-filled
  // Contents undefined: only for a caller that writes every byte before reading any.
  static ByteBuffer uninitialized(int64_t bytes, MemTag tag);
  // On any device: zero-filled or undefined.
  ByteBuffer(int64_t bytes, MemTag tag, Allocator& allocator, bool zero_fill);
  // Memory the caller owns (e.g. another framework's tensor on `allocator`'s device): not
  // counted by a tracker, never freed here; valid while the caller keeps it.
  static ByteBuffer borrowed(void* data, int64_t bytes, Allocator& allocator);
  ~ByteBuffer();
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  uint8_t* data() { return data_; }  // the device's address (host memory on the CPU)
  const uint8_t* data() const { return data_; }
  int64_t size() const { return bytes_; }
  const MemTag& tag() const { return tag_; }
  // Counts these bytes under `tag` from now on (e.g. a workspace tensor kept for backward).
  void retag(MemTag tag);
  Allocator* allocator() const { return allocator_; }
  Device device() const { return device_; }
  bool is_borrowed() const { return borrowed_; }
  void reset();  // frees the bytes now (a borrowed buffer only lets go of them)

 private:
  uint8_t* data_ = nullptr;
  int64_t bytes_ = 0;
  MemTag tag_;
  MemoryTracker* tracker_ = nullptr;
  Allocator* allocator_ = nullptr;
  Device device_;
  bool borrowed_ = false;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled host tensor of `real`, counted under `tag` (workspace unless said).
  explicit Tensor(std::vector<int64_t> shape, MemTag tag = {});
  Tensor(std::initializer_list<int64_t> shape, MemTag tag = {})
      : Tensor(std::vector<int64_t>(shape), std::move(tag)) {}
  // Contents undefined: for an op that overwrites every element of its output before
  // anything reads it (saves the zero-fill pass over fresh activations).
  static Tensor uninitialized(std::vector<int64_t> shape, MemTag tag = {});
  // Any element type on any device (the allocator decides the device).
  static Tensor empty(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag = {});
  static Tensor zeros(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag = {});
  // A tensor over memory the caller owns (ByteBuffer::borrowed), e.g. a torch tensor's device
  // memory for one call: valid while the caller keeps that memory. It cannot be retagged or
  // shared (share_as gives an empty tensor), so a layer that keeps it for backward copies it.
  static Tensor borrow(void* data, std::vector<int64_t> shape, DType dtype, Allocator& allocator);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  // A copy on the same device with the same element type.
  Tensor clone(MemTag tag) const;
  Tensor clone() const { return clone(tag()); }
  // Elements [offset, offset + numel(shape)) of this tensor's storage, as a tensor of
  // `shape` that shares it (no bytes are allocated or counted).
  Tensor view(int64_t offset, std::vector<int64_t> shape) const;

  // Host memory of `real` (the CPU core's element type).
  real* data() { return host_ptr<real>(); }
  const real* data() const { return const_cast<Tensor*>(this)->host_ptr<real>(); }
  std::span<real> span() { return {data(), static_cast<size_t>(numel_)}; }
  std::span<const real> span() const { return {data(), static_cast<size_t>(numel_)}; }
  real& operator[](int64_t i) { return raw_real()[i]; }
  real operator[](int64_t i) const { return const_cast<Tensor*>(this)->raw_real()[i]; }
  // Host memory of element type T.
  template <typename T> T* data_as() { return host_ptr<T>(); }
  template <typename T> const T* data_as() const { return const_cast<Tensor*>(this)->host_ptr<T>(); }
  // The address on this tensor's device, element type T (checked) or untyped.
  template <typename T> T* ptr() { check_dtype(dtype_of<T>); return static_cast<T*>(raw()); }
  template <typename T> const T* ptr() const { check_dtype(dtype_of<T>); return static_cast<const T*>(raw()); }
  void* raw() { return storage_ ? storage_->data() + offset_bytes_ : nullptr; }
  const void* raw() const { return storage_ ? storage_->data() + offset_bytes_ : nullptr; }

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * dtype_size(dtype_); }
  bool empty() const { return numel_ == 0; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_cpu() const { return device().is_cpu(); }
  Allocator& allocator() const;
  const MemTag& tag() const;
  bool is_view() const { return view_; }
  // Identifies the storage block this tensor's bytes lie in (views share their base's);
  // null for an empty tensor. One device operation may not span two blocks.
  const void* storage_id() const { return storage_.get(); }
  // Counts this tensor's bytes under `tag` from now on; only a tensor that owns its storage
  // alone can (returns false, changing nothing, for a view or shared storage).
  bool retag(MemTag tag);
  // Keeps this tensor's bytes without a copy: another handle to the whole storage, counted
  // under `tag` from now on whoever holds it. Returns an empty tensor for a view (the caller
  // copies instead). The bytes must not be written in place while the handle is kept.
  Tensor share_as(MemTag tag) const;
  // share_as, or a copy counted under `tag` where the bytes cannot be shared (a view, borrowed
  // memory).
  Tensor share_or_clone(MemTag tag) const;

  // Same data, new shape with the same element count.
  void reshape(std::vector<int64_t> shape);
  void fill(real value);  // host tensors of `real`
  void zero();            // any device, any element type
  void reset() { storage_.reset(); shape_.clear(); numel_ = 0; offset_bytes_ = 0; view_ = false; }
  std::string shape_string() const;
  std::string describe() const;  // e.g. "(16, 128) bf16 on cuda:0"

  // Copies between host memory and this tensor (any device); `bytes` must equal bytes().
  void copy_from_host(const void* src, int64_t bytes);
  void copy_to_host(void* dst, int64_t bytes) const;

 private:
  Tensor(std::vector<int64_t> shape, DType dtype, Allocator& allocator, MemTag tag, bool zero_fill);
  // Another handle to this tensor's storage: `shape` from `offset_bytes`, a view or not.
  Tensor handle(int64_t offset_bytes, std::vector<int64_t> shape, bool view) const;
  template <typename T> T* host_ptr() {
    check_host(dtype_of<T>);
    return static_cast<T*>(raw());
  }
  real* raw_real() { return static_cast<real*>(raw()); }
  void check_host(DType want) const;
  void check_dtype(DType want) const;

  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = kRealDType;
  std::shared_ptr<ByteBuffer> storage_;
  int64_t offset_bytes_ = 0;
  bool view_ = false;
};

// Element count of a shape (throws on a negative dimension).
int64_t shape_numel(const std::vector<int64_t>& shape);

MOK_NN_END
