#pragma once
// A switch read from the environment that takes one of a few named values (the kernel choices
// MOK_ATTENTION and MOK_GROUPED_KERNEL, docs/gpu.md): unset or empty gives "", a listed value
// gives itself, anything else (a typo) is refused with a message that lists the values, rather
// than silently meaning the default.

#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace mok {

inline std::string environment_choice(const char* name, std::initializer_list<const char*> values) {
  const char* set = std::getenv(name);
  if (!set || !*set) return "";
  std::string listed;
  for (const char* v : values) {
    if (std::string(set) == v) return set;
    listed += (listed.empty() ? "" : ", ") + std::string(v);
  }
  throw std::invalid_argument(std::string(name) + "=" + set + ": expected one of " + listed + " (or unset)");
}

}  // namespace mok
