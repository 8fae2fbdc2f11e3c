#pragma once
// The screenshot tour behind `mok-workbench --screenshots DIR` (tools/screenshots.sh).

#include <QString>

namespace mok::gui {

class MainWindow;

// Runs two tiny experiments for real (exact and kitten), then saves setup.png, runs.png,
// live.png and compare.png to `dir`. Returns the process exit code.
int run_screenshot_tour(MainWindow& window, const QString& dir);

}  // namespace mok::gui
