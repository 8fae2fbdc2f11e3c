#include "app/workbench/screenshot_tour.h"

#include <cstdio>

#include <QDir>
#include <QEventLoop>
#include <QTimer>

#include "widgets/config/experiment_editor.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/live_page.h"
#include "widgets/workbench/main_window.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/runs_page.h"
#include "widgets/workbench/setup_page.h"

namespace mok::gui {

namespace {

void wait_ms(int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
}

bool save(MainWindow& w, const QString& dir, const QString& name) {
  wait_ms(400);  // let the coalesced replots land
  const bool ok = w.grab().save(dir + "/" + name);
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED", qPrintable(dir + "/" + name));
  return ok;
}

}  // namespace

int run_screenshot_tour(MainWindow& w, const QString& dir) {
  QDir().mkpath(dir);
  w.resize(1600, 1000);
  ExperimentEditor* editor = w.setup_page()->editor();
  RunManager* runs = w.run_manager();
  runs->set_max_concurrent(2);

  const QList<QPair<QString, QString>> tiny = {
      {"data.seq_len", "32"},      {"model.layers", "2"},      {"model.d_model", "32"},  {"model.heads", "2"},
      {"model.experts", "4"},      {"model.top_k", "2"},       {"model.expert_hidden", "64"},
      {"model.dense_hidden", "64"}, {"train.steps", "80"},     {"train.batch", "8"},     {"train.eval_every", "10"},
      {"train.warmup_steps", "10"}, {"parallel.threads", "1"}, {"train.checkpoint_every", "40"}};
  auto configure = [&](const QString& name, const QString& mode) {
    editor->load_preset("quickstart");
    for (const auto& [k, v] : tiny) editor->edit_field(k, v);
    editor->edit_field("name", name);
    editor->edit_field("kittens.mode", mode);
    editor->edit_field("kittens.rank", "8");
    editor->edit_field("kittens.min_rank", "4");
    editor->edit_field("kittens.schedule", mode == "kitten" ? "cosine" : "constant");
    editor->edit_field("kittens.warmup_steps", mode == "kitten" ? "10" : "0");
  };
  int finished = 0;
  QObject::connect(runs, &RunManager::job_finished, [&finished] { ++finished; });
  configure("demo-exact", "exact");
  if (!w.setup_page()->launch()) {
    std::fprintf(stderr, "the demo config is not valid: %s\n", qPrintable(editor->issues().join("; ")));
    return 1;
  }
  configure("demo-kitten", "kitten");
  const int kitten_job = w.setup_page()->launch();
  // Watch the kitten run live while both train.
  w.live_page()->show_job(kitten_job);
  w.show_page(MainWindow::LivePageIndex);
  for (int waited = 0; finished < 2 && waited < 280000; waited += 200) wait_ms(200);
  if (finished < 2) std::fprintf(stderr, "the demo runs did not finish in time\n");

  bool ok = true;
  w.show_page(MainWindow::SetupPageIndex);
  ok &= save(w, dir, "setup.png");
  w.show_page(MainWindow::RunsPageIndex);
  w.runs_page()->refresh();
  w.runs_page()->select_run(runs->job(kitten_job).run_id);
  ok &= save(w, dir, "runs.png");
  w.live_page()->show_run(runs->job(kitten_job).run_id);
  w.show_page(MainWindow::LivePageIndex);
  ok &= save(w, dir, "live.png");
  QList<qint64> ids;
  for (const auto& j : runs->jobs()) ids << j.run_id;
  w.compare_page()->set_runs(ids);
  w.compare_page()->set_metric("val/bpb");
  w.show_page(MainWindow::ComparePageIndex);
  ok &= save(w, dir, "compare.png");
  return ok && finished == 2 ? 0 : 1;
}

}  // namespace mok::gui
