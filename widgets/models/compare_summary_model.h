#pragma once
// CompareSummaryModel: one row per compared run, one column per summary figure (best val
// bpb, ppl, tokens/s, peak memory...), each cell "value  (×ratio to baseline)". Ratios
// are coloured green when better than the baseline and red when worse.

#include <cmath>
#include <map>
#include <vector>

#include <QAbstractTableModel>

namespace mok::gui {

class CompareSummaryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  static constexpr int kRatioRole = Qt::UserRole + 1;  // double: value / baseline value
  static constexpr int kValueRole = Qt::UserRole + 2;  // double: the raw value

  struct Figure {
    QString key;    // e.g. "val/bpb"
    QString label;  // column header
    bool lower_is_better = true;
    int kind = 0;   // 0 plain number, 1 bytes, 2 count
  };
  struct Row {
    QString name;
    std::map<QString, double> values;  // figure key → value
  };

  explicit CompareSummaryModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void set_figures(std::vector<Figure> figures);
  void set_rows(std::vector<Row> rows);
  void set_baseline(int row);
  int baseline() const { return baseline_; }
  double ratio(int row, int figure) const;  // NaN when either value is missing

  static std::vector<Figure> default_figures();

 private:
  double value(int row, int figure) const;

  std::vector<Figure> figures_;
  std::vector<Row> rows_;
  int baseline_ = 0;
};

}  // namespace mok::gui
