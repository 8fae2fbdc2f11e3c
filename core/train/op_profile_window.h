#pragma once
// OpProfileWindow: times a window of training steps op by op on a rank's device, asked for
// with the environment variable MOK_OP_PROFILE=FIRST:COUNT (1-based optimizer steps; e.g.
// "6:5" profiles steps 6–10, after the warm-up). At the window's end each rank writes its
// table (Ops::op_profile_report: device ms per op and per op shape, the host's gaps) to
// stderr in one piece, titled with the rank. A backend that cannot time its ops writes
// nothing. Unset, it costs nothing. A run that ends (or resumes) inside the window writes
// no table.

#include <cstdint>
#include <optional>
#include <string>

#include "core/real.h"

MOK_NN_BEGIN

class Ops;

struct OpProfileSteps {
  int64_t first = 0;  // 1-based
  int64_t count = 0;
};

// "FIRST:COUNT" → the window; nullopt for "" and for text that is not two positive integers.
std::optional<OpProfileSteps> parse_op_profile_steps(const std::string& text);

class OpProfileWindow {
 public:
  // Reads MOK_OP_PROFILE; a malformed value is reported by warning() and profiles nothing.
  OpProfileWindow();
  const std::string& warning() const { return warning_; }
  bool active() const { return window_.has_value(); }  // a window was asked for

  // Around each step (1-based number `step`); `seconds` is the step's wall time.
  void before_step(Ops& ops, int64_t step);
  void after_step(Ops& ops, int64_t step, double seconds, const std::string& rank_label);

 private:
  std::optional<OpProfileSteps> window_;
  std::string warning_;
  double seconds_ = 0.0;
  int64_t steps_ = 0;
  bool started_ = false;  // the window's first step ran here
};

MOK_NN_END
