#include "core/interop/hf_reference.h"

#include <fstream>
#include <stdexcept>

#include "core/model/language_model.h"
#include "core/util/counter_rng.h"
#include "core/util/json_writer.h"

namespace mok {

ReferenceSequence reference_sequence(LanguageModel& model, const std::string& name, std::vector<int32_t> tokens) {
  ReferenceSequence s;
  s.name = name;
  s.tokens = std::move(tokens);
  const Tensor logits = model.logits(s.tokens.data(), 1, static_cast<int>(s.tokens.size()));  // (T, V)
  s.logits.assign(logits.data(), logits.data() + logits.numel());
  return s;
}

std::vector<int32_t> random_tokens(int count, int vocab, uint64_t seed) {
  CounterRng rng(seed, /*stream=*/0x6866726566ull);  // "hfref"
  std::vector<int32_t> out(count);
  for (int32_t& t : out) t = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
  return out;
}

namespace {

void ids(JsonWriter& j, const std::vector<int32_t>& v) {
  j.begin_array();
  for (int32_t t : v) j.value(static_cast<int64_t>(t));
  j.end_array();
}

}  // namespace

void write_reference_file(const std::string& path, const std::vector<ReferenceSequence>& sequences,
                          const ReferenceGreedy& greedy, const std::string& tokenizer_text,
                          const std::vector<int32_t>& tokenizer_tokens) {
  JsonWriter j;
  j.begin_object();
  j.key("format").value("mok-hf-reference-1");
  j.key("sequences").begin_array();
  for (const ReferenceSequence& s : sequences) {
    j.begin_object();
    j.key("name").value(s.name);
    j.key("tokens");
    ids(j, s.tokens);
    const size_t vocab = s.tokens.empty() ? 0 : s.logits.size() / s.tokens.size();
    j.key("logits").begin_array();
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      j.begin_array();
      for (size_t v = 0; v < vocab; ++v) j.value(static_cast<double>(s.logits[t * vocab + v]));  // exact float
      j.end_array();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.key("greedy").begin_object();
  j.key("prompt").value(greedy.prompt);
  j.key("prompt_tokens");
  ids(j, greedy.prompt_tokens);
  j.key("new_tokens");
  ids(j, greedy.new_tokens);
  j.end_object();
  j.key("tokenizer_check").begin_object();
  j.key("text").value(tokenizer_text);
  j.key("tokens");
  ids(j, tokenizer_tokens);
  j.end_object();
  j.end_object();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.str() << "\n";
  out.flush();
  if (!out) throw std::runtime_error(path + ": cannot write");
}

}  // namespace mok
