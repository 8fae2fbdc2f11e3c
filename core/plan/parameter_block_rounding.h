#pragma once
// What a caching allocator adds to the parameter state by rounding each block up to its size
// class (core/tensor/size_class.h): the tensors' bytes, which the memory tracker counts and
// the plan predicts, do not show it, but a device memory limit holds the blocks. The
// parameter state is few, large blocks, so their rounding is a fixed sum, up to 1/8 of them
// for unlucky widths (a 27e9 model cut to one layer: 1.7 GB of 15.3 GiB). Activations, many
// tensors of varying sizes, are left out.
//
// Blocks, as the model allocates them (core/model/init.cpp, grouped_swiglu.cpp,
// core/train/adamw.cpp): every dense parameter has a master value, a gradient and two Adam
// moments (fp32), and on a bf16 run a compute copy; a MoE layer's routed experts share one
// stacked value, gradient and compute copy per projection, with Adam moments per expert.
// Generation builds the values alone (ForwardOnlyParameters: no gradients, no optimizer, and
// on a bf16 run the compute copies without masters).

#include <cstdint>

#include "core/config/experiment_config.h"

namespace mok {

// What the parameter state holds: everything training keeps, or generation's values alone.
enum class ParameterState { training, forward_only };

// Bytes the blocks of one rank's parameter state hold beyond their tensors, for blocks of
// size_class_bytes(·, small_align); compute_copies: the bf16 copies exist (a GPU's bf16 run).
double parameter_block_rounding(const ExperimentConfig& config, int64_t small_align, bool compute_copies,
                                ParameterState state = ParameterState::training);

}  // namespace mok
