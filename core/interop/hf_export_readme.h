#pragma once
// README.md of an exported Hugging Face folder: how to load it, what maps to what, what the
// export leaves out, and how the tokenizer was written.

#include <string>

#include "core/config/experiment_config.h"
#include "core/interop/hf_export.h"

namespace mok {

std::string hf_export_readme(const ExperimentConfig& config, const HfExportResult& result, int vocab_size,
                             const std::string& tokenizer_kind, const std::string& dtype);

}  // namespace mok
