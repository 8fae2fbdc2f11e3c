#pragma once
// MainWindow: the workbench. A sidebar picks the page (Setup, Runs, Live, Compare); a dock
// lists this session's runs with progress, time left and pause/resume/stop; the File menu
// opens or creates a run store, imports the runs of another (a cluster's), and exports the config as YAML, a Slurm job script (asking
// before it replaces a file) and the live plots as PNG or PDF; Help → About gives versions
// and where the documentation is. Closing with runs in flight asks first.

#include <QMainWindow>

#include <functional>

class QAction;
class QListWidget;
class QStackedWidget;

namespace mok::gui {

class RunManager;
class SetupPage;
class RunsPage;
class LivePage;
class ComparePage;
class RunQueueView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  enum Page { SetupPageIndex, RunsPageIndex, LivePageIndex, ComparePageIndex };

  explicit MainWindow(const QString& db_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  RunManager* run_manager() const { return runs_; }
  SetupPage* setup_page() const { return setup_; }
  RunsPage* runs_page() const { return runs_page_; }
  LivePage* live_page() const { return live_; }
  ComparePage* compare_page() const { return compare_; }
  void show_page(Page page);
  Page current_page() const;

  bool export_config_yaml(const QString& path, QString* error = nullptr);
  bool export_plots(const QString& folder, const QString& format);  // "png" or "pdf"
  // Writes the job script and its config, asking first when that replaces a file; false
  // when the user declines or writing fails (the message says which).
  bool export_job_script(const QString& path);
  // Switches the workbench to the run store at `path` (a missing or empty file becomes one at
  // its first run). A file that is not an intact MoK run store, or a switch while runs train
  // into the current store, gets a message box and keeps the current store; false then.
  bool open_database(const QString& path);
  // Copies the runs of the store at `path` that the current one lacks into it
  // (core/store/run_import.h), refreshes the run lists and says in the status bar how many
  // came and how many were here already. A refused store or failed import gets a message box
  // and changes nothing; false then.
  bool import_runs_from(const QString& path);

  RunQueueView* queue() const { return queue_; }
  QAction* launch_action() const { return launch_action_; }
  QAction* open_database_action() const { return open_db_action_; }
  // How "Open run database…" and "Import runs from…" ask for a file: (caption, starting
  // folder or file, filter) → the chosen path, empty when cancelled. A QFileDialog by
  // default; a test answers in its place, since the dialog fills its folder asynchronously.
  using OpenFileChooser = std::function<QString(const QString& caption, const QString& start, const QString& filter)>;
  void set_open_file_chooser(OpenFileChooser chooser) { choose_open_file_ = std::move(chooser); }
  QAction* import_runs_action() const { return import_action_; }
  QAction* about_action() const { return about_action_; }
  // Versions of the workbench, Qt and QCustomPlot, and where the documentation is.
  static QString about_text();
  static QString docs_dir();

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void build_menus();
  void update_queue();

  RunManager* runs_ = nullptr;
  QListWidget* sidebar_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  RunQueueView* queue_ = nullptr;
  QAction* launch_action_ = nullptr;
  QAction* open_db_action_ = nullptr;
  OpenFileChooser choose_open_file_;
  QAction* import_action_ = nullptr;
  QAction* about_action_ = nullptr;
  SetupPage* setup_ = nullptr;
  RunsPage* runs_page_ = nullptr;
  LivePage* live_ = nullptr;
  ComparePage* compare_ = nullptr;
};

}  // namespace mok::gui
