#include "core/backend/host_reading.h"

MOK_NN_BEGIN

namespace {

class CopiedReading final : public HostReading {
 public:
  explicit CopiedReading(const Tensor& t) : bytes_(static_cast<size_t>(t.bytes())) {
    if (!bytes_.empty()) t.copy_to_host(bytes_.data(), t.bytes());
  }
  size_t bytes() const override { return bytes_.size(); }
  const void* data() override { return bytes_.data(); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

std::shared_ptr<HostReading> copied_reading(const Tensor& t) { return std::make_shared<CopiedReading>(t); }

MOK_NN_END
