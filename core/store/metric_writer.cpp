#include "core/store/metric_writer.h"

#include "core/store/run_store.h"

namespace mok {

MetricWriter::MetricWriter(RunStore& store, int64_t run_id, MetricWriterOptions options)
    : store_(store), run_id_(run_id), options_(options), last_flush_(std::chrono::steady_clock::now()) {
  if (options_.background && options_.max_delay_ms > 0) flusher_ = std::thread([this] { flusher_loop(); });
}

MetricWriter::~MetricWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::lock_guard lock(mu_);
  try {
    flush_locked();
  } catch (const std::exception& e) {
    last_error_ = e.what();
  }
}

void MetricWriter::append(const MetricRow& row) {
  std::lock_guard lock(mu_);
  rows_.push_back(row);
  const auto waited = std::chrono::steady_clock::now() - last_flush_;
  if (static_cast<int>(rows_.size()) >= options_.max_rows ||
      waited >= std::chrono::milliseconds(options_.max_delay_ms)) {
    flush_locked();
  }
}

void MetricWriter::flush() {
  std::lock_guard lock(mu_);
  flush_locked();
}

void MetricWriter::flush_locked() {
  last_flush_ = std::chrono::steady_clock::now();
  if (rows_.empty()) return;
  store_.append_metrics(run_id_, rows_);  // throws → rows stay buffered for the next try
  rows_.clear();
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
  const auto delay = std::chrono::milliseconds(options_.max_delay_ms);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, delay);
    if (stopping_) break;
    if (!rows_.empty() && std::chrono::steady_clock::now() - last_flush_ >= delay) {
      try {
        flush_locked();
        last_error_.clear();
      } catch (const std::exception& e) {
        last_error_ = e.what();
      }
    }
  }
}

}  // namespace mok
