#include "core/train/op_profile_window.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "core/backend/ops.h"

MOK_NN_BEGIN

namespace {

std::optional<int64_t> positive(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<OpProfileSteps> parse_op_profile_steps(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto first = positive(std::string_view(text).substr(0, colon));
  const auto count = positive(std::string_view(text).substr(colon + 1));
  if (!first || !count) return std::nullopt;
  return OpProfileSteps{*first, *count};
}

OpProfileWindow::OpProfileWindow() {
  const char* env = std::getenv("MOK_OP_PROFILE");
  if (!env || !*env) return;
  window_ = parse_op_profile_steps(env);
  if (!window_)
    warning_ = std::string("warning: MOK_OP_PROFILE='") + env +
               "' is not FIRST:COUNT (two positive integers, e.g. 6:5); no op profile is taken";
}

void OpProfileWindow::before_step(Ops& ops, int64_t step) {
  if (!window_ || step != window_->first) return;
  seconds_ = 0.0;
  steps_ = 0;
  started_ = true;
  ops.start_op_profile();
}

void OpProfileWindow::after_step(Ops& ops, int64_t step, double seconds, const std::string& rank_label) {
  if (!started_) return;
  const int64_t last = window_->first + window_->count - 1;
  seconds_ += seconds;
  ++steps_;
  if (step != last) return;
  started_ = false;
  const std::string title = rank_label + ", steps " + std::to_string(window_->first) + "-" + std::to_string(step);
  const std::string table = ops.op_profile_report(title, static_cast<int>(steps_), seconds_, 40);
  if (!table.empty()) std::fwrite(table.data(), 1, table.size(), stderr);
}

MOK_NN_END
