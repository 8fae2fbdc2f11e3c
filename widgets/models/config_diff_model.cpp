#include "widgets/models/config_diff_model.h"

#include <set>

#include <QBrush>
#include <QColor>
#include <QFont>

namespace mok::gui {

ConfigDiffModel::ConfigDiffModel(QObject* parent) : QAbstractTableModel(parent) {}

int ConfigDiffModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

int ConfigDiffModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 1 + int(runs_.size()); }

QString ConfigDiffModel::value(int run, const QString& key) const {
  const auto& v = runs_[size_t(run)].values;
  auto it = v.find(key);
  return it == v.end() ? QStringLiteral("–") : it->second;
}

bool ConfigDiffModel::row_differs(const QString& key) const {
  if (runs_.size() < 2) return false;
  const QString first = value(0, key);
  for (int r = 1; r < int(runs_.size()); ++r)
    if (value(r, key) != first) return true;
  return false;
}

QVariant ConfigDiffModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const QString& key = rows_[index.row()];
  if (index.column() == 0) {
    if (role == Qt::DisplayRole) return key;
    if (role == Qt::FontRole && row_differs(key)) {
      QFont f;
      f.setBold(true);
      return f;
    }
    return {};
  }
  const int run = index.column() - 1;
  const bool differs = run != baseline_ && value(run, key) != value(baseline_, key);
  switch (role) {
    case Qt::DisplayRole: return value(run, key);
    case kDiffersRole: return differs;
    case Qt::BackgroundRole: return differs ? QVariant(QBrush(QColor(255, 236, 179))) : QVariant();
    case Qt::FontRole:
      if (differs) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
  }
  return {};
}

QVariant ConfigDiffModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  if (section == 0) return tr("Key");
  if (section - 1 < int(runs_.size())) {
    const QString name = runs_[size_t(section - 1)].name;
    return section - 1 == baseline_ ? name + tr(" (baseline)") : name;
  }
  return {};
}

void ConfigDiffModel::set_runs(std::vector<RunConfig> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  std::set<QString> keys;
  for (const RunConfig& r : runs_)
    for (const auto& kv : r.values) keys.insert(kv.first);
  all_keys_ = QStringList(keys.begin(), keys.end());
  if (baseline_ >= int(runs_.size())) baseline_ = 0;
  rows_.clear();
  for (const QString& k : all_keys_)
    if (!only_diff_ || row_differs(k)) rows_ << k;
  endResetModel();
}

void ConfigDiffModel::set_baseline(int run) {
  if (run < 0 || run >= int(runs_.size()) || run == baseline_) return;
  baseline_ = run;
  emit headerDataChanged(Qt::Horizontal, 0, columnCount() - 1);
  if (!rows_.isEmpty()) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

void ConfigDiffModel::set_only_differences(bool on) {
  if (on == only_diff_) return;
  beginResetModel();
  only_diff_ = on;
  rows_.clear();
  for (const QString& k : all_keys_)
    if (!only_diff_ || row_differs(k)) rows_ << k;
  endResetModel();
}


}  // namespace mok::gui
