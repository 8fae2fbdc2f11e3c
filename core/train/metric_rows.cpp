#include "core/train/metric_rows.h"


namespace mok {

MetricRow train_metric_row(int64_t step, int64_t tokens, int64_t tokens_per_step, const TrainStepResult& r,
                           const RankContext& rc, const RankMemory& mem,
                           const std::vector<std::pair<std::string, double>>& kitten_metrics) {
  MetricRow row;
  row.step = step;
  row.tokens = tokens;
  auto& v = row.values;
  v.push_back({"train/loss", r.loss});
  v.push_back({"train/aux_loss", r.aux});
  v.push_back({"train/z_loss", r.z});
  v.push_back({"train/locality_loss", r.locality});
  v.push_back({"train/lr", r.lr});
  v.push_back({"train/grad_norm", r.grad_norm});
  v.push_back({"perf/tokens_per_s", r.step_s > 0 ? tokens_per_step / r.step_s : 0.0});
  v.push_back({"perf/step_ms", r.step_s * 1e3});
  if (rc.parallel()) {
    // Traffic: bytes sent to other ranks during the step, summed over ranks. Times: per
    // rank, averaged over ranks (comm = inside collectives, waiting for peers included;
    // comm_overlapped = device time of transfers on a transfer stream, beside compute).
    const StepFigures& f = r.ranks;
    const double R = rc.ranks;
    v.push_back({"comm/remote_bytes", f.remote_bytes});
    v.push_back({"comm/dispatch_bytes", f.dispatch_bytes});
    v.push_back({"comm/combine_bytes", f.combine_bytes});
    v.push_back({"comm/grad_bytes", f.grad_bytes});
    v.push_back({"comm/weight_bytes", f.weight_bytes});
    v.push_back({"comm/control_bytes", f.control_bytes});
    v.push_back({"comm/local_tokens", f.local_pairs});
    v.push_back({"perf/comm_ms", f.comm_s / R * 1e3});
    v.push_back({"perf/comm_overlapped_ms", f.overlapped_s / R * 1e3});
    v.push_back({"perf/compute_ms", (f.step_s - f.comm_s) / R * 1e3});
    if (rc.comm->link().enabled()) v.push_back({"comm/modeled_ms", f.modeled_s / R * 1e3});
  }
  // R > 1: the peaks are the largest over ranks, the live and saved bytes mem/rank's
  // (core/train/rank_memory.h).
  const MemoryPeaks& peaks = mem.peaks;
  for (int c = 0; c < static_cast<int>(MemCategory::count); ++c) {
    const auto cat = static_cast<MemCategory>(c);
    if (cat == MemCategory::kv_cache) continue;  // a training step holds none
    v.push_back({std::string("mem/") + mem_category_name(cat) + "_bytes", static_cast<double>(mem.live[c])});
  }
  v.push_back({"mem/peak_bytes", static_cast<double>(peaks.total)});
  v.push_back({"mem/reserved_bytes", static_cast<double>(mem.reserved)});
  v.push_back({"mem/peak_reserved_bytes", static_cast<double>(peaks.reserved)});
  v.push_back({"mem/peak_block_bytes", static_cast<double>(peaks.blocks)});
  v.push_back({"mem/peak_saved_activation_bytes", static_cast<double>(peaks.saved)});
  for (const auto& [key, bytes] : peaks.saved_by_kind) {
    const std::string layer = key.first >= 0 ? "layer" + std::to_string(key.first) : std::string("model");
    v.push_back({"mem/saved/" + layer + "/" + key.second, static_cast<double>(bytes)});
  }
  if (rc.parallel()) v.push_back({"mem/rank", static_cast<double>(mem.rank)});
  if (!r.expert_load.empty()) {
    v.push_back({"moe/dropped_tokens", static_cast<double>(r.dropped)});
    for (size_t l = 0; l < r.expert_load.size(); ++l) {
      const int layer = l < r.moe_layer_ids.size() ? r.moe_layer_ids[l] : static_cast<int>(l);
      for (size_t e = 0; e < r.expert_load[l].size(); ++e) {
        v.push_back({"moe/load/layer" + std::to_string(layer) + "/expert" + std::to_string(e),
                     static_cast<double>(r.expert_load[l][e])});
      }
    }
  }
  // Kitten policy of the step just taken: kittens/rank/layer<L>, kittens/error/layer<L>
  // (empty with kittens.mode: exact; rank 0's figures when R > 1).
  for (const auto& [name, value] : kitten_metrics) v.push_back({name, value});
  return row;
}

void add_validation_metrics(MetricRow& row, const ValidationResult& v) {
  row.values.push_back({"val/loss", v.loss});
  row.values.push_back({"val/bpb", v.bpb});
  row.values.push_back({"val/ppl", v.ppl});
}

}  // namespace mok
