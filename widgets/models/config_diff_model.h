#pragma once
// ConfigDiffModel: the configs of several runs side by side, one row per dotted key, one
// column per run after the key column. Cells that differ from the baseline run are bold
// on a tinted background; "only differences" hides rows where every run agrees.

#include <map>
#include <vector>

#include <QAbstractTableModel>
#include <QStringList>

namespace mok::gui {

class ConfigDiffModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  static constexpr int kDiffersRole = Qt::UserRole + 1;  // bool: cell differs from baseline

  struct RunConfig {
    QString name;
    std::map<QString, QString> values;  // dotted key → text; absent keys show as "–"
  };

  explicit ConfigDiffModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void set_runs(std::vector<RunConfig> runs);
  void set_baseline(int run);  // index into the runs
  int baseline() const { return baseline_; }
  void set_only_differences(bool on);
  bool only_differences() const { return only_diff_; }
  QStringList keys() const { return rows_; }  // keys shown, in order
  bool row_differs(const QString& key) const;

 private:
  QString value(int run, const QString& key) const;

  std::vector<RunConfig> runs_;
  QStringList all_keys_;
  QStringList rows_;
  int baseline_ = 0;
  bool only_diff_ = false;
};

}  // namespace mok::gui
