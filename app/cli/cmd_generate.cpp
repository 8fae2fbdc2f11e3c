// mok generate: sample text from a checkpoint.
//   mok generate CHECKPOINT_DIR [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
//                               [--top-p P] [--seed S] [--json]
// Text streams to stdout as it is produced; with --json the last stdout line is one JSON
// object {"text", "prompt", "new_tokens", "tokens_per_s", "checkpoint"} instead.
// Exit codes: 0 ok, 1 failure while generating, 2 bad usage or unreadable checkpoint.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/cli/commands.h"
#include "core/train/text_generator.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok generate CHECKPOINT_DIR [--prompt TEXT] [--tokens N] [--temperature T]\n"
    "                                   [--top-k K] [--top-p P] [--seed S] [--json]\n"
    "\n"
    "  CHECKPOINT_DIR   a checkpoint folder (or a run folder: its latest checkpoint)\n"
    "  --prompt TEXT    text to continue (default: empty)\n"
    "  --tokens N       tokens to generate (default 200)\n"
    "  --temperature T  0 = greedy (default 0.8)\n"
    "  --top-k K        sample among the K most likely tokens (default 0 = all)\n"
    "  --top-p P        sample within probability mass P (default 1)\n"
    "  --seed S         the same seed gives the same text (default 0)\n"
    "  --json           one JSON object as the last stdout line\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "mok generate: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

// Invalid UTF-8 bytes (a byte-level model may split characters) become U+FFFD for JSON.
std::string valid_utf8(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && len == 2) ok = c >= 0xC2;  // no overlong forms
    if (ok && len == 3) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogates
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90) && c <= 0xF4;
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

bool parse_number(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end && end != text && *end == '\0';
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  std::string dir, prompt;
  GenerateOptions o;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](double lo, double hi, double* out) -> bool {
      if (i + 1 >= argc) return false;
      return parse_number(argv[++i], out) && *out >= lo && *out <= hi;
    };
    double v = 0;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--prompt") {
      if (i + 1 >= argc) return usage_error("--prompt needs text");
      prompt = argv[++i];
    } else if (arg == "--tokens") {
      if (!number(0, 1e7, &v) || v != static_cast<int>(v)) return usage_error("--tokens needs a whole number >= 0");
      o.max_new_tokens = static_cast<int>(v);
    } else if (arg == "--temperature") {
      if (!number(0, 100, &v)) return usage_error("--temperature needs a number in [0, 100]");
      o.sampling.temperature = v;
    } else if (arg == "--top-k") {
      if (!number(0, 1e9, &v) || v != static_cast<int>(v)) return usage_error("--top-k needs a whole number >= 0");
      o.sampling.top_k = static_cast<int>(v);
    } else if (arg == "--top-p") {
      if (!number(1e-9, 1, &v)) return usage_error("--top-p needs a number in (0, 1]");
      o.sampling.top_p = v;
    } else if (arg == "--seed") {
      if (!number(0, 1.8e19, &v) || v != static_cast<double>(static_cast<uint64_t>(v))) {
        return usage_error("--seed needs a whole number >= 0");
      }
      o.seed = static_cast<uint64_t>(v);
    } else if (arg == "--json") {
      json = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (dir.empty()) {
      dir = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (dir.empty()) return usage_error("missing CHECKPOINT_DIR");

  std::unique_ptr<TextGenerator> gen;
  try {
    gen = std::make_unique<TextGenerator>(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok generate: %s\n", e.what());
    return 2;
  }
  try {
    if (!json) {
      std::fputs(prompt.c_str(), stdout);
      std::fflush(stdout);
    }
    const GenerateResult r = gen->generate(prompt, o, [&](const std::string& piece) {
      if (json) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    if (json) {
      JsonWriter j;
      j.begin_object();
      j.key("text").value(valid_utf8(r.text));
      j.key("prompt").value(valid_utf8(prompt));
      j.key("new_tokens").value(r.new_tokens);
      j.key("tokens_per_s").value(r.tokens_per_s);
      j.key("checkpoint").value(gen->checkpoint_dir());
      j.end_object();
      std::printf("%s\n", j.str().c_str());
    } else {
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok generate: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace mok::cli
