#pragma once
// RunRecord: one row of the runs browser, as the GUI shows it (filled from the run store's
// summaries and updated live by the run manager).

#include <cmath>
#include <cstdint>

#include <QDateTime>
#include <QString>
#include <QStringList>

namespace mok::gui {

struct RunRecord {
  int64_t id = 0;
  QString name;
  QString status;             // run_status_name(): queued, running, finished, ...
  QString model;              // e.g. "4L d128 8e top2"
  QString policy;             // e.g. "mok/locality"
  int64_t steps = 0;
  int64_t tokens = 0;
  double best_val_bpb = NAN;
  double best_val_ppl = NAN;
  double tokens_per_s = NAN;
  double peak_bytes = NAN;
  QStringList tags;
  QString notes;
  bool archived = false;
  QDateTime created;
};

// "12.3 MiB", "1.02 GiB": bytes for a human.
QString format_bytes(double bytes);
// "1.2M", "350k": counts for a human.
QString format_count(double n);

}  // namespace mok::gui
