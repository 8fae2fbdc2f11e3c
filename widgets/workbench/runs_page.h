#pragma once
// RunsPage: the runs browser over the store: a sortable, filterable table (id, name, status,
// model, policy, steps, tokens, best val bpb/ppl, tokens/s, peak memory, tags, notes; newest
// first by default) and under it a details panel for the selected run (the machine it
// computed on, config, events, checkpoints, tags and notes), with delete, archive, resume
// from checkpoint, open in Live, compare and CSV export.
// The status and step of a run of this session are the RunManager's, the same the run queue
// shows, updated as they change; every other figure is the store's. The page keeps one
// read connection to poll the store's data_version once a second, so runs from the CLI or
// other windows show up.

#include <memory>

#include <QList>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QTableView;
class QTimer;
class QListWidget;

namespace mok {
class RunStore;
}

namespace mok::gui {

class RunTableModel;
class RunFilterProxy;
class RunManager;

class RunsPage : public QWidget {
  Q_OBJECT

 public:
  RunsPage(RunManager* runs, QWidget* parent = nullptr);
  ~RunsPage() override;

  void refresh();
  RunTableModel* model() const { return model_; }
  RunFilterProxy* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  QLabel* environment_label() const { return environment_; }  // the selected run's machine
  QList<qint64> selected_run_ids() const;
  qint64 current_run_id() const;
  void select_run(qint64 run_id);

  bool set_tags(qint64 run_id, const QStringList& tags);
  bool set_notes(qint64 run_id, const QString& notes);
  bool set_archived(qint64 run_id, bool archived);
  bool delete_run(qint64 run_id);  // no confirmation; the button asks first

 signals:
  void open_live(qint64 run_id);
  void compare(const QList<qint64>& run_ids);
  void message(const QString& text);

 private:
  void show_details();
  void poll();
  // The session's view of its own runs (status, steps) over the store's rows.
  void apply_session_state();
  template <class F>
  bool write(F&& f);

  RunManager* runs_;
  RunTableModel* model_ = nullptr;
  RunFilterProxy* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* search_ = nullptr;
  QComboBox* status_ = nullptr;
  QCheckBox* archived_ = nullptr;
  QLabel* title_ = nullptr;
  QLabel* environment_ = nullptr;
  QPlainTextEdit* config_ = nullptr;
  QListWidget* events_ = nullptr;
  QLineEdit* tags_ = nullptr;
  QPlainTextEdit* notes_ = nullptr;
  QPushButton* archive_button_ = nullptr;
  QTimer* poll_ = nullptr;
  QTimer* session_update_ = nullptr;  // coalesces job updates into one refresh
  std::unique_ptr<mok::RunStore> poll_store_;  // data_version counts only on one connection
  QString poll_store_path_;
  qint64 data_version_ = -1;
};

}  // namespace mok::gui
