#include "core/train/gathered_model.h"

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "core/backend/exec_context.h"
#include "core/model/language_model.h"
#include "core/train/adamw.h"

namespace mok {

GatheredModel::GatheredModel() = default;
GatheredModel::GatheredModel(GatheredModel&&) noexcept = default;
GatheredModel& GatheredModel::operator=(GatheredModel&&) noexcept = default;
GatheredModel::~GatheredModel() = default;

namespace {

// Wire format of one rank's expert shard: per parameter
//   u64 name length, name bytes, i64 numel, numel floats each of value, m, v.
void put(std::vector<uint8_t>& out, const void* data, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + bytes);
}

// A tensor's bytes from any device.
void put(std::vector<uint8_t>& out, const Tensor& t) {
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(t.bytes()));
  t.copy_to_host(out.data() + at, t.bytes());
}

}  // namespace

GatheredModel gather_model(RankContext& rc, LanguageModel& local_model, const std::vector<Parameter*>& params,
                           const AdamW& adam) {
  GatheredModel g;
  if (!rc.comm) throw std::logic_error("gather_model: needs a communicator");
  // Every non-leader rank packs its experts for rank 0.
  std::vector<uint8_t> send;
  if (!rc.leader()) {
    const auto& ps = adam.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      const Parameter* p = ps[i];
      if (!p->expert) continue;
      const uint64_t len = p->name.size();
      const int64_t numel = p->value.numel();
      put(send, &len, sizeof len);
      put(send, p->name.data(), len);
      put(send, &numel, sizeof numel);
      put(send, p->value);
      put(send, adam.first_moments()[i]);
      put(send, adam.second_moments()[i]);
    }
  }
  std::vector<int64_t> send_bytes(static_cast<size_t>(rc.ranks), 0);
  send_bytes[0] = static_cast<int64_t>(send.size());
  std::vector<uint8_t> recv;
  const std::vector<int64_t> got = rc.comm->all_to_all_bytes(send.data(), send_bytes, recv, CommPurpose::weights);
  if (!rc.leader()) return g;

  // The full copy lives on the host (whatever device the ranks compute on): it is only
  // written to disk.
  ScopedExecContext on_host(cpu_context());
  ModelOptions full = local_model.options();
  full.local_experts.clear();
  g.model = std::make_unique<LanguageModel>(full);
  g.params = g.model->parameters();
  g.adam = std::make_unique<AdamW>(g.params, adam.options());
  g.adam->set_step_count(adam.step_count());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < g.params.size(); ++i) index[g.params[i]->name] = i;
  auto fill = [&](const std::string& name, int64_t numel, const void* value, const void* m, const void* v) {
    auto it = index.find(name);
    if (it == index.end()) throw std::runtime_error("gather_model: unknown parameter '" + name + "'");
    const size_t i = it->second;
    Parameter* p = g.params[i];
    if (p->value.numel() != numel) throw std::runtime_error("gather_model: '" + name + "' has the wrong size");
    const size_t bytes = static_cast<size_t>(p->value.bytes());
    std::memcpy(p->value.data(), value, bytes);
    std::memcpy(g.adam->first_moments()[i].data(), m, bytes);
    std::memcpy(g.adam->second_moments()[i].data(), v, bytes);
  };
  // The leader's own parameters (dense ones and its experts) …
  const auto& own = adam.parameters();
  for (size_t i = 0; i < own.size(); ++i) {
    std::vector<uint8_t> host;
    put(host, own[i]->value);
    put(host, adam.first_moments()[i]);
    put(host, adam.second_moments()[i]);
    const size_t bytes = static_cast<size_t>(own[i]->value.bytes());
    fill(own[i]->name, own[i]->value.numel(), host.data(), host.data() + bytes, host.data() + 2 * bytes);
  }
  // … and every other rank's experts.
  size_t at = 0;
  const size_t end = recv.size();
  auto take = [&](size_t bytes) {
    if (at + bytes > end) throw std::runtime_error("gather_model: truncated expert shard");
    const uint8_t* p = recv.data() + at;
    at += bytes;
    return p;
  };
  (void)got;
  while (at < end) {
    uint64_t len = 0;
    std::memcpy(&len, take(sizeof len), sizeof len);
    const std::string name(reinterpret_cast<const char*>(take(len)), len);
    int64_t numel = 0;
    std::memcpy(&numel, take(sizeof numel), sizeof numel);
    const size_t bytes = static_cast<size_t>(numel) * sizeof(real);
    const uint8_t* value = take(bytes);
    const uint8_t* m = take(bytes);
    const uint8_t* v = take(bytes);
    fill(name, numel, value, m, v);
  }
  return g;
}

}  // namespace mok
