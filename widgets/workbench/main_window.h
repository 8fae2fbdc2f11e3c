#pragma once
// MainWindow: the workbench. A sidebar picks the page (Setup, Runs, Live, Compare); a dock
// lists this session's runs with progress, time left and pause/resume/stop; the File menu
// opens or creates a run store and exports the config as YAML, a Slurm job script (asking
// before it replaces a file) and the live plots as PNG or PDF; Help → About gives versions
// and where the documentation is. Closing with runs in flight asks first.

#include <QMainWindow>

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
  void open_database(const QString& path);

  RunQueueView* queue() const { return queue_; }
  QAction* launch_action() const { return launch_action_; }
  QAction* open_database_action() const { return open_db_action_; }
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
  QAction* about_action_ = nullptr;
  SetupPage* setup_ = nullptr;
  RunsPage* runs_page_ = nullptr;
  LivePage* live_ = nullptr;
  ComparePage* compare_ = nullptr;
};

}  // namespace mok::gui
