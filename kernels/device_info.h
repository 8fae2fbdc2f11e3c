#pragma once
// What CUDA devices this process can use. Safe to call where no driver or GPU exists:
// it then reports zero devices and the reason.

#include <string>
#include <vector>

namespace mok::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  long long memory_bytes = 0;
  int multiprocessors = 0;
};

struct DeviceQuery {
  std::vector<DeviceInfo> devices;
  std::string unavailable_reason;  // set when devices is empty
};

DeviceQuery query_devices();

}  // namespace mok::cuda
