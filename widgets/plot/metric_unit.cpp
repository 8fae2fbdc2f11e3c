#include "widgets/plot/metric_unit.h"

namespace mok::gui {

MetricUnit metric_unit(const QString& metric) {
  if (metric.endsWith("bytes")) return {QStringLiteral("MiB"), 1024.0 * 1024.0};
  if (metric == "val/bpb") return {QStringLiteral("bits per byte")};
  if (metric == "val/ppl") return {QStringLiteral("perplexity")};
  if (metric.endsWith("/loss")) return {QStringLiteral("nats/token")};
  if (metric == "perf/tokens_per_s") return {QStringLiteral("tokens/s")};
  if (metric.endsWith("_ms")) return {QStringLiteral("ms")};
  if (metric == "train/lr") return {QStringLiteral("learning rate")};
  if (metric == "train/grad_norm") return {QStringLiteral("global norm")};
  return {};
}

}  // namespace mok::gui
