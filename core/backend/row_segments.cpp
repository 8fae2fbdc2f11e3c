#include "core/backend/row_segments.h"

#include <stdexcept>
#include <string>
#include <utility>

MOK_NN_BEGIN

RowSegments::RowSegments(std::vector<int64_t> host_offsets) : host_(std::move(host_offsets)) {
  if (!host_.empty() && host_.front() != 0)
    throw std::invalid_argument("RowSegments: offsets start at " + std::to_string(host_.front()) + ", not 0");
  for (size_t g = 1; g < host_.size(); ++g)
    if (host_[g] < host_[g - 1])
      throw std::invalid_argument("RowSegments: offsets decrease at segment " + std::to_string(g - 1));
  rows_ = host_.empty() ? 0 : host_.back();
}

RowSegments::RowSegments(Tensor device_offsets, int64_t rows) : device_(std::move(device_offsets)), rows_(rows) {
  if (device_.dtype() != DType::i64 || device_.numel() < 1)
    throw std::invalid_argument("RowSegments: device offsets must be (G + 1) i64, not " + device_.shape_string());
}

RowSegments::RowSegments(const RowSegments& other)
    : device_(other.device_.empty() ? Tensor() : other.device_.view(0, other.device_.shape())),
      rows_(other.rows_),
      host_(other.host_),
      bounded_(other.bounded_),
      pass_groups_(other.pass_groups_) {}

RowSegments& RowSegments::operator=(const RowSegments& other) {
  if (this != &other) *this = RowSegments(other);
  return *this;
}

RowSegments RowSegments::leading(int groups) const {
  if (groups < 0 || groups > this->groups())
    throw std::invalid_argument("RowSegments::leading: " + std::to_string(groups) + " of " +
                                std::to_string(this->groups()) + " segments");
  RowSegments out;
  out.rows_ = rows_;
  out.bounded_ = true;
  if (!host_.empty()) out.host_.assign(host_.begin(), host_.begin() + groups + 1);
  if (!device_.empty()) out.device_ = device_.view(0, {static_cast<int64_t>(groups) + 1});
  return out;
}

RowSegments RowSegments::range(int g0, int g1) const {
  if (g0 < 0 || g1 < g0 || g1 > groups())
    throw std::invalid_argument("RowSegments::range: [" + std::to_string(g0) + ", " + std::to_string(g1) + ") of " +
                                std::to_string(groups()) + " segments");
  if (g0 == 0 && g1 == groups()) return *this;
  const std::vector<int64_t>& off = host();
  std::vector<int64_t> local(off.begin() + g0, off.begin() + g1 + 1);
  const int64_t r0 = local.front();
  for (int64_t& o : local) o -= r0;
  RowSegments out(std::move(local));
  out.pass_groups_ = pass_groups();
  return out;
}

int RowSegments::groups() const {
  if (!host_.empty()) return static_cast<int>(host_.size()) - 1;
  return device_.empty() ? 0 : static_cast<int>(device_.numel()) - 1;
}

const std::vector<int64_t>& RowSegments::host() const {
  if (host_.empty() && !device_.empty()) {
    std::vector<int64_t> read(static_cast<size_t>(device_.numel()));
    device_.copy_to_host(read.data(), device_.bytes());
    if (bounded_ ? read.back() > rows_ : read.back() != rows_)
      throw std::logic_error("RowSegments: the device offsets end at " + std::to_string(read.back()) +
                             (bounded_ ? ", past " : ", not ") + std::to_string(rows_));
    host_ = std::move(read);
  }
  return host_;
}

MOK_NN_END
