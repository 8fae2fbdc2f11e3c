#include "core/store/run_uid.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>

namespace mok {

std::string new_run_uid() {
  // Seeded from the OS once per thread, and again in a process forked from one that had
  // seeded it (the child would otherwise repeat the parent's uids, and a store's unique
  // index would refuse the second run). Uids need to be unique, not reproducible.
  thread_local std::mt19937_64 rng;
  thread_local pid_t seeded_in = 0;
  if (seeded_in != ::getpid()) {
    rng.seed((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
    seeded_in = ::getpid();
  }
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~uint64_t(0xF000)) | uint64_t(0x4000);          // version 4
  lo = (lo & ~(uint64_t(0xC) << 60)) | (uint64_t(0x8) << 60);  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

}  // namespace mok
