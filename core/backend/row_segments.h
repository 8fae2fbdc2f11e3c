#pragma once
// RowSegments: the experts' row segments of a matrix sorted by expert: segment g is rows
// [off[g], off[g+1]) for g < G, off[0] = 0, off[G] = rows.
//
// Where the pairs were sorted on a GPU, the offsets live there ((G + 1) i64) and the host
// knows only their total (the routed pairs: nothing is dropped without a capacity). An op
// that can take the offsets on the device (the CUDA grouped kernel) never brings them over,
// so a MoE layer needs no wait for the device and its step can be recorded as a graph
// (step_graph.h). host() brings them over on first use (a wait; it throws while a step is
// recorded, which makes that step run op by op). Offsets made on the host (the CPU, the
// multi-rank dispatchers' stacked banks) have no device copy.
//
// leading(G): the first G segments over the same matrix: rows past off[G] belong to no
// segment (a fixed-size exchange's pad rows, sorted after every expert's; the grouped products
// leave them as they are). rows() stays the matrix's rows; off[G] ≤ rows.

#include <cstdint>
#include <vector>

#include "core/tensor/tensor.h"

MOK_NN_BEGIN

class RowSegments {
 public:
  RowSegments() = default;
  // Host offsets (G + 1), non-decreasing from 0 (implicit: a vector of offsets is one).
  RowSegments(std::vector<int64_t> host_offsets);  // NOLINT(google-explicit-constructor)
  // Offsets on a device ((G + 1) i64) whose last value is `rows`, not read yet.
  RowSegments(Tensor device_offsets, int64_t rows);
  // Copies share the device offsets (a view) and the host ones read so far.
  RowSegments(const RowSegments& other);
  RowSegments& operator=(const RowSegments& other);
  RowSegments(RowSegments&&) = default;
  RowSegments& operator=(RowSegments&&) = default;

  // The first `groups` segments of these, over the same rows (see above).
  RowSegments leading(int groups) const;
  // Segments [g0, g1) over rows [off[g0], off[g1]) counted from 0 (host offsets; see above).
  RowSegments range(int g0, int g1) const;

  bool empty() const { return groups() == 0; }
  int groups() const;
  // The group count of the pass these segments belong to: groups() unless made by range().
  int pass_groups() const { return pass_groups_ ? pass_groups_ : groups(); }
  int64_t rows() const { return rows_; }
  // Whether rows past the last offset belong to no segment (leading()).
  bool bounded() const { return bounded_; }
  // (G + 1) i64 on the device that made them; empty for host offsets.
  const Tensor& device() const { return device_; }
  bool on_host() const { return !host_.empty(); }
  // The offsets on the host, read from the device on first use (waits for it).
  const std::vector<int64_t>& host() const;
  int64_t begin(int g) const { return host()[static_cast<size_t>(g)]; }
  int64_t size(int g) const { return host()[static_cast<size_t>(g) + 1] - host()[static_cast<size_t>(g)]; }

 private:
  Tensor device_;
  int64_t rows_ = 0;
  mutable std::vector<int64_t> host_;
  bool bounded_ = false;
  int pass_groups_ = 0;  // 0: these are the whole pass
};

MOK_NN_END
