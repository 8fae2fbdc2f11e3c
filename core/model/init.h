#pragma once
// Deterministic parameter creation: values come from the counter RNG with one stream per
// parameter name, so adding or reordering parameters never shifts the others' values. They
// are placed on the device of the current ExecContext (with a compute copy when its compute
// dtype is not `real`): drawn there on a GPU (the same arithmetic; a rare element may round
// one ulp of float away from the host's), else on the host, so every rank of a run starts
// from the same values.

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/parameter.h"

MOK_NN_BEGIN

uint64_t parameter_stream(const std::string& name);  // FNV-1a of the name

// value ~ N(0, std²) (std > 0), or filled with `fill` when std == 0. grad zeroed, same shape,
// except under a ForwardOnlyParameters scope (then grad stays empty). Where the compute dtype
// differs from `real` (bf16 on a GPU), a compute copy too, and under ForwardOnlyParameters or
// BorrowedParameters that copy alone (no master: see parameter.h).
Parameter make_parameter(const std::string& name, std::vector<int64_t> shape, double std,
                         uint64_t seed, real fill = 0, bool weight_decay = true, bool expert = false);

// Fills `out` (numel values, host) with the values make_parameter(name, …) would draw.
void draw_parameter_values(const std::string& name, double std, uint64_t seed, real fill, real* out, int64_t numel);

// Draws into `value` (a view of a stack on any device, e.g. one expert's block of an
// (E, d, 2f) tensor) the values make_parameter(name, …, std, seed) would draw, and writes
// them into `compute` too when it is not empty (the compute copy's view). `value` may be
// empty when `compute` is not (a parameter without master).
void draw_parameter_into(const std::string& name, double std, uint64_t seed, Tensor& value, Tensor& compute);

// Places host values (`real`, value's or compute's numel of them) in a parameter's copies:
// the master when there is one, and the compute copy converted from them (through a
// transient `real` buffer on the device when there is no master), so the compute copy has the
// same bits either way.
void upload_parameter_values(const real* host, Tensor& value, Tensor& compute);

// While alive on this thread, new parameters get no gradient tensor, and no master where a
// compute copy exists: for a model that only runs forward (generation), whose gradients and
// masters would be 4 bytes per weight each, never used.
class ForwardOnlyParameters {
 public:
  ForwardOnlyParameters();
  ~ForwardOnlyParameters();
  ForwardOnlyParameters(const ForwardOnlyParameters&) = delete;
  ForwardOnlyParameters& operator=(const ForwardOnlyParameters&) = delete;
  // Whether parameters made now get gradients (no scope alive on this thread).
  static bool gradients();
  // Whether parameters made now keep a master beside a compute copy.
  static bool masters();

 private:
  bool previous_gradients_, previous_masters_;
};

// While alive on this thread, new parameters get no master where a compute copy exists, but
// keep their gradients: copies of weights another rank owns and updates (MoK's shadow
// experts), computed with and differentiated here, whose gradients go back to the owner.
class BorrowedParameters {
 public:
  BorrowedParameters();
  ~BorrowedParameters();
  BorrowedParameters(const BorrowedParameters&) = delete;
  BorrowedParameters& operator=(const BorrowedParameters&) = delete;

 private:
  bool previous_masters_;
};

MOK_NN_END
