#pragma once
// Deterministic parameter creation: values come from the counter RNG with one stream per
// parameter name, so adding or reordering parameters never shifts the others' values.

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/parameter.h"

MOK_NN_BEGIN

uint64_t parameter_stream(const std::string& name);  // FNV-1a of the name

// value ~ N(0, std²) (std > 0), or filled with `fill` when std == 0. grad zeroed, same shape.
Parameter make_parameter(const std::string& name, std::vector<int64_t> shape, double std,
                         uint64_t seed, real fill = 0, bool weight_decay = true, bool expert = false);

MOK_NN_END
