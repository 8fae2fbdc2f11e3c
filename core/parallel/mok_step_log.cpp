#include "core/parallel/mok_step_log.h"

#include "core/util/json_writer.h"

MOK_NN_BEGIN

std::vector<std::pair<std::string, double>> MokStepLog::metrics() const {
  const auto v = [](int64_t x) { return static_cast<double>(x); };
  return {
      {"comm/shadowed_experts", static_cast<double>(shadowed.size())},
      {"comm/bytes_saved", v(bytes_saved)},
      {"comm/local_tokens", local_fraction()},
      {"comm/dispatch_bytes", v(dispatch_bytes)},
      {"comm/combine_bytes", v(combine_bytes)},
      {"comm/grad_bytes", v(gradient_bytes)},
      {"comm/remote_bytes", v(payload_bytes() + control_bytes)},
  };
}

std::string MokStepLog::to_json() const {
  JsonWriter j;
  j.begin_object();
  j.key("step").value(step);
  j.key("training").value(training);
  j.key("fixed_layout").value(fixed_layout);
  j.key("pairs").value(pairs);
  j.key("own_pairs").value(own_pairs);
  j.key("shadow_pairs").value(shadow_pairs);
  j.key("shipped_pairs").value(shipped_pairs);
  j.key("shipped_rows").value(shipped_rows);
  j.key("chunks").value(static_cast<int64_t>(chunks));
  j.key("shadowed").begin_array();
  for (int e : shadowed) j.value(e);
  j.end_array();
  j.key("shadowed_rows").begin_array();
  for (double r : shadowed_rows) j.value(r);
  j.end_array();
  j.key("dispatch_bytes").value(dispatch_bytes);
  j.key("combine_bytes").value(combine_bytes);
  j.key("weight_bytes").value(weight_bytes);
  j.key("gradient_bytes").value(gradient_bytes);
  j.key("control_bytes").value(control_bytes);
  j.key("classic_bytes").value(classic_bytes);
  j.key("bytes_saved").value(bytes_saved);
  if (!fixed_layout) j.key("local_fraction").value(local_fraction());  // not counted there
  j.end_object();
  return j.str();
}

std::string MokDecisionLog::to_json_lines() const {
  std::string out;
  for (const MokStepLog& r : records_) {
    out += r.to_json();
    out += '\n';
  }
  return out;
}

MOK_NN_END
