#include "widgets/dashboard/live_dashboard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "widgets/plot/expert_load_heat_map.h"
#include "widgets/plot/layer_bar_plot.h"
#include "widgets/plot/plot_control_bar.h"
#include "widgets/plot/plot_group.h"
#include "widgets/plot/stacked_memory_plot.h"
#include "widgets/plot/streaming_plot.h"

namespace mok::gui {

namespace {

const QStringList kMemCategories = {"parameters", "gradients", "optimizer_state",
                                    "saved_activations", "workspace", "communication"};
constexpr int kSavedActivations = 3;  // index in kMemCategories

// "moe/load/layer3/expert5" → (3, 5); false when the name has another shape.
bool parse_layer_expert(const std::string& name, int* layer, int* expert) {
  return std::sscanf(name.c_str(), "moe/load/layer%d/expert%d", layer, expert) == 2;
}

// "<prefix><L>" or "<prefix><L>/<anything>" → L.
bool parse_layer(const std::string& name, const char* prefix, int* layer) {
  const size_t n = std::strlen(prefix);
  if (name.compare(0, n, prefix) != 0) return false;
  return std::sscanf(name.c_str() + n, "%d", layer) == 1;
}

int curve_for(StreamingPlot* plot, const QString& name, CurveAxis axis = CurveAxis::left) {
  int c = plot->find_curve(name);
  return c >= 0 ? c : plot->add_curve(name, QColor(), axis);
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

LiveDashboard::LiveDashboard(QWidget* parent) : QWidget(parent) {
  group_ = new PlotGroup(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* top = new QHBoxLayout;
  title_ = new QLabel(tr("No run selected"));
  title_->setStyleSheet("font-weight: bold;");
  top->addWidget(title_);
  device_ = new QLabel;
  device_->setToolTip(tr("Device and precision of the run"));
  device_->setStyleSheet("color: #455a64; padding-left: 8px;");
  top->addWidget(device_);
  top->addStretch(1);
  top->addWidget(new PlotControlBar(group_));
  layout->addLayout(top);

  auto make = [this](const QString& title, const QString& y) {
    auto* p = new StreamingPlot;
    p->set_title(title);
    p->set_y_label(y);
    p->set_legend_visible(true);
    return p;
  };
  loss_ = make(tr("Loss"), tr("nats/token"));
  loss_->add_curve("train/loss");
  loss_->add_curve("val/loss");
  // bpb (≈4) and perplexity (≈90), lr (≈1e-3) and gradient norm (≈1): one axis each.
  validation_ = make(tr("Validation"), tr("bits per byte"));
  validation_->add_curve("val/bpb");
  validation_->add_curve("val/ppl", QColor(), CurveAxis::right);
  validation_->set_right_y_label(tr("perplexity"));
  throughput_ = make(tr("Throughput"), tr("tokens/s"));
  throughput_->add_curve("perf/tokens_per_s");
  optimizer_ = make(tr("Optimizer"), tr("learning rate"));
  optimizer_->add_curve("train/lr");
  optimizer_->add_curve("train/grad_norm", QColor(), CurveAxis::right);
  optimizer_->set_right_y_label(tr("gradient norm"));
  // Bytes sent to other ranks in the step, summed over ranks, by purpose (MiB, left axis);
  // on the right axis (ms, mean over ranks) the time a rank waits in communication, waiting
  // for peers included (exposed), and the device time of transfers that ran beside compute
  // on a transfer stream (overlapped).
  comm_ = make(tr("Between ranks"), tr("MiB per step (all ranks)"));
  for (const QString& n : comm_byte_curves()) comm_->add_curve(n);
  comm_->add_curve("perf/comm_ms", QColor(), CurveAxis::right, tr("waited ms"));
  comm_->add_curve("perf/comm_overlapped_ms", QColor(), CurveAxis::right, tr("overlapped ms"));
  comm_->set_right_y_label(tr("ms per step: waited, overlapped"));
  validation_->set_empty_note(tr("no evaluation yet:\none comes every train.eval_every\nsteps and after the last"));
  show_comm_device(QString());
  memory_ = new StackedMemoryPlot;
  show_memory_rank(-1);
  memory_->set_categories(kMemCategories);
  layers_ = new LayerBarPlot;
  layers_->set_title(tr("Saved activations and rank per layer"));
  layers_->set_labels(tr("saved MiB (peak)"), tr("kitten rank"));
  layers_->set_all_zero_note(tr("kitten rank 0 in every layer: no input kept at low rank"));
  heat_ = new ExpertLoadHeatMap;
  heat_->set_title(tr("Expert load over training"));

  auto* grid = new QGridLayout;
  grid->setSpacing(2);
  grid->addWidget(loss_, 0, 0);
  grid->addWidget(validation_, 0, 1);
  grid->addWidget(throughput_, 0, 2);
  grid->addWidget(memory_, 1, 0);
  grid->addWidget(layers_, 1, 1);
  grid->addWidget(comm_, 1, 2);
  auto* heat_box = new QWidget;
  auto* heat_layout = new QVBoxLayout(heat_box);
  heat_layout->setContentsMargins(0, 0, 0, 0);
  auto* heat_top = new QHBoxLayout;
  heat_top->addWidget(new QLabel(tr("Layer")));
  heat_layer_ = new QComboBox;
  heat_top->addWidget(heat_layer_);
  heat_top->addStretch(1);
  heat_layout->addLayout(heat_top);
  heat_layout->addWidget(heat_, 1);
  grid->addWidget(heat_box, 2, 0, 1, 2);
  grid->addWidget(optimizer_, 2, 2);
  for (int r = 0; r < 3; ++r) grid->setRowStretch(r, 1);
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);
  layout->addLayout(grid, 1);

  for (CoalescedPlot* p : plots())
    if (p != layers_) group_->add(p);
  connect(heat_layer_, &QComboBox::currentIndexChanged, this, &LiveDashboard::on_heat_layer_changed);
}

QStringList LiveDashboard::comm_byte_curves() {
  return {"comm/remote_bytes", "comm/dispatch_bytes", "comm/combine_bytes", "comm/grad_bytes",
          "comm/weight_bytes", "comm/control_bytes"};
}

void LiveDashboard::show_comm_device(const QString& device) {
  // On a GPU run the ranks are GPUs, and what crosses between them goes over NVLink (or PCIe).
  const bool gpu = device.startsWith("cuda");
  comm_->set_title(gpu ? tr("Between GPUs") : tr("Between ranks"));
  comm_->set_empty_note(gpu ? tr("nothing recorded:\na run on one GPU sends\nno bytes between GPUs")
                            : tr("nothing recorded:\na run on one rank sends\nno bytes between ranks"));
}

void LiveDashboard::show_memory_rank(int rank) {
  // Over ranks the categories are one rank's: the one whose peak was the largest.
  memory_->set_title(rank < 0 ? tr("Memory by category")
                              : tr("Memory by category, rank %1 (the largest peak)").arg(rank));
}

QList<CoalescedPlot*> LiveDashboard::plots() const {
  return {loss_, validation_, throughput_, memory_, layers_, comm_, heat_, optimizer_};
}

void LiveDashboard::set_title(const QString& text) { title_->setText(text); }

void LiveDashboard::set_device(const QString& device, const QString& precision) {
  device_->setText(device.isEmpty() ? QString() : precision.isEmpty() ? device : device + " · " + precision);
  memory_->set_device(device);
  show_comm_device(device);
}

QString LiveDashboard::device_text() const { return device_->text(); }

QString LiveDashboard::title() const { return title_->text(); }

void LiveDashboard::set_planned_bytes(double bytes) { memory_->set_planned_mib(bytes / (1024.0 * 1024.0)); }

void LiveDashboard::clear() {
  for (StreamingPlot* p : {loss_, validation_, throughput_, optimizer_, comm_}) p->clear_data();
  memory_->clear_data();
  memory_->set_planned_mib(NAN);
  show_memory_rank(-1);
  heat_->clear_data();
  loads_.clear();
  saved_bytes_by_layer_.clear();
  rank_by_layer_.clear();
  layers_->set_values({}, {});
  heat_layer_->blockSignals(true);
  heat_layer_->clear();
  heat_layer_->blockSignals(false);
  rows_seen_ = 0;
  last_step_ = -1;
  group_->reset_view();
}

void LiveDashboard::add_rows(const std::vector<MetricRow>& rows) {
  bool layer_bars_dirty = false;
  for (const MetricRow& row : rows) {
    ++rows_seen_;
    last_step_ = std::max(last_step_, row.step);
    std::vector<double> mem(size_t(kMemCategories.size()), 0.0);
    bool have_mem = false;
    // Saved activations are freed by the end of a step, so their live figure there is 0; the
    // row's peak within the step is what decides whether the run fits.
    double saved_peak = NAN, total_peak = NAN;
    std::map<int, std::map<int, double>> load;  // layer → expert → share
    std::map<int, double> saved;
    int mem_rank = -1;  // R > 1: whose live bytes the row gives (mem/rank)
    for (const MetricValue& v : row.values) {
      const MetricPoint p{row.step, row.tokens, row.wall_s, v.value};
      const QString name = QString::fromStdString(v.name);
      int layer = 0, expert = 0;
      if (name == "train/loss" || name == "val/loss") loss_->append(loss_->find_curve(name), p);
      else if (name == "val/bpb" || name == "val/ppl") validation_->append(validation_->find_curve(name), p);
      else if (name == "perf/tokens_per_s") throughput_->append(0, p);
      else if (name == "train/lr" || name == "train/grad_norm") optimizer_->append(optimizer_->find_curve(name), p);
      else if (name.startsWith("comm/") && name.endsWith("_bytes") && name != "comm/bytes_saved")
        comm_->append(curve_for(comm_, name), MetricPoint{row.step, row.tokens, row.wall_s, v.value / kMiB});
      else if (name == "perf/comm_ms" || name == "perf/comm_overlapped_ms" ||
               (name.startsWith("comm/") && name.endsWith("_ms")))
        comm_->append(curve_for(comm_, name, CurveAxis::right), p);
      else if (parse_layer(v.name, "mem/saved/layer", &layer)) saved[layer] += v.value;
      else if (name == "mem/peak_saved_activation_bytes") saved_peak = v.value;
      else if (name == "mem/peak_bytes") total_peak = v.value;
      else if (name == "mem/rank") mem_rank = static_cast<int>(v.value);
      else if (name.startsWith("mem/") && name.endsWith("_bytes") && !name.startsWith("mem/peak")) {
        const int c = kMemCategories.indexOf(name.mid(4, name.size() - 10));  // "mem/" + category + "_bytes"
        if (c >= 0) mem[size_t(c)] = v.value, have_mem = true;
      } else if (parse_layer_expert(v.name, &layer, &expert)) load[layer][expert] = v.value;
      else if (parse_layer(v.name, "kittens/rank/layer", &layer)) rank_by_layer_[layer] = v.value, layer_bars_dirty = true;
    }
    if (have_mem) {
      if (std::isfinite(saved_peak)) mem[size_t(kSavedActivations)] = std::max(mem[size_t(kSavedActivations)], saved_peak);
      memory_->append(MetricPoint{row.step, row.tokens, row.wall_s, 0}, mem, total_peak);
      show_memory_rank(mem_rank);
    }
    if (!saved.empty()) saved_bytes_by_layer_ = saved, layer_bars_dirty = true;
    for (auto& [layer, experts] : load) {
      std::vector<double> shares(size_t(experts.rbegin()->first + 1), 0.0);
      for (auto& [e, s] : experts) shares[size_t(e)] = s;
      const bool new_layer = !loads_.count(layer);
      loads_[layer].push_back(LoadRow{row.step, row.tokens, row.wall_s, shares});
      if (new_layer) {
        heat_layer_->addItem(QString::number(layer), layer);
        if (heat_layer_->count() == 1) on_heat_layer_changed();
        continue;
      }
      if (heat_layer_->currentData().toInt() == layer) {
        if (int(shares.size()) != heat_->expert_count()) on_heat_layer_changed();
        else heat_->append(MetricPoint{row.step, row.tokens, row.wall_s, 0}, shares);
      }
    }
  }
  if (layer_bars_dirty) update_layer_bars();
}

void LiveDashboard::update_layer_bars() {
  int layers = 0;
  if (!saved_bytes_by_layer_.empty()) layers = std::max(layers, saved_bytes_by_layer_.rbegin()->first + 1);
  if (!rank_by_layer_.empty()) layers = std::max(layers, rank_by_layer_.rbegin()->first + 1);
  std::vector<double> bars(size_t(std::max(layers, 0)), 0.0), marks;
  for (auto& [l, b] : saved_bytes_by_layer_)
    if (l >= 0) bars[size_t(l)] = b / (1024.0 * 1024.0);
  if (!rank_by_layer_.empty()) {
    marks.assign(bars.size(), 0.0);
    for (auto& [l, r] : rank_by_layer_)
      if (l >= 0) marks[size_t(l)] = r;
  }
  layers_->set_values(bars, marks);
}

void LiveDashboard::on_heat_layer_changed() {
  const int layer = heat_layer_->currentData().toInt();
  auto it = loads_.find(layer);
  if (it == loads_.end()) return;
  size_t experts = 0;
  for (const LoadRow& r : it->second) experts = std::max(experts, r.load.size());
  heat_->set_expert_count(int(experts));
  for (const LoadRow& r : it->second) heat_->append(MetricPoint{r.step, r.tokens, r.wall_s, 0}, r.load);
}

}  // namespace mok::gui
