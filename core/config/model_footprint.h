#pragma once
// What a config's model costs to train before anything is allocated: its parameter count
// and the bytes of the state every parameter carries on the CPU (fp32 weight, gradient and
// the two AdamW moments, 16 bytes). Activations and workspace come on top. A model whose
// footprint alone exceeds the machine is refused with its sizes instead of failing with
// "std::bad_alloc" part-way through building it.

#include <cstdint>
#include <string>

#include "core/config/experiment_config.h"

namespace mok {

struct ModelFootprint {
  double parameters = 0.0;      // of the whole model (every rank's experts)
  double training_bytes = 0.0;  // parameters × 16: weights, gradients, AdamW moments (fp32)
};

// The vocabulary is data.vocab_size for BPE, 256 for bytes.
ModelFootprint model_footprint(const ExperimentConfig& config);

// format_byte_size (core/util/byte_size.h) for sizes an int64 holds, "more than 8 EiB" above.
std::string format_footprint_bytes(double bytes);

// "model.layers 1024, model.d_model 65536, ...": the sizes that make the model large.
std::string model_size_text(const ExperimentConfig& config);

}  // namespace mok
