#pragma once
// The mok model an export or import builds: the experiment's architecture with inference
// settings (exact saved inputs, dropless plain top-k routing), so that it computes what
// `mok generate` and Transformers compute.

#include <memory>

#include "core/config/experiment_config.h"
#include "core/model/language_model.h"

namespace mok {

ModelOptions interop_model_options(const ExperimentConfig& config, int vocab_size);

inline std::unique_ptr<LanguageModel> make_interop_model(const ExperimentConfig& config, int vocab_size) {
  return std::make_unique<LanguageModel>(interop_model_options(config, vocab_size));
}

}  // namespace mok
