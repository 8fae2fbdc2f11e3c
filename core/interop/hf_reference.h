#pragma once
// mok_reference.json: what mok computes for a few token sequences, written beside an
// exported model so that another framework can be checked against it
// (tools/hf/check_hf_export.py):
//
//   {"format": "mok-hf-reference-1",
//    "sequences": [{"name": "text"|"random", "tokens": [T ids], "logits": [[V floats] × T]}],
//    "greedy": {"prompt": TEXT, "prompt_tokens": [...], "new_tokens": [N ids]},
//    "tokenizer_check": {"text": TEXT, "tokens": [...]}}
//
// Logits come from mok's full-sequence forward (dropless routing), in float; the greedy
// continuation from the code `mok generate --temperature 0` runs (TextGenerator).

#include <cstdint>
#include <string>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN
class LanguageModel;
MOK_NN_END

namespace mok {

class Tokenizer;

struct ReferenceSequence {
  std::string name;
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // (tokens, vocab), row-major
};

struct ReferenceGreedy {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> new_tokens;
};

// The logits of `tokens` (one sequence of at most max_seq_len ids) from `model`.
ReferenceSequence reference_sequence(LanguageModel& model, const std::string& name, std::vector<int32_t> tokens);

// `count` ids uniform in [0, vocab) from the counter RNG (seed, a fixed stream).
std::vector<int32_t> random_tokens(int count, int vocab, uint64_t seed);

// Writes the file (replacing it). Throws std::runtime_error on I/O failure.
void write_reference_file(const std::string& path, const std::vector<ReferenceSequence>& sequences,
                          const ReferenceGreedy& greedy, const std::string& tokenizer_text,
                          const std::vector<int32_t>& tokenizer_tokens);

}  // namespace mok
