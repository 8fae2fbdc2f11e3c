#include "widgets/workbench/store_access.h"

#include <QDateTime>
#include <QStringList>

#include "core/store/run_store.h"

namespace mok::gui {

QString model_text(const mok::RunShape& s) {
  if (s.layers == 0) return QStringLiteral("–");
  QString t = QStringLiteral("%1L d%2").arg(s.layers).arg(s.d_model);
  if (s.experts > 0) t += QStringLiteral(" %1e top%2").arg(s.experts).arg(s.top_k);
  return t;
}

QString policy_text(const mok::RunShape& s) {
  QString t = QString::fromStdString(s.dispatcher.empty() ? "classic" : s.dispatcher) + "/" +
              QString::fromStdString(s.policy.empty() ? "topk" : s.policy);
  if (s.kittens == "kitten") t += "+kitten";
  return t;
}

RunRecord run_record_from_summary(const mok::RunSummary& s) {
  RunRecord r;
  r.id = s.id;
  r.name = QString::fromStdString(s.name);
  r.status = QString::fromUtf8(run_status_name(s.status));
  r.model = model_text(s.shape);
  r.policy = policy_text(s.shape);
  r.steps = std::max<int64_t>(0, s.last_step);
  r.tokens = s.tokens;
  r.best_val_bpb = s.best_val_bpb;
  r.best_val_ppl = s.best_val_ppl;
  r.tokens_per_s = s.tokens_per_s;
  r.peak_bytes = s.peak_bytes;
  for (const std::string& t : s.tags) r.tags << QString::fromStdString(t);
  r.archived = s.archived;
  r.created = QDateTime::fromSecsSinceEpoch(qint64(s.created_at));
  return r;
}

std::vector<MetricRow> load_metric_rows(const QString& db_path, int64_t run_id, int64_t after_step) {
  RunStore store = RunStore::open_readonly(db_path.toStdString());
  std::map<int64_t, MetricRow> rows;
  for (const std::string& name : store.metric_names(run_id)) {
    for (const mok::MetricPoint& p : store.metric_series_since(run_id, name, after_step)) {
      MetricRow& row = rows[p.step];
      row.step = p.step;
      row.tokens = p.tokens;
      row.wall_s = p.wall_s;
      row.values.push_back(MetricValue{name, p.value});
    }
  }
  std::vector<MetricRow> out;
  out.reserve(rows.size());
  for (auto& [step, row] : rows) out.push_back(std::move(row));
  return out;
}

}  // namespace mok::gui
