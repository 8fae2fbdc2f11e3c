#pragma once
// Export of a mok checkpoint as a Hugging Face model folder (MixtralForCausalLM, loadable by
// Transformers' AutoModelForCausalLM without custom code). The folder:
//
//   config.json             Mixtral config (core/interop/mixtral_config.h)
//   model.safetensors       the weights by Transformers name (core/interop/mixtral_layout.h),
//                           F32 (default) or BF16; metadata {"format": "pt"}
//   tokenizer.json          the tokenizer for the `tokenizers` library, when representable
//   tokenizer_config.json   PreTrainedTokenizerFast, so AutoTokenizer loads tokenizer.json
//   mok_tokenizer.txt       mok's own tokenizer file (exact; `mok import-hf` reads it)
//   mok_config.yaml         the checkpoint's whole experiment config
//   mok_reference.json      mok's logits and greedy continuation (core/interop/hf_reference.h)
//   README.md               what maps to what, what is left out, how to load and check it
//
// Models Mixtral cannot represent exactly are refused (HfExportRefused) before anything is
// written (core/interop/mixtral_compat.h).

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mok {

class HfExportRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writing the folder failed (no room, no permission): files an earlier export left there are
// as they were (each file goes to a temporary first; the renames come after the last write).
class HfExportWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HfExportOptions {
  std::string dtype = "float32";  // float32 | bfloat16: the weights in model.safetensors
  // Reference file: the prompt of the greedy continuation and its length, and the length of
  // the random-token sequence (both capped by the model's context, data.seq_len).
  std::string prompt = "The jury said that";
  int greedy_tokens = 32;
  int random_tokens = 64;
};

struct HfExportResult {
  std::string folder;
  std::string checkpoint;                         // the checkpoint folder exported
  std::string architecture = "MixtralForCausalLM";
  std::vector<std::string> files;                 // written, in the folder
  std::vector<std::string> notes;                 // settings not carried (mixtral_export_notes)
  bool tokenizer_json = false;                    // tokenizer.json written
  std::string tokenizer_note;                     // why not, when it was not
  int64_t parameters = 0;                         // values exported
};

// Writes `folder` (created; files of the same names replaced, whole) from the checkpoint
// folder or run folder `checkpoint`. Throws HfExportRefused for a model Mixtral cannot
// represent, CheckpointError / SafeTensorsError / std::runtime_error for unreadable input, and
// HfExportWriteError when the folder cannot be written.
HfExportResult export_hugging_face(const std::string& checkpoint, const std::string& folder,
                                   const HfExportOptions& options = {});

}  // namespace mok
