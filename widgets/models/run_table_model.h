#pragma once
// RunTableModel: the runs browser's table over RunRecord rows, and RunFilterProxy for its
// search box, status filter and archive toggle. Display role gives formatted text;
// kSortRole gives the raw number or string so sorting is numeric. Rows that sort equal keep
// the order of their ids (newest first), so the table reads the same in every session.

#include <vector>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include "widgets/models/run_record.h"

namespace mok::gui {

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Id, Name, Status, Model, Policy, Steps, Tokens, BestBpb, BestPpl, TokensPerS, PeakMemory, Tags, Notes, ColumnCount };
  static constexpr int kSortRole = Qt::UserRole + 1;
  static constexpr int kRunIdRole = Qt::UserRole + 2;

  explicit RunTableModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void set_runs(std::vector<RunRecord> runs);
  // Insert or update by id.
  void upsert(const RunRecord& run);
  bool remove(int64_t id);
  int row_of(int64_t id) const;  // -1 when absent
  const RunRecord& run_at(int row) const { return runs_.at(size_t(row)); }
  const std::vector<RunRecord>& runs() const { return runs_; }

 private:
  std::vector<RunRecord> runs_;
};

class RunFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit RunFilterProxy(QObject* parent = nullptr);
  // Case-insensitive substring over name, model, policy, tags and notes.
  void set_search_text(const QString& text);
  // Empty shows every status.
  void set_status_filter(const QString& status);
  void set_show_archived(bool on);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

 private:
  QString search_;
  QString status_;
  bool show_archived_ = false;
};

}  // namespace mok::gui
