#pragma once
// Small helpers between the run store and the GUI's view records.

#include <map>
#include <string>
#include <vector>

#include <QString>

#include "core/events/metric_event.h"
#include "core/store/run_records.h"
#include "widgets/models/run_record.h"

namespace mok::gui {

// A store summary as a runs-browser row.
RunRecord run_record_from_summary(const mok::RunSummary& s);
// "4L d128 8e top2" and "mok/locality" (with "+kitten" when kittens are on).
QString model_text(const mok::RunShape& shape);
QString policy_text(const mok::RunShape& shape);
// Every stored metric of a run as rows ordered by step (what a dashboard replays).
std::vector<MetricRow> load_metric_rows(const QString& db_path, int64_t run_id, int64_t after_step = -1);

}  // namespace mok::gui
