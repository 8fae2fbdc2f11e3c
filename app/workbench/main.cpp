// mok-workbench: the desktop workbench.
//   mok-workbench [--db PATH] [--screenshots DIR]
// --screenshots (used by tools/screenshots.sh under Xvfb): runs a tiny experiment for real
// into the database, then saves a PNG of each page to DIR and exits.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>

#include "app/workbench/screenshot_tour.h"
#include "widgets/workbench/main_window.h"
#if MOK_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

int main(int argc, char** argv) {
#if MOK_HAVE_CUDA
  // Before the Setup page lists the devices (where there is no GPU the page says why).
  mok::cuda::register_cuda_backend();
#endif
  QApplication app(argc, argv);
  QApplication::setApplicationName("MoK Workbench");
  QApplication::setOrganizationName("mok");
  QCommandLineParser parser;
  parser.setApplicationDescription("MoK Workbench: configure, launch, watch, compare and export training runs.");
  parser.addHelpOption();
  QCommandLineOption db({"d", "db"}, "Run store (SQLite file).", "path", "runs/mok.db");
  QCommandLineOption shots("screenshots", "Run a tiny demo, save a PNG of each page to DIR, exit.", "dir");
  parser.addOption(db);
  parser.addOption(shots);
  parser.process(app);

  const QString db_path = QDir::current().absoluteFilePath(parser.value(db));
  QDir().mkpath(QFileInfo(db_path).absolutePath());
  mok::gui::MainWindow window(db_path);
  window.show();
  if (parser.isSet(shots)) return mok::gui::run_screenshot_tour(window, parser.value(shots));
  return app.exec();
}
