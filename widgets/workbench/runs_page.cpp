#include "widgets/workbench/runs_page.h"

#include <ostream>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "core/store/run_store.h"
#include "core/util/replace_file.h"
#include "widgets/models/run_label.h"
#include "widgets/models/run_table_model.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/store_access.h"

namespace mok::gui {

RunsPage::RunsPage(RunManager* runs, QWidget* parent) : QWidget(parent), runs_(runs) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* filters = new QHBoxLayout;
  search_ = new QLineEdit;
  search_->setPlaceholderText(tr("Search name, model, policy, tags, notes…"));
  search_->setClearButtonEnabled(true);
  filters->addWidget(search_, 1);
  status_ = new QComboBox;
  status_->addItem(tr("any status"), QString());
  for (const char* s : {"running", "paused", "finished", "stopped", "failed", "interrupted"}) status_->addItem(s, QString(s));
  filters->addWidget(status_);
  archived_ = new QCheckBox(tr("show archived"));
  filters->addWidget(archived_);
  auto* refresh = new QPushButton(tr("Refresh"));
  filters->addWidget(refresh);
  layout->addLayout(filters);

  // The table takes the page's width (every column readable); the details sit under it.
  auto* split = new QSplitter(Qt::Vertical);
  layout->addWidget(split, 1);
  model_ = new RunTableModel(this);
  proxy_ = new RunFilterProxy(this);
  proxy_->setSourceModel(model_);
  table_ = new QTableView;
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunTableModel::Id, Qt::DescendingOrder);  // newest first, every session
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);
  split->addWidget(table_);

  auto* details = new QWidget;
  auto* details_row = new QHBoxLayout(details);
  details_row->setContentsMargins(0, 4, 0, 0);
  auto* dl = new QVBoxLayout;
  details_row->addLayout(dl, 2);
  title_ = new QLabel(tr("Select a run"));
  title_->setWordWrap(true);
  title_->setTextFormat(Qt::RichText);
  dl->addWidget(title_);
  environment_ = new QLabel;
  environment_->setWordWrap(true);
  environment_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  environment_->setToolTip(tr("Where the run computed. Runs from the same machine and BLAS kernel family are "
                              "bitwise reproducible; across hardware they agree to float precision."));
  dl->addWidget(environment_);
  auto* buttons = new QHBoxLayout;
  auto* live = new QPushButton(tr("Live"));
  auto* compare_button = new QPushButton(tr("Compare"));
  auto* resume = new QPushButton(tr("Resume"));
  resume->setToolTip(tr("Continue from the latest checkpoint"));
  archive_button_ = new QPushButton(tr("Archive"));
  auto* del = new QPushButton(tr("Delete"));
  auto* csv = new QPushButton(tr("CSV…"));
  csv->setToolTip(tr("Export the metrics as CSV"));
  for (QPushButton* b : {live, compare_button, resume, archive_button_, csv, del}) buttons->addWidget(b);
  dl->addLayout(buttons);
  auto* form = new QFormLayout;
  tags_ = new QLineEdit;
  tags_->setPlaceholderText(tr("comma-separated, Enter to save"));
  form->addRow(tr("Tags"), tags_);
  dl->addLayout(form);
  notes_ = new QPlainTextEdit;
  notes_->setPlaceholderText(tr("Notes (saved when you leave the box)"));
  notes_->setMaximumHeight(120);
  dl->addWidget(notes_);
  dl->addStretch(1);
  auto* tabs = new QTabWidget;
  config_ = new QPlainTextEdit;
  config_->setReadOnly(true);
  config_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  tabs->addTab(config_, tr("Config"));
  events_ = new QListWidget;
  tabs->addTab(events_, tr("Events and checkpoints"));
  details_row->addWidget(tabs, 3);
  split->addWidget(details);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);

  connect(search_, &QLineEdit::textChanged, proxy_, &RunFilterProxy::set_search_text);
  connect(status_, &QComboBox::currentIndexChanged, this, [this] { proxy_->set_status_filter(status_->currentData().toString()); });
  connect(archived_, &QCheckBox::toggled, proxy_, &RunFilterProxy::set_show_archived);
  connect(refresh, &QPushButton::clicked, this, &RunsPage::refresh);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &RunsPage::show_details);
  connect(table_, &QTableView::doubleClicked, this, [this] { if (current_run_id()) emit open_live(current_run_id()); });
  connect(live, &QPushButton::clicked, this, [this] { if (current_run_id()) emit open_live(current_run_id()); });
  connect(compare_button, &QPushButton::clicked, this, [this] { emit compare(selected_run_ids()); });
  connect(resume, &QPushButton::clicked, this, [this] {
    QString error;
    if (current_run_id() && !runs_->resume_from_checkpoint(current_run_id(), &error)) emit message(error);
  });
  connect(archive_button_, &QPushButton::clicked, this, [this] {
    const int row = model_->row_of(current_run_id());
    if (row >= 0) set_archived(current_run_id(), !model_->run_at(row).archived);
  });
  connect(del, &QPushButton::clicked, this, [this] {
    const QList<qint64> ids = selected_run_ids();
    if (ids.isEmpty()) return;
    if (QMessageBox::question(this, tr("Delete runs"),
                              tr("Delete %n run(s) with all their metrics? This cannot be undone.", nullptr, int(ids.size()))) !=
        QMessageBox::Yes)
      return;
    for (qint64 id : ids) delete_run(id);
  });
  connect(csv, &QPushButton::clicked, this, [this] {
    const qint64 id = current_run_id();
    if (!id) return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export metrics"), QStringLiteral("run%1.csv").arg(id), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    try {
      RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
      // Whole or not at all: a failed export says so and leaves the chosen file as it was.
      replace_file(path.toStdString(), [&](std::ostream& out) { store.export_csv(id, out); });
      emit message(tr("Metrics of run %1 written to %2").arg(id).arg(path));
    } catch (const std::exception& e) {
      emit message(QString::fromUtf8(e.what()));
    }
  });
  connect(tags_, &QLineEdit::returnPressed, this, [this] {
    QStringList tags;
    for (const QString& t : tags_->text().split(',', Qt::SkipEmptyParts)) tags << t.trimmed();
    if (current_run_id()) set_tags(current_run_id(), tags);
  });

  poll_ = new QTimer(this);
  poll_->setInterval(1000);
  connect(poll_, &QTimer::timeout, this, &RunsPage::poll);
  poll_->start();
  // A run of this session changed (started, paused, stepped, stopped): refresh once soon.
  session_update_ = new QTimer(this);
  session_update_->setSingleShot(true);
  session_update_->setInterval(200);
  connect(session_update_, &QTimer::timeout, this, [this] {
    if (isVisible()) RunsPage::refresh();  // a hidden page refreshes when it is shown (MainWindow)
  });
  for (auto signal : {&RunManager::job_added, &RunManager::job_changed})
    connect(runs_, signal, session_update_, qOverload<>(&QTimer::start));
  connect(runs_, &RunManager::metrics_arrived, session_update_, [this] {
    if (!session_update_->isActive()) session_update_->start();
  });
  // Notes save when focus leaves the box.
  connect(qApp, &QApplication::focusChanged, this, [this](QWidget* old, QWidget*) {
    if (old == notes_ && notes_->document()->isModified() && current_run_id()) {
      set_notes(current_run_id(), notes_->toPlainText());
      notes_->document()->setModified(false);
    }
  });
}

template <class F>
bool RunsPage::write(F&& f) {
  try {
    RunStore store = RunStore::open(runs_->db_path().toStdString());
    f(store);
    refresh();
    return true;
  } catch (const std::exception& e) {
    emit message(QString::fromUtf8(e.what()));
    return false;
  }
}

bool RunsPage::set_tags(qint64 id, const QStringList& tags) {
  return write([&](RunStore& s) {
    const mok::RunRecord rec = s.get_run(id);
    for (const std::string& t : rec.summary.tags)
      if (!tags.contains(QString::fromStdString(t))) s.remove_tag(id, t);
    for (const QString& t : tags) s.add_tag(id, t.toStdString());
  });
}

bool RunsPage::set_notes(qint64 id, const QString& notes) {
  return write([&](RunStore& s) { s.set_notes(id, notes.toStdString()); });
}

bool RunsPage::set_archived(qint64 id, bool archived) {
  return write([&](RunStore& s) { s.archive(id, archived); });
}

bool RunsPage::delete_run(qint64 id) {
  if (runs_->job_of_run(id)) {
    const auto info = runs_->job(runs_->job_of_run(id));
    if (info.status == RunStatus::running || info.status == RunStatus::paused) {
      emit message(tr("Run %1 is still running; stop it first.").arg(id));
      return false;
    }
  }
  const bool ok = write([&](RunStore& s) { s.delete_run(id); });
  if (ok) model_->remove(id);
  return ok;
}

RunsPage::~RunsPage() = default;

void RunsPage::poll() {
  if (!isVisible()) return;
  try {
    if (!QFileInfo::exists(runs_->db_path())) return;
    if (!poll_store_ || poll_store_path_ != runs_->db_path()) {
      poll_store_ = std::make_unique<RunStore>(RunStore::open_readonly(runs_->db_path().toStdString()));
      poll_store_path_ = runs_->db_path();
      data_version_ = -1;
    }
    const qint64 v = poll_store_->data_version();
    if (v != data_version_) {
      data_version_ = v;
      refresh();
    }
  } catch (...) {
    poll_store_.reset();
  }
}

void RunsPage::apply_session_state() {
  for (const RunManager::JobInfo& j : runs_->latest_jobs()) {
    const int row = model_->row_of(j.run_id);
    if (j.run_id == 0 || row < 0) continue;
    RunRecord r = model_->run_at(row);
    r.status = QString::fromUtf8(run_status_name(j.status));
    if (j.last_step >= 0) r.steps = j.last_step;
    model_->upsert(r);
  }
}

void RunsPage::refresh() {
  if (!QFileInfo::exists(runs_->db_path())) {
    model_->set_runs({});
    return;
  }
  try {
    RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
    RunFilter filter;
    filter.include_archived = true;
    std::vector<mok::RunSummary> list = store.list_runs(filter);
    // Upsert in place so the selection and scroll position survive a refresh.
    QList<qint64> present;
    for (const mok::RunSummary& s : list) {
      RunRecord r = run_record_from_summary(s);
      if (auto rec = store.find_run(s.id)) r.notes = QString::fromStdString(rec->notes);
      model_->upsert(r);
      present << s.id;
    }
    std::vector<int64_t> gone;
    for (const RunRecord& r : model_->runs())
      if (!present.contains(r.id)) gone.push_back(r.id);
    for (int64_t id : gone) model_->remove(id);
    apply_session_state();
    table_->resizeColumnsToContents();
    show_details();
  } catch (const std::exception& e) {
    emit message(QString::fromUtf8(e.what()));
  }
}

QList<qint64> RunsPage::selected_run_ids() const {
  QList<qint64> out;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows())
    out << i.data(RunTableModel::kRunIdRole).toLongLong();
  if (out.isEmpty() && current_run_id()) out << current_run_id();
  return out;
}

qint64 RunsPage::current_run_id() const {
  const QModelIndex i = table_->currentIndex();
  return i.isValid() ? i.data(RunTableModel::kRunIdRole).toLongLong() : 0;
}

void RunsPage::select_run(qint64 run_id) {
  const int row = model_->row_of(run_id);
  if (row < 0) return;
  const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
  table_->setCurrentIndex(i);
  table_->selectRow(i.row());
}

void RunsPage::show_details() {
  const qint64 id = current_run_id();
  static qint64 shown = -1;
  const int row = model_->row_of(id);
  if (row < 0) {
    title_->setText(tr("Select a run"));
    environment_->clear();
    return;
  }
  const RunRecord& r = model_->run_at(row);
  archive_button_->setText(r.archived ? tr("Unarchive") : tr("Archive"));
  title_->setText(tr("<b>%1</b> — %2<br>%3 · %4 · created %5")
                      .arg(run_label(r.name, id).toHtmlEscaped(), r.status, r.model, r.policy,
                           r.created.toString("yyyy-MM-dd hh:mm")));
  if (!tags_->hasFocus()) tags_->setText(r.tags.join(", "));
  if (!notes_->hasFocus() && notes_->toPlainText() != r.notes) {
    notes_->setPlainText(r.notes);
    notes_->document()->setModified(false);
  }
  try {
    RunStore store = RunStore::open_readonly(runs_->db_path().toStdString());
    const mok::RunRecord rec = store.get_run(id);
    environment_->setText(tr("Machine: %1").arg(QString::fromStdString(environment_summary(rec.environment))));
    if (shown != id || config_->toPlainText().isEmpty()) config_->setPlainText(QString::fromStdString(rec.config_yaml));
    events_->clear();
    for (const RunEvent& e : store.events(id))
      events_->addItem(QStringLiteral("%1  %2  %3")
                           .arg(QDateTime::fromSecsSinceEpoch(qint64(e.time)).toString("hh:mm:ss"),
                                QString::fromStdString(e.level), QString::fromStdString(e.text)));
    for (const CheckpointRecord& c : store.checkpoints(id))
      events_->addItem(tr("checkpoint  step %1  %2").arg(c.step).arg(QString::fromStdString(c.path)));
  } catch (const std::exception& e) {
    environment_->clear();
    events_->clear();
    events_->addItem(QString::fromUtf8(e.what()));
  }
  shown = id;
}

}  // namespace mok::gui
