#include "core/store/metric_writer.h"

#include <algorithm>

#include "core/store/run_store.h"

namespace mok {

MetricWriter::MetricWriter(RunStore& store, int64_t run_id, MetricWriterOptions options)
    : store_(store), run_id_(run_id), options_(options), last_flush_(std::chrono::steady_clock::now()) {
  if (options_.max_rows < 1) options_.max_rows = 1;
  if (options_.background) flusher_ = std::thread([this] { flusher_loop(); });
}

MetricWriter::~MetricWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  try {
    flush();
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    last_error_ = e.what();
  }
}

void MetricWriter::append(const MetricRow& row) {
  bool write_now = false;
  {
    std::lock_guard lock(mu_);
    rows_.push_back(row);
    const bool due = static_cast<int>(rows_.size()) >= options_.max_rows ||
                     std::chrono::steady_clock::now() - last_flush_ >= std::chrono::milliseconds(options_.max_delay_ms);
    if (due) {
      if (flusher_.joinable() && rows_.size() < kBackpressureRows) {
        wake_.notify_one();
      } else {
        write_now = true;
      }
    }
  }
  if (write_now) flush();
}

void MetricWriter::flush() {
  std::lock_guard write_lock(write_mu_);
  std::vector<MetricRow> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(rows_);
    last_flush_ = std::chrono::steady_clock::now();
  }
  if (batch.empty()) return;
  try {
    store_.append_metrics(run_id_, batch);
  } catch (...) {
    // Keep the rows, in order, ahead of anything appended meanwhile.
    std::lock_guard lock(mu_);
    rows_.insert(rows_.begin(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    throw;
  }
}

void MetricWriter::flush_with_checkpoint(int64_t step, const std::string& path) {
  std::lock_guard write_lock(write_mu_);
  std::vector<MetricRow> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(rows_);
    last_flush_ = std::chrono::steady_clock::now();
  }
  try {
    store_.record_checkpoint(run_id_, batch, step, path);
  } catch (...) {
    std::lock_guard lock(mu_);
    rows_.insert(rows_.begin(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    throw;
  }
}

size_t MetricWriter::pending() const {
  std::lock_guard lock(mu_);
  return rows_.size();
}

std::string MetricWriter::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void MetricWriter::flusher_loop() {
  const auto delay = std::chrono::milliseconds(std::max(1, options_.max_delay_ms));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, delay, [&] { return stopping_ || static_cast<int>(rows_.size()) >= options_.max_rows; });
    if (stopping_) break;
    const bool due = static_cast<int>(rows_.size()) >= options_.max_rows ||
                     (!rows_.empty() && std::chrono::steady_clock::now() - last_flush_ >= delay);
    if (!due) continue;
    lock.unlock();
    bool failed = false;
    std::string error;
    try {
      flush();
    } catch (const std::exception& e) {
      failed = true;
      error = e.what();
    }
    lock.lock();
    last_error_ = error;
    if (failed) wake_.wait_for(lock, delay, [&] { return stopping_; });  // back off, then retry
  }
}

}  // namespace mok
