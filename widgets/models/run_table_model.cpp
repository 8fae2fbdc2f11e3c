#include "widgets/models/run_table_model.h"

#include <QBrush>
#include <QColor>

namespace mok::gui {

QString format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return QStringLiteral("–");
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024.0 && u < 4) bytes /= 1024.0, ++u;
  return QStringLiteral("%1 %2").arg(bytes, 0, 'f', u == 0 ? 0 : (bytes < 10 ? 2 : 1)).arg(units[u]);
}

QString format_count(double n) {
  if (!std::isfinite(n)) return QStringLiteral("–");
  if (std::abs(n) >= 1e9) return QString::number(n / 1e9, 'f', 2) + "G";
  if (std::abs(n) >= 1e6) return QString::number(n / 1e6, 'f', 2) + "M";
  if (std::abs(n) >= 1e4) return QString::number(n / 1e3, 'f', 1) + "k";
  return QString::number(n, 'f', 0);
}

RunTableModel::RunTableModel(QObject* parent) : QAbstractTableModel(parent) {}

int RunTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(runs_.size()); }

int RunTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

static QVariant number_or_null(double v) { return std::isfinite(v) ? QVariant(v) : QVariant(-1e300); }

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunRecord& r = runs_[size_t(index.row())];
  if (role == kRunIdRole) return QVariant::fromValue<qlonglong>(r.id);
  if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
    switch (index.column()) {
      case Id: return QString::number(r.id);
      case Name: return r.name;
      case Status: return r.archived ? r.status + tr(" (archived)") : r.status;
      case Model: return r.model;
      case Policy: return r.policy;
      case Steps: return QString::number(r.steps);
      case Tokens: return format_count(double(r.tokens));
      case BestBpb: return std::isfinite(r.best_val_bpb) ? QString::number(r.best_val_bpb, 'f', 4) : QStringLiteral("–");
      case BestPpl: return std::isfinite(r.best_val_ppl) ? QString::number(r.best_val_ppl, 'f', 3) : QStringLiteral("–");
      case TokensPerS: return format_count(r.tokens_per_s);
      case PeakMemory: return format_bytes(r.peak_bytes);
      case Tags: return r.tags.join(", ");
      case Notes: return role == Qt::ToolTipRole ? r.notes : r.notes.section('\n', 0, 0);
    }
  }
  if (role == kSortRole) {
    switch (index.column()) {
      case Id: return QVariant::fromValue<qlonglong>(r.id);
      case Name: return r.name.toLower();
      case Status: return r.status;
      case Model: return r.model;
      case Policy: return r.policy;
      case Steps: return QVariant::fromValue<qlonglong>(r.steps);
      case Tokens: return QVariant::fromValue<qlonglong>(r.tokens);
      case BestBpb: return std::isfinite(r.best_val_bpb) ? r.best_val_bpb : 1e300;  // missing sorts last
      case BestPpl: return std::isfinite(r.best_val_ppl) ? r.best_val_ppl : 1e300;
      case TokensPerS: return number_or_null(r.tokens_per_s);
      case PeakMemory: return number_or_null(r.peak_bytes);
      case Tags: return r.tags.join(",");
      case Notes: return r.notes;
    }
  }
  if (role == Qt::TextAlignmentRole && (index.column() == Id || (index.column() >= Steps && index.column() <= PeakMemory)))
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole && index.column() == Status) {
    if (r.status == "running") return QBrush(QColor(30, 120, 200));
    if (r.status == "failed") return QBrush(QColor(200, 40, 40));
    if (r.status == "finished") return QBrush(QColor(40, 140, 60));
    if (r.status == "paused" || r.status == "queued") return QBrush(QColor(160, 110, 0));
  }
  if (role == Qt::ForegroundRole && r.archived) return QBrush(QColor(140, 140, 140));
  return {};
}

QVariant RunTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Id: return tr("ID");
    case Name: return tr("Name");
    case Status: return tr("Status");
    case Model: return tr("Model");
    case Policy: return tr("Policy");
    case Steps: return tr("Steps");
    case Tokens: return tr("Tokens");
    case BestBpb: return tr("Best val bpb");
    case BestPpl: return tr("Best val ppl");
    case TokensPerS: return tr("Tokens/s");
    case PeakMemory: return tr("Peak memory");
    case Tags: return tr("Tags");
    case Notes: return tr("Notes");
  }
  return {};
}

void RunTableModel::set_runs(std::vector<RunRecord> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

int RunTableModel::row_of(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i)
    if (runs_[i].id == id) return int(i);
  return -1;
}

void RunTableModel::upsert(const RunRecord& run) {
  int row = row_of(run.id);
  if (row >= 0) {
    runs_[size_t(row)] = run;
    emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
    return;
  }
  const int n = int(runs_.size());
  beginInsertRows(QModelIndex(), n, n);
  runs_.push_back(run);
  endInsertRows();
}

bool RunTableModel::remove(int64_t id) {
  int row = row_of(id);
  if (row < 0) return false;
  beginRemoveRows(QModelIndex(), row, row);
  runs_.erase(runs_.begin() + row);
  endRemoveRows();
  return true;
}

RunFilterProxy::RunFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(RunTableModel::kSortRole);
  setDynamicSortFilter(true);
}

void RunFilterProxy::set_search_text(const QString& text) {
  search_ = text.trimmed();
  invalidateFilter();
}

void RunFilterProxy::set_status_filter(const QString& status) {
  status_ = status;
  invalidateFilter();
}

void RunFilterProxy::set_show_archived(bool on) {
  show_archived_ = on;
  invalidateFilter();
}

bool RunFilterProxy::lessThan(const QModelIndex& left, const QModelIndex& right) const {
  const QVariant a = left.data(sortRole()), b = right.data(sortRole());
  const QPartialOrdering order = QVariant::compare(a, b);
  if (order == QPartialOrdering::Less) return true;
  if (order == QPartialOrdering::Greater) return false;
  // Equal (or incomparable): the newer run first, whatever order the rows arrived in.
  return left.data(RunTableModel::kRunIdRole).toLongLong() > right.data(RunTableModel::kRunIdRole).toLongLong();
}

bool RunFilterProxy::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  auto* model = qobject_cast<RunTableModel*>(sourceModel());
  if (!model || source_parent.isValid()) return true;
  const RunRecord& r = model->run_at(source_row);
  if (r.archived && !show_archived_) return false;
  if (!status_.isEmpty() && r.status != status_) return false;
  if (search_.isEmpty()) return true;
  const QStringList words = search_.split(' ', Qt::SkipEmptyParts);
  const QString hay = QStringList{r.name, r.model, r.policy, r.tags.join(' '), r.notes, r.status}.join(' ');
  for (const QString& w : words)
    if (!hay.contains(w, Qt::CaseInsensitive)) return false;
  return true;
}

}  // namespace mok::gui
