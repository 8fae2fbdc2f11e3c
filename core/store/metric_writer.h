#pragma once
// MetricWriter: buffers metric rows of one run and writes them to the RunStore in batches,
// one transaction per batch. A batch is due when `max_rows` rows wait or `max_delay_ms`
// has passed since the last write. With `background` (the default) a flusher thread does
// the writing, so append() only queues and the training thread never waits on SQLite
// (unless kBackpressureRows pile up because the store is stuck); without it append()
// writes inline when a batch is due. flush() writes everything appended before it.
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
  int max_delay_ms = 200;     // an unwritten row waits at most about this long
  bool background = true;     // a flusher thread writes; append() never touches SQLite
};

class MetricWriter {
 public:
  MetricWriter(RunStore& store, int64_t run_id, MetricWriterOptions options = {});
  ~MetricWriter();  // stops the flusher and writes what is left (errors go to last_error())
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  static constexpr size_t kBackpressureRows = 4096;  // append() writes inline beyond this

  void append(const MetricRow& row);  // when it writes inline: throws StoreError on failure
  void flush();                       // writes every buffered row now; throws StoreError
  // Writes every buffered row and the checkpoint row of `step` in one transaction
  // (RunStore::record_checkpoint). On failure the rows stay buffered; throws StoreError.
  void flush_with_checkpoint(int64_t step, const std::string& path);
  size_t pending() const;
  int64_t run_id() const { return run_id_; }
  std::string last_error() const;     // of the last failed background/destructor write

 private:
  void flusher_loop();

  RunStore& store_;
  const int64_t run_id_;
  MetricWriterOptions options_;
  std::mutex write_mu_;    // one batch in flight at a time (keeps flush() complete)
  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  std::vector<MetricRow> rows_;
  std::chrono::steady_clock::time_point last_flush_;
  std::string last_error_;
  bool stopping_ = false;
  std::thread flusher_;
};

}  // namespace mok
