#pragma once
// MetricWriter: buffers metric rows of one run and writes them to the RunStore in batches,
// one transaction per batch. A batch is written when `max_rows` rows are waiting or
// `max_delay_ms` has passed since the last write (checked on append and, with
// `background`, by a small flusher thread, so the live view never lags more than that).
// Everything written survives the process being killed; only the unwritten tail is lost.
// A failed write keeps the rows buffered and tries again at the next flush.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/events/metric_event.h"

namespace mok {

class RunStore;

struct MetricWriterOptions {
  int max_rows = 8;           // rows buffered before a write; 1 = write every step
  int max_delay_ms = 200;     // oldest unwritten row waits at most about this long
  bool background = true;     // flusher thread enforcing max_delay_ms between appends
};

class MetricWriter {
 public:
  MetricWriter(RunStore& store, int64_t run_id, MetricWriterOptions options = {});
  ~MetricWriter();  // stops the flusher and writes what is left (errors go to last_error())
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  void append(const MetricRow& row);  // may write; throws StoreError when that write fails
  void flush();                       // writes every buffered row now; throws StoreError
  size_t pending() const;
  int64_t run_id() const { return run_id_; }
  std::string last_error() const;     // of the last failed background/destructor write

 private:
  void flush_locked();
  void flusher_loop();

  RunStore& store_;
  const int64_t run_id_;
  const MetricWriterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<MetricRow> rows_;
  std::chrono::steady_clock::time_point last_flush_;
  std::string last_error_;
  bool stopping_ = false;
  std::thread flusher_;
};

}  // namespace mok
