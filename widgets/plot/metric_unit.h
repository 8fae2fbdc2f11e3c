#pragma once
// MetricUnit: how a metric is put on a y axis: the unit it is read in and the factor from
// the stored value (bytes are shown in MiB, as the tables show them).

#include <QString>

namespace mok::gui {

struct MetricUnit {
  QString unit;          // "MiB", "bits per byte", "nats/token"...; empty: a plain number
  double divisor = 1.0;  // shown value = stored value / divisor
  // "val/bpb (bits per byte)", "mem/peak_bytes (MiB)", "train/aux_loss".
  QString axis_label(const QString& metric) const { return unit.isEmpty() ? metric : metric + " (" + unit + ")"; }
};

MetricUnit metric_unit(const QString& metric);

}  // namespace mok::gui
