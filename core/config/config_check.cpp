#include "core/config/config_check.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "core/config/config_schema.h"
#include "core/config/tensor_kinds.h"
#include "core/parallel/expert_placement.h"
#include "core/util/byte_size.h"

namespace mok {
namespace {

std::string num_text(const ConfigKeySpec& s, double v) {
  if (s.type == ConfigType::Real) return format_config_value(v);
  return std::to_string(static_cast<int64_t>(v));
}

// The schema's own constraints on one value; "" when it passes.
std::string check_value(const ConfigKeySpec& s, const ConfigValue& v) {
  if (!s.choices.empty()) {
    std::string text = std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : format_config_value(v);
    for (const std::string& c : s.choices)
      if (c == text) return "";
    std::string list;
    for (const std::string& c : s.choices) list += (list.empty() ? "" : ", ") + c;
    return "must be one of " + list + "; got '" + text + "'";
  }
  if (s.non_empty && std::holds_alternative<std::string>(v) && std::get<std::string>(v).empty())
    return "must not be empty";
  double x = 0;
  if (auto* i = std::get_if<int64_t>(&v)) x = static_cast<double>(*i);
  else if (auto* u = std::get_if<uint64_t>(&v)) x = static_cast<double>(*u);
  else if (auto* d = std::get_if<double>(&v)) x = *d;
  else return "";
  const bool low = s.min && (s.min_exclusive ? !(x > *s.min) : !(x >= *s.min));
  const bool high = s.max && (s.max_exclusive ? !(x < *s.max) : !(x <= *s.max));
  if (low || high) {
    if (s.min && s.max)
      return "must be in " + config_allowed_text(s) + ", got " + format_config_value(v);
    if (s.min) return "must be " + std::string(s.min_exclusive ? "> " : "≥ ") + num_text(s, *s.min) + ", got " +
                      format_config_value(v);
    return "must be " + std::string(s.max_exclusive ? "< " : "≤ ") + num_text(s, *s.max) + ", got " +
           format_config_value(v);
  }
  return "";
}

std::string str(int v) { return std::to_string(v); }

}  // namespace

std::vector<int> parse_gpu_list(const std::string& spec) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    size_t b = at, e = comma;
    while (b < e && spec[b] == ' ') ++b;
    while (e > b && spec[e - 1] == ' ') --e;
    int v = -1;
    const auto [ptr, ec] = std::from_chars(spec.data() + b, spec.data() + e, v);
    if (b == e || ec != std::errc() || ptr != spec.data() + e || v < 0) return {};
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

std::vector<bool> parse_moe_layers(const std::string& spec, int layers) {
  std::vector<bool> moe(layers > 0 ? layers : 0, false);
  if (spec == "all") {
    moe.assign(moe.size(), true);
    return moe;
  }
  if (spec == "none") return moe;
  auto parse_int = [](std::string_view t, int& out) {
    auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    return !t.empty() && r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  if (spec.rfind("every_", 0) == 0) {
    int n = 0;
    if (!parse_int(std::string_view(spec).substr(6), n) || n < 1)
      throw std::invalid_argument("every_N needs a whole N ≥ 1, got '" + spec + "'");
    for (int i = 0; i < layers; ++i) moe[i] = (i % n) == n - 1;
    return moe;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int layer = 0;
    if (!parse_int(item, layer) || layer < 0)
      throw std::invalid_argument("expected all, none, every_N or a comma list of layer indices; got '" + spec +
                                  "'");
    if (layer >= layers)
      throw std::invalid_argument("layer " + str(layer) + " is out of range: model.layers is " + str(layers));
    if (moe[layer]) throw std::invalid_argument("layer " + str(layer) + " is listed twice");
    moe[layer] = true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return moe;
}

std::vector<ConfigIssue> check_experiment_config(const ExperimentConfig& c) {
  std::vector<ConfigIssue> issues;
  auto issue = [&](std::string key, std::string msg) { issues.push_back({std::move(key), std::move(msg)}); };

  // 1. Each key on its own: ranges and choices from the schema.
  for (const ConfigKeySpec& s : experiment_config_schema()) {
    if (s.in_map()) {
      const ConfigMapSpec* m = find_config_map(s.map);
      for (const std::string& entry : m->entries(c)) {
        if (auto v = s.get(c, entry)) {
          std::string msg = check_value(s, *v);
          if (!msg.empty()) issue(s.path_for(entry), msg);
        }
      }
    } else if (auto v = s.get(c, "")) {
      std::string msg = check_value(s, *v);
      if (!msg.empty()) issue(s.path, msg);
    }
  }

  // The name names the run's checkpoint folder and fills a column of `mok runs list`.
  if (c.name.size() > kMaxRunNameBytes) {
    issue("name", "is " + std::to_string(c.name.size()) + " bytes long; at most " + std::to_string(kMaxRunNameBytes) +
                      " (it names the run's checkpoint folder)");
  } else if (std::any_of(c.name.begin(), c.name.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; })) {
    issue("name", "must not contain control characters such as tabs or line breaks");
  }

  // 2. Rules that tie keys together. Those that build something as large as a key's value
  // (a flag per layer, an owner per expert) run only on keys within their range: an
  // out-of-range count such as model.experts 2147483647 is reported, not allocated.
  auto in_range = [&](const char* key) {
    return std::none_of(issues.begin(), issues.end(), [&](const ConfigIssue& i) { return i.key_path == key; });
  };
  const ModelConfig& m = c.model;
  if (m.heads > 0 && m.d_model % m.heads != 0) {
    issue("model.heads", "model.heads (" + str(m.heads) + ") must divide model.d_model (" + str(m.d_model) + ")");
  } else if (m.heads > 0 && (m.d_model / m.heads) % 2 != 0) {
    issue("model.heads", "head width d_model/heads = " + str(m.d_model / m.heads) +
                             " must be even for the rotary embedding");
  }
  if (m.experts > 0 && m.top_k > m.experts)
    issue("model.top_k", "model.top_k (" + str(m.top_k) + ") exceeds model.experts (" + str(m.experts) + ")");
  if (in_range("model.layers")) {
    try {
      parse_moe_layers(m.moe_layers, m.layers);
    } catch (const std::invalid_argument& e) {
      issue("model.moe_layers", e.what());
    }
  }

  const TrainConfig& t = c.train;
  const ParallelConfig& p = c.parallel;
  if (t.grad_accum > 0 && p.ranks > 0 && t.batch % (int64_t{t.grad_accum} * p.ranks) != 0) {
    issue("train.batch", "train.batch (" + str(t.batch) + ") must be a multiple of train.grad_accum (" +
                             str(t.grad_accum) + ") × parallel.ranks (" + str(p.ranks) + ")");
  }
  if (m.experts > 0 && p.ranks > 0 && m.experts % p.ranks != 0) {
    issue("parallel.ranks", "model.experts (" + str(m.experts) + ") must be a multiple of parallel.ranks (" +
                                str(p.ranks) + ")");
  }
  if (m.experts > 0 && p.ranks > 0 && m.experts >= p.ranks && in_range("model.experts") && in_range("parallel.ranks")) {
    try {
      ExpertPlacement::parse(p.expert_placement, m.experts, p.ranks);
    } catch (const std::invalid_argument& e) {
      issue("parallel.expert_placement", e.what());
    }
  }
  if ((p.comm == "nccl" || p.comm == "peer") && p.device != "cuda")
    issue("parallel.comm", p.comm + " moves data between GPUs and needs parallel.device cuda (device is " + p.device +
                               "); CPU ranks exchange over local or mpi");
  if (t.precision == "bf16" && p.device != "cuda")
    issue("train.precision", "bf16 runs on a GPU only (parallel.device: cuda); the CPU computes in fp32");
  if (!p.device_memory_limit.empty()) {
    const std::optional<int64_t> limit = parse_byte_size(p.device_memory_limit);
    if (!limit || *limit <= 0)
      issue("parallel.device_memory_limit", "'" + p.device_memory_limit +
                                                "' is not a size above zero (e.g. `16GiB`, `512MiB`, `24GB`); "
                                                "leave it empty for no limit");
  }
  if (!p.gpus.empty()) {  // (ignored on the CPU, so a config can switch devices freely)
    if (const std::vector<int> ids = parse_gpu_list(p.gpus); ids.empty()) {
      issue("parallel.gpus", "'" + p.gpus + "' is not a comma list of GPU indices (e.g. `0,1`)");
    } else if (static_cast<int>(ids.size()) != p.ranks) {
      issue("parallel.gpus", "names " + str(static_cast<int>(ids.size())) + " GPU(s) ('" + p.gpus +
                                 "') for parallel.ranks " + str(p.ranks) +
                                 ": name one GPU per rank, or leave it empty for rank r on cuda:r");
    } else if (p.device == "cuda" && p.comm != "peer") {
      // NCCL takes one rank per GPU: two ranks on one GPU cannot form a communicator (peer
      // copies can: the ranks then share the GPU's time and memory).
      std::vector<int> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
        issue("parallel.gpus", "names GPU " + str(*twice) + " twice ('" + p.gpus +
                                   "'): over NCCL each rank needs a GPU of its own; parallel.comm: peer lets "
                                   "ranks share one");
    }
  }

  const KittensConfig& k = c.kittens;
  // Compact copies are made in kitten and custom mode (by default or in some layer).
  bool kitten_used = k.mode != "exact";
  for (const auto& [layer, o] : k.layers) kitten_used = kitten_used || o.mode == "kitten" || o.mode == "custom";
  if (c.train.activation_checkpointing && kitten_used)
    issue("train.activation_checkpointing",
          "activation checkpointing keeps only each block's input, so there is nothing for kittens to "
          "keep: set kittens.mode: exact (and no kitten layers), or turn checkpointing off");
  if (k.min_rank > k.max_rank) {
    issue("kittens.min_rank", "kittens.min_rank (" + str(k.min_rank) + ") exceeds kittens.max_rank (" +
                                  str(k.max_rank) + ")");
  }
  auto check_rank = [&](const std::string& key, int rank) {
    if (rank < k.min_rank || rank > k.max_rank) {
      issue(key, "rank " + str(rank) + " is outside [kittens.min_rank, kittens.max_rank] = [" + str(k.min_rank) +
                     ", " + str(k.max_rank) + "]");
    } else if (kitten_used && rank > m.d_model) {
      issue(key, "rank " + str(rank) + " exceeds model.d_model (" + str(m.d_model) + ")");
    }
  };
  check_rank("kittens.rank", k.rank);
  for (const auto& [layer, o] : k.layers) {
    const std::string at = "kittens.layers." + str(layer);
    if (layer < 0 || layer >= m.layers) {
      issue(at, "layer index " + str(layer) + " is out of range: model.layers is " + str(m.layers));
      continue;
    }
    if (o.rank != -1) check_rank(at + ".rank", o.rank);
  }
  for (const auto& [kind, o] : k.kinds) {
    const std::string at = "kittens.kinds." + config_entry_text(kind);
    if (!is_kitten_tensor_kind_prefix(kind)) {
      const std::string hint = suggest_kitten_tensor_kind(kind);
      issue(at, "unknown tensor kind '" + kind + "'" +
                    (hint.empty() ? std::string("; kinds are prefixes of the model's saved tensors, e.g. moe.expert, "
                                                "attn.qkv.input, attn_norm.input")
                                  : "; did you mean '" + hint + "'?"));
      continue;
    }
    if (o.rank != -1) check_rank(at + ".rank", o.rank);
  }
  return issues;
}

}  // namespace mok
