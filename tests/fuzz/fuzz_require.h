#pragma once
// fuzz_require(condition, what): the invariant a fuzz target states. A broken one prints
// what was expected and aborts, which libFuzzer and the standalone driver both report as a
// failure with the input that caused it.

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mok::fuzz {

[[noreturn]] inline void fuzz_failure(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void fuzz_require(bool condition, const std::string& what) {
  if (!condition) fuzz_failure(what);
}

}  // namespace mok::fuzz
