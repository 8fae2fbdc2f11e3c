#pragma once
// The safetensors file format, read and written here (no external library):
//   [8 bytes: header length N, little-endian u64][N bytes: JSON header, space-padded so the
//   data starts 8-byte aligned][data buffer]
// The header maps each tensor name to {"dtype": "F32"|"BF16"|"F16"|"I64"|"U8", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data buffer) and may hold
// "__metadata__": {string: string}. Header keys are written sorted by name; in the data
// buffer tensors are laid out by decreasing element size, then by name, so every tensor is
// aligned to its element size and the buffer has no holes.
// Every error (truncated file, bad header, wrong dtype or shape) is a SafeTensorsError whose
// message starts with the file path.

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor/tensor.h"

namespace mok {

class SafeTensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class SafeDType { f32, i64, u8, bf16, f16 };
const char* safe_dtype_name(SafeDType t);  // "F32", "I64", "U8", "BF16", "F16"
int safe_dtype_size(SafeDType t);          // bytes per element

// A tensor to write: borrowed bytes (numel · element size of them).
struct SafeTensorView {
  std::string name;
  SafeDType dtype = SafeDType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::shared_ptr<const std::vector<uint8_t>> host_copy;  // the bytes `data` points into, when copied off a device
};

// A float32 view of a Tensor (of the float build); a tensor on a GPU is copied to the host.
SafeTensorView safe_view(const std::string& name, const Tensor& t);

// A tensor read from a file (owns its bytes).
struct SafeTensor {
  std::string name;
  SafeDType dtype = SafeDType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t numel() const;
};

// Writes `path` (replacing it). Tensor names must be unique, non-empty and not
// "__metadata__". Throws SafeTensorsError on invalid input or I/O failure. The file is
// flushed to disk (fsync) before returning.
void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The "__metadata__" of a file, reading only its header (not the tensor data). Throws
// SafeTensorsError on an unreadable or invalid header.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

class SafeTensorsFile {
 public:
  // Reads and validates the whole file.
  static SafeTensorsFile read(const std::string& path);
  // Validates a whole file's bytes; `path` names it in errors.
  static SafeTensorsFile parse(std::string_view bytes, const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }

  // The tensor, or SafeTensorsError naming the file and the tensor.
  const SafeTensor& get(const std::string& name) const;
  // Copies an F32 tensor into `dst`, whose shape it must have exactly.
  void read_into(const std::string& name, Tensor& dst) const;
  // An I64 tensor's values.
  std::vector<int64_t> read_i64(const std::string& name) const;
  // A floating-point tensor's values as float: F32 as stored, BF16 and F16 widened exactly.
  std::vector<float> read_f32(const std::string& name) const;

 private:
  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, SafeTensor> tensors_;
};

}  // namespace mok
