// mok import-hf: a Hugging Face Mixtral folder as a mok checkpoint to fine-tune.
//   mok import-hf DIR [--out RUN_DIR] [--name NAME] [--seq-len N] [--force] [--json]
// Exit codes: 0 written, 1 failure while writing, 2 bad usage, an unreadable folder, a model
// mok cannot compute exactly, or an existing checkpoint without --force (nothing written).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "app/cli/commands.h"
#include "core/interop/hf_import.h"
#include "core/util/json_writer.h"

namespace mok::cli {
namespace {

const char* kUsage =
    "usage: mok import-hf DIR [--out RUN_DIR] [--name NAME] [--seq-len N] [--force] [--json]\n"
    "\n"
    "Reads a Hugging Face model folder in Mixtral layout (config.json, model.safetensors or\n"
    "sharded, a tokenizer mok can use: mok_tokenizer.txt or a byte-level tokenizer.json in\n"
    "mok's id layout, as `mok export --hf` writes) and writes a mok checkpoint at step 0 with\n"
    "a fresh optimizer: RUN_DIR/step_000000 (docs/interop.md).\n"
    "\n"
    "  --out RUN_DIR   the run folder (default runs/imported/<name>)\n"
    "  --name NAME     the experiment name (default: mok_config.yaml's, else the folder's name)\n"
    "  --seq-len N     the context in tokens (default: mok_config.yaml's, else\n"
    "                  max_position_embeddings, at most 1024)\n"
    "  --force         replace an existing RUN_DIR/step_000000\n"
    "  --json          print one JSON object (checkpoint, run_dir, parameters, ...) as the last line\n"
    "\n"
    "Then:  mok generate RUN_DIR --prompt TEXT\n"
    "       mok train --resume RUN_DIR --set data.corpus=PATH --set train.steps=N   (fine-tune)\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "mok import-hf: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int cmd_import_hf(int argc, char** argv) {
  std::string folder;
  HfImportOptions o;
  bool force = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--out") {
      if (!next || !*next) return usage_error("--out needs a folder");
      o.run_dir = argv[++i];
    } else if (arg == "--name") {
      if (!next || !*next) return usage_error("--name needs a name");
      o.name = argv[++i];
    } else if (arg == "--seq-len") {
      char* end = nullptr;
      const long v = next ? std::strtol(next, &end, 10) : 0;
      if (!next || *end != '\0' || v < 1 || v > 1000000) return usage_error("--seq-len needs a whole number >= 1");
      o.seq_len = static_cast<int>(v);
      ++i;
    } else if (arg == "--force") {
      force = true;
    } else if (arg == "--json") {
      json = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (folder.empty()) {
      folder = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (folder.empty()) return usage_error("missing DIR");

  HfImportResult r;
  try {
    r = plan_hf_import(folder, o);  // every refusal before anything is written
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok import-hf: %s\n", e.what());
    return 2;
  }
  std::error_code ec;
  if (!force && std::filesystem::exists(r.checkpoint, ec)) {
    std::fprintf(stderr, "mok import-hf: %s exists; nothing was written (--force replaces it, --out names another run folder)\n",
                 r.checkpoint.c_str());
    return 2;
  }
  try {
    r = import_hugging_face(folder, o);
  } catch (const HfImportRefused& e) {
    std::fprintf(stderr, "mok import-hf: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mok import-hf: %s\n", e.what());
    return 1;
  }
  std::printf("imported %s into %s (%lld parameters, tokenizer %s from %s)\n", folder.c_str(), r.checkpoint.c_str(),
              static_cast<long long>(r.parameters), r.config.data.tokenizer.c_str(), r.tokenizer_source.c_str());
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::printf("sample:    mok generate %s --prompt TEXT\nfine-tune: mok train --resume %s --set data.corpus=PATH --set train.steps=N\n",
              r.run_dir.c_str(), r.run_dir.c_str());
  if (json) {
    JsonWriter j;
    j.begin_object();
    j.key("checkpoint").value(r.checkpoint);
    j.key("run_dir").value(r.run_dir);
    j.key("name").value(r.config.name);
    j.key("parameters").value(r.parameters);
    j.key("tokenizer").value(r.config.data.tokenizer);
    j.key("tokenizer_source").value(r.tokenizer_source);
    j.key("kv_heads").value(r.kv_heads);
    j.key("notes").begin_array();
    for (const std::string& n : r.notes) j.value(n);
    j.end_array();
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  }
  return 0;
}

}  // namespace mok::cli
