// Fuzz target: trainer_state.json, the checkpoint file a resume trusts for the step, the
// counters and every other file's checksum. Each input ends in a CheckpointError naming the
// file, or a state with the values a save can write (no negative step, tokens or time, the
// data counter at the step).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/train/checkpoint.h"
#include "tests/fuzz/fuzz_require.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mok::fuzz::fuzz_require;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const mok::TrainerState s = mok::parse_trainer_state(text, "ckpt/trainer_state.json");
    fuzz_require(s.step >= 0 && s.tokens_seen >= 0 && s.total_steps >= 0, "counts are not negative");
    fuzz_require(std::isfinite(s.wall_s) && s.wall_s >= 0, "wall time is a finite, non-negative number");
    if (auto it = s.counters.find("data.next_step"); it != s.counters.end())
      fuzz_require(it->second == s.step, "the data counter is at the step");
    for (const auto& [file, digest] : s.files) fuzz_require(digest.bytes >= 0, "file '" + file + "' has a size");
  } catch (const mok::CheckpointError& e) {
    fuzz_require(std::string(e.what()).rfind("ckpt/trainer_state.json: ", 0) == 0, "the error names the file");
  }
  return 0;
}
