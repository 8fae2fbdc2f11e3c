// Fuzz target: the safetensors reader behind every checkpoint load (model and optimizer
// state). Each input ends in a SafeTensorsError naming the file, or a file whose tensors
// hold exactly their shape's bytes and cover the data buffer without gaps.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/train/safetensors.h"
#include "tests/fuzz/fuzz_require.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mok::fuzz::fuzz_require;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const mok::SafeTensorsFile file = mok::SafeTensorsFile::parse(bytes, "fuzz.safetensors");
    uint64_t covered = 0;
    for (const auto& [name, t] : file.tensors()) {
      fuzz_require(t.numel() >= 0, "tensor '" + name + "' has a size");
      fuzz_require(t.bytes.size() == static_cast<uint64_t>(t.numel()) * mok::safe_dtype_size(t.dtype),
                   "tensor '" + name + "' holds its shape's bytes");
      covered += t.bytes.size();
      if (t.dtype == mok::SafeDType::i64) fuzz_require(file.read_i64(name).size() * 8 == t.bytes.size(), "i64 read");
    }
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    fuzz_require(8 + header + covered == size, "the tensors cover the data buffer exactly");
  } catch (const mok::SafeTensorsError& e) {
    fuzz_require(std::string(e.what()).rfind("fuzz.safetensors: ", 0) == 0, "the error names the file");
  }
  return 0;
}
