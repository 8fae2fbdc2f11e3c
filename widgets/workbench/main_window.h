#pragma once
// MainWindow: the workbench. A sidebar picks the page (Setup, Runs, Live, Compare); a dock
// lists this session's runs with pause/resume/stop; the File menu exports the config as
// YAML, a Slurm job script, a run's metrics as CSV, and the live plots as PNG or PDF.

#include <QMainWindow>

class QListWidget;
class QStackedWidget;
class QTreeWidget;

namespace mok::gui {

class RunManager;
class SetupPage;
class RunsPage;
class LivePage;
class ComparePage;

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

 private:
  void build_menus();
  void update_queue();

  RunManager* runs_ = nullptr;
  QListWidget* sidebar_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  QTreeWidget* queue_ = nullptr;
  SetupPage* setup_ = nullptr;
  RunsPage* runs_page_ = nullptr;
  LivePage* live_ = nullptr;
  ComparePage* compare_ = nullptr;
};

}  // namespace mok::gui
