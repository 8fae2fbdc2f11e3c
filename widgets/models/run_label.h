#pragma once
// How the workbench names a run wherever it lists one: its name and its id in the store
// ("quickstart #12"), so two runs of the same name are never confused.

#include <cstdint>

#include <QString>

namespace mok::gui {

// "quickstart #12"; "quickstart (not started)" while the store has no id for it yet.
inline QString run_label(const QString& name, int64_t run_id) {
  return run_id > 0 ? QStringLiteral("%1 #%2").arg(name).arg(run_id) : QStringLiteral("%1 (not started)").arg(name);
}

}  // namespace mok::gui
