#include "core/train/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "core/util/half_float.h"
#include "core/util/json_reader.h"
#include "core/util/json_writer.h"

namespace mok {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");
static_assert(sizeof(real) == 4, "checkpoints hold the float build's parameters");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // refuse absurd headers

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SafeTensorsError(path + ": " + what);
}

bool parse_dtype(const std::string& s, SafeDType* out) {
  if (s == "F32") *out = SafeDType::f32;
  else if (s == "I64") *out = SafeDType::i64;
  else if (s == "U8") *out = SafeDType::u8;
  else if (s == "BF16") *out = SafeDType::bf16;
  else if (s == "F16") *out = SafeDType::f16;
  else return false;
  return true;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel, or -1 when a dimension is negative or the product overflows.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

// The 8-byte length that starts a file, against the file's size and a sanity bound.
void check_header_length(const std::string& path, uint64_t header_len, uint64_t file_size) {
  if (header_len > kMaxHeaderBytes) {
    fail(path, "bad header: declared header length " + std::to_string(header_len) +
                   " bytes is implausible (not a safetensors file?)");
  }
  if (8 + header_len > file_size) {
    fail(path, "truncated: header needs " + std::to_string(8 + header_len) +
                   " bytes, the file has " + std::to_string(file_size));
  }
}

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      fail(path, "write failed: " + err);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace

const char* safe_dtype_name(SafeDType t) {
  switch (t) {
    case SafeDType::f32: return "F32";
    case SafeDType::i64: return "I64";
    case SafeDType::u8: return "U8";
    case SafeDType::bf16: return "BF16";
    case SafeDType::f16: return "F16";
  }
  return "?";
}

int safe_dtype_size(SafeDType t) {
  switch (t) {
    case SafeDType::f32: return 4;
    case SafeDType::i64: return 8;
    case SafeDType::u8: return 1;
    case SafeDType::bf16:
    case SafeDType::f16: return 2;
  }
  return 1;
}

SafeTensorView safe_view(const std::string& name, const Tensor& t) {
  if (t.is_cpu()) return SafeTensorView{name, SafeDType::f32, t.shape(), t.data(), nullptr};
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(t.bytes()));
  if (t.dtype() != DType::f32)
    throw std::invalid_argument("safetensors: '" + name + "' is " + t.describe() + "; checkpoints hold f32 values");
  t.copy_to_host(bytes->data(), t.bytes());
  return SafeTensorView{name, SafeDType::f32, t.shape(), bytes->data(), bytes};
}

int64_t SafeTensor::numel() const { return checked_numel(shape); }

void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Data layout: larger elements first (keeps alignment without padding), then by name.
  std::vector<const SafeTensorView*> order;
  std::set<std::string> names;
  for (const SafeTensorView& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail(path, "invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) fail(path, "duplicate tensor name '" + t.name + "'");
    if (checked_numel(t.shape) < 0) fail(path, "tensor '" + t.name + "' has an invalid shape");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const SafeTensorView* a, const SafeTensorView* b) {
    const int sa = safe_dtype_size(a->dtype), sb = safe_dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  std::map<std::string, std::pair<uint64_t, uint64_t>> offsets;
  uint64_t cursor = 0;
  for (const SafeTensorView* t : order) {
    const uint64_t bytes = static_cast<uint64_t>(checked_numel(t->shape)) * safe_dtype_size(t->dtype);
    offsets[t->name] = {cursor, cursor + bytes};
    cursor += bytes;
  }

  // Header: __metadata__ first, then tensors sorted by name.
  std::map<std::string, const SafeTensorView*> by_name;
  for (const SafeTensorView& t : tensors) by_name[t.name] = &t;
  JsonWriter j;
  j.begin_object();
  if (!metadata.empty()) {
    j.key("__metadata__").begin_object();
    for (const auto& [k, v] : metadata) j.key(k).value(v);
    j.end_object();
  }
  for (const auto& [name, t] : by_name) {
    j.key(name).begin_object();
    j.key("dtype").value(safe_dtype_name(t->dtype));
    j.key("shape").begin_array();
    for (int64_t d : t->shape) j.value(d);
    j.end_array();
    const auto [b, e] = offsets[name];
    j.key("data_offsets").begin_array().value(static_cast<int64_t>(b)).value(static_cast<int64_t>(e)).end_array();
    j.end_object();
  }
  j.end_object();
  std::string header = j.str();
  while ((8 + header.size()) % 8 != 0) header += ' ';

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, std::string("cannot create: ") + std::strerror(errno));
  uint64_t header_len = header.size();
  write_all(fd, &header_len, 8, path);
  write_all(fd, header.data(), header.size(), path);
  for (const SafeTensorView* t : order) {
    const auto [b, e] = offsets[t->name];
    if (e > b) write_all(fd, t->data, e - b, path);
  }
  if (::fsync(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    fail(path, "fsync failed: " + err);
  }
  if (::close(fd) != 0) fail(path, std::string("close failed: ") + std::strerror(errno));
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (!in) fail(path, "truncated: a safetensors file starts with an 8-byte header length");
  if (header_len > kMaxHeaderBytes) {
    fail(path, "bad header: declared header length " + std::to_string(header_len) +
                   " bytes is implausible (not a safetensors file?)");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path, "truncated: the header needs " + std::to_string(8 + header_len) + " bytes");
  std::map<std::string, std::string> metadata;
  try {
    const JsonValue root = parse_json(header);
    if (const JsonValue* m = root.find("__metadata__"))
      for (const auto& [k, v] : m->as_object()) metadata[k] = v.as_string();
  } catch (const std::exception& e) {
    fail(path, std::string("bad header: ") + e.what());
  }
  return metadata;
}

SafeTensorsFile SafeTensorsFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size_pos = in.tellg();
  if (size_pos < 0) fail(path, "cannot determine the file size");
  const uint64_t file_size = static_cast<uint64_t>(size_pos);
  in.seekg(0);
  if (file_size >= 8) {
    // A declared header larger than the file or than any real one is refused before the
    // whole file is read.
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    check_header_length(path, header_len, file_size);
    in.seekg(0);
  }
  std::string bytes(file_size, '\0');
  if (file_size) in.read(bytes.data(), static_cast<std::streamsize>(file_size));
  if (!in) fail(path, "read failed");
  return parse(bytes, path);
}

SafeTensorsFile SafeTensorsFile::parse(std::string_view bytes, const std::string& path) {
  const uint64_t file_size = bytes.size();
  if (file_size < 8) {
    fail(path, "truncated: " + std::to_string(file_size) +
                   " bytes, but a safetensors file starts with an 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  check_header_length(path, header_len, file_size);
  const std::string_view header = bytes.substr(8, header_len);
  const uint64_t data_size = file_size - 8 - header_len;
  const std::string_view data = bytes.substr(8 + header_len);

  JsonValue root;
  try {
    root = parse_json(header);
  } catch (const std::exception& e) {
    fail(path, std::string("bad header: ") + e.what());
  }
  if (!root.is_object()) fail(path, "bad header: not a JSON object");

  SafeTensorsFile file;
  file.path_ = path;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, entry] : root.as_object()) {
    try {
      if (name == "__metadata__") {
        for (const auto& [k, v] : entry.as_object()) file.metadata_[k] = v.as_string();
        continue;
      }
      SafeTensor t;
      t.name = name;
      if (!parse_dtype(entry.at("dtype").as_string(), &t.dtype)) {
        fail(path, "tensor '" + name + "': unsupported dtype " + entry.at("dtype").as_string());
      }
      for (const JsonValue& d : entry.at("shape").as_array()) t.shape.push_back(d.as_int64());
      const int64_t numel = checked_numel(t.shape);
      if (numel < 0) fail(path, "tensor '" + name + "': invalid shape " + shape_text(t.shape));
      const auto& off = entry.at("data_offsets").as_array();
      if (off.size() != 2) fail(path, "tensor '" + name + "': data_offsets must have 2 entries");
      const uint64_t b = off[0].as_uint64(), e = off[1].as_uint64();
      const uint64_t want = static_cast<uint64_t>(numel) * safe_dtype_size(t.dtype);
      if (e < b || e - b != want) {
        fail(path, "tensor '" + name + "': data_offsets [" + std::to_string(b) + ", " +
                       std::to_string(e) + "] do not match " + safe_dtype_name(t.dtype) + " shape " +
                       shape_text(t.shape) + " (" + std::to_string(want) + " bytes)");
      }
      if (e > data_size) {
        fail(path, "truncated: tensor '" + name + "' needs data bytes up to " + std::to_string(e) +
                       ", the file holds " + std::to_string(data_size));
      }
      t.bytes.assign(data.begin() + static_cast<int64_t>(b), data.begin() + static_cast<int64_t>(e));
      spans.emplace_back(b, e);
      file.tensors_.emplace(name, std::move(t));
    } catch (const SafeTensorsError&) {
      throw;
    } catch (const std::exception& e) {
      fail(path, "bad header entry '" + name + "': " + e.what());
    }
  }
  // The buffer must be covered exactly, without overlaps (the format allows no holes).
  std::sort(spans.begin(), spans.end());
  uint64_t cursor = 0;
  for (const auto& [b, e] : spans) {
    if (b != cursor) fail(path, "bad header: tensor data overlap or leave a gap at byte " + std::to_string(std::min(b, cursor)));
    cursor = e;
  }
  if (cursor != data_size) {
    fail(path, "bad file: " + std::to_string(data_size - cursor) +
                   " bytes after the last tensor (corrupt or appended data)");
  }
  return file;
}

const SafeTensor& SafeTensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path_, "no tensor named '" + name + "'");
  return it->second;
}

void SafeTensorsFile::read_into(const std::string& name, Tensor& dst) const {
  const SafeTensor& t = get(name);
  if (t.dtype != SafeDType::f32) {
    fail(path_, "tensor '" + name + "' has dtype " + safe_dtype_name(t.dtype) + ", expected F32");
  }
  if (t.shape != dst.shape()) {
    fail(path_, "tensor '" + name + "' has shape " + shape_text(t.shape) + ", expected " +
                    shape_text(dst.shape()));
  }
  if (t.bytes.empty()) return;
  if (dst.is_cpu()) {
    std::memcpy(dst.data(), t.bytes.data(), t.bytes.size());
  } else {
    dst.copy_from_host(t.bytes.data(), static_cast<int64_t>(t.bytes.size()));
  }
}

std::vector<int64_t> SafeTensorsFile::read_i64(const std::string& name) const {
  const SafeTensor& t = get(name);
  if (t.dtype != SafeDType::i64) {
    fail(path_, "tensor '" + name + "' has dtype " + safe_dtype_name(t.dtype) + ", expected I64");
  }
  std::vector<int64_t> out(t.bytes.size() / 8);
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

std::vector<float> SafeTensorsFile::read_f32(const std::string& name) const {
  const SafeTensor& t = get(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == SafeDType::f32) {
    if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  } else if (t.dtype == SafeDType::bf16 || t.dtype == SafeDType::f16) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h = 0;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      out[i] = t.dtype == SafeDType::bf16 ? bf16_to_float(h) : f16_to_float(h);
    }
  } else {
    fail(path_, "tensor '" + name + "' has dtype " + safe_dtype_name(t.dtype) + ", expected F32, BF16 or F16");
  }
  return out;
}

}  // namespace mok
