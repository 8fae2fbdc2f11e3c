#pragma once
// EtaEstimate: time left for a run from the pace of its recent steps. The pace is taken over
// the last kWindow metric rows of this session (wall seconds per step), so a slow start or
// a pause long ago does not skew it for the rest of the run.

#include <cstdint>
#include <deque>

#include <QString>

namespace mok::gui {

class EtaEstimate {
 public:
  static constexpr size_t kWindow = 20;

  // A metric row at `step`, `wall_s` seconds into the run.
  void add(int64_t step, double wall_s);
  void clear() { samples_.clear(); }
  // Seconds left to reach `total_steps`; NaN until two rows are known.
  double seconds_left(int64_t total_steps) const;

 private:
  struct Sample {
    int64_t step;
    double wall_s;
  };
  std::deque<Sample> samples_;
};

// "42 s", "3 min 05 s", "1 h 02 min"; "–" for NaN.
QString format_duration(double seconds);

}  // namespace mok::gui
