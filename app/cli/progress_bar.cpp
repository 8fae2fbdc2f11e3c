#include "app/cli/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace mok::cli {

namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const long long t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

std::string format_rate(double r) {
  char buf[32];
  if (r >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  else if (r >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", r);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

bool ProgressBar::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

int ProgressBar::terminal_width() const {
  struct winsize ws {};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 100;
}

void ProgressBar::on_run_started(const RunStarted& run) {
  total_ = run.total_steps;
  start_step_ = step_ = run.start_step;
  next_plain_step_ = start_step_ + 1;
}

void ProgressBar::on_metrics(const MetricRow& row) {
  step_ = row.step;
  wall_s_ = row.wall_s;
  for (const MetricValue& v : row.values) {
    if (v.name == "train/loss") loss_ = v.value;
    else if (v.name == "val/bpb") val_bpb_ = v.value;
    else if (v.name == "perf/tokens_per_s") tokens_per_s_ = v.value;
  }
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    if (!drawn_ || now - last_draw_ >= kRedrawInterval || step_ >= total_) {
      last_draw_ = now;
      draw(false);
    }
  } else if (step_ >= next_plain_step_ || step_ >= total_) {
    draw(false);
    const int64_t stride = std::max<int64_t>(1, (total_ + 19) / 20);  // ~5%
    next_plain_step_ = (step_ / stride + 1) * stride;
  }
}

void ProgressBar::on_event(const std::string& text) {
  if (terminal_ && drawn_) {
    std::fputs("\r\033[K", out_);
    drawn_ = false;
  }
  std::fprintf(out_, "%s\n", text.c_str());
  if (terminal_) draw(false);
  std::fflush(out_);
}

void ProgressBar::on_run_finished(RunStatus status, const std::string& message) {
  if (terminal_) {
    draw(true);
  } else if (printed_step_ != step_) {
    draw(true);
  }
  std::fprintf(out_, "%s%s%s\n", run_status_name(status), message.empty() ? "" : ": ",
               message.c_str());
  std::fflush(out_);
}

std::string ProgressBar::render(int width) const {
  char head[64];
  const int digits = static_cast<int>(std::to_string(total_).size());
  std::snprintf(head, sizeof head, "step %*lld/%lld", digits, static_cast<long long>(step_),
                static_cast<long long>(total_));
  std::string tail;
  char buf[64];
  if (loss_ >= 0) {
    std::snprintf(buf, sizeof buf, " loss %.3f", loss_);
    tail += buf;
  }
  if (val_bpb_ >= 0) {
    std::snprintf(buf, sizeof buf, " val %.3f bpb", val_bpb_);
    tail += buf;
  }
  if (tokens_per_s_ > 0) tail += " " + format_rate(tokens_per_s_) + " tok/s";
  const int64_t done = step_ - start_step_;
  const int64_t left = total_ - step_;
  if (done > 0 && left > 0) {
    tail += " ETA " + format_duration(wall_s_ / static_cast<double>(done) * static_cast<double>(left));
  } else if (left <= 0) {
    tail += " " + format_duration(wall_s_);
  }
  const int bar_width =
      std::min(40, width - static_cast<int>(std::string(head).size() + tail.size()) - 3);
  std::string line = head;
  if (bar_width >= 5) {
    const double frac = total_ > 0 ? std::clamp(double(step_) / double(total_), 0.0, 1.0) : 0.0;
    const int filled = static_cast<int>(frac * bar_width);
    line += " [" + std::string(filled, '#') + std::string(bar_width - filled, '.') + "]";
  }
  line += tail;
  if (static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

void ProgressBar::draw(bool final_line) {
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", render(terminal_width() - 1).c_str());
    drawn_ = !final_line;
    if (final_line) std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "%s\n", render(120).c_str());
  }
  printed_step_ = step_;
  std::fflush(out_);
}

}  // namespace mok::cli
