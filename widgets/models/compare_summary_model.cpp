#include "widgets/models/compare_summary_model.h"

#include <QBrush>
#include <QColor>

#include "widgets/models/run_record.h"

namespace mok::gui {

CompareSummaryModel::CompareSummaryModel(QObject* parent) : QAbstractTableModel(parent) {
  figures_ = default_figures();
}

std::vector<CompareSummaryModel::Figure> CompareSummaryModel::default_figures() {
  return {
      // Two-line labels and cells (value, then ×ratio): nine columns fit a laptop-wide page.
      {"val/bpb", tr("Best val\nbpb"), true, 0},
      {"val/ppl", tr("Best val\nppl"), true, 0},
      {"train/loss", tr("Final train\nloss"), true, 0},
      {"perf/tokens_per_s", tr("Tokens/s"), false, 2},
      {"mem/peak_bytes", tr("Peak\nmemory"), true, 1},
      {"mem/peak_saved_activation_bytes", tr("Peak saved\nactivations"), true, 1},
      {"comm/remote_bytes", tr("Remote\nbytes/step"), true, 1},
      {"wall_s", tr("Wall\ntime (s)"), true, 0},
  };
}

int CompareSummaryModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

int CompareSummaryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 1 + int(figures_.size()); }

double CompareSummaryModel::value(int row, int figure) const {
  const auto& v = rows_[size_t(row)].values;
  auto it = v.find(figures_[size_t(figure)].key);
  return it == v.end() ? NAN : it->second;
}

double CompareSummaryModel::ratio(int row, int figure) const {
  if (row < 0 || row >= int(rows_.size()) || baseline_ >= int(rows_.size())) return NAN;
  const double a = value(row, figure), b = value(baseline_, figure);
  if (!std::isfinite(a) || !std::isfinite(b) || b == 0.0) return NAN;
  return a / b;
}

QVariant CompareSummaryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const int row = index.row();
  if (index.column() == 0) {
    if (role == Qt::DisplayRole) return row == baseline_ ? rows_[size_t(row)].name + tr(" (baseline)") : rows_[size_t(row)].name;
    return {};
  }
  const int f = index.column() - 1;
  const Figure& fig = figures_[size_t(f)];
  const double v = value(row, f);
  const double r = ratio(row, f);
  switch (role) {
    case Qt::DisplayRole: {
      if (!std::isfinite(v)) return QStringLiteral("–");
      QString text = fig.kind == 1 ? format_bytes(v) : fig.kind == 2 ? format_count(v) : QString::number(v, 'g', 5);
      if (row != baseline_ && std::isfinite(r)) text += QStringLiteral("\n×%1").arg(r, 0, 'f', 3);
      return text;
    }
    case kRatioRole: return std::isfinite(r) ? QVariant(r) : QVariant();
    case kValueRole: return std::isfinite(v) ? QVariant(v) : QVariant();
    case Qt::TextAlignmentRole: return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ForegroundRole: {
      if (row == baseline_ || !std::isfinite(r) || std::abs(r - 1.0) < 1e-3) return {};
      const bool better = fig.lower_is_better ? r < 1.0 : r > 1.0;
      return QBrush(better ? QColor(30, 130, 50) : QColor(190, 40, 40));
    }
  }
  return {};
}

QVariant CompareSummaryModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  if (section == 0) return tr("Run");
  if (section - 1 < int(figures_.size())) return figures_[size_t(section - 1)].label;
  return {};
}

void CompareSummaryModel::set_figures(std::vector<Figure> figures) {
  beginResetModel();
  figures_ = std::move(figures);
  endResetModel();
}

void CompareSummaryModel::set_rows(std::vector<Row> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  if (baseline_ >= int(rows_.size())) baseline_ = 0;
  endResetModel();
}

void CompareSummaryModel::set_baseline(int row) {
  if (row < 0 || row >= int(rows_.size()) || row == baseline_) return;
  baseline_ = row;
  emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

}  // namespace mok::gui
