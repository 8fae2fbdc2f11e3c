#pragma once
// ProgressBar: a MetricSink that shows training progress on stderr.
//   terminal:     one line redrawn in place (at most ~10×/s), e.g.
//                 step  420/2000 [#####.........] loss 2.113 val 2.41 bpb  18.2k tok/s ETA 3m05s
//   not terminal: a plain line every ~5% of the run (logs, CI), and at the end.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/events/metric_event.h"

namespace mok::cli {

class ProgressBar : public MetricSink {
 public:
  ProgressBar(FILE* out, bool terminal);
  // For stderr: terminal when isatty(stderr).
  static bool stderr_is_terminal();

  void on_run_started(const RunStarted& run) override;
  void on_metrics(const MetricRow& row) override;
  void on_event(const std::string& text) override;
  void on_run_finished(RunStatus status, const std::string& message) override;

  // The text of the line for the current state, `width` columns wide at most.
  std::string render(int width) const;

 private:
  void draw(bool final_line);
  int terminal_width() const;

  FILE* out_;
  bool terminal_;
  int64_t total_ = 0, start_step_ = 0, step_ = 0;
  double loss_ = -1.0, val_bpb_ = -1.0, tokens_per_s_ = 0.0, wall_s_ = 0.0;
  int64_t next_plain_step_ = 0;  // plain mode: print when step reaches this
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t printed_step_ = -1;   // the step of the last line drawn
  bool drawn_ = false;           // terminal: a partial line is on screen
};

}  // namespace mok::cli
