#pragma once
// Running a command as a user would, for the CLI tests: exit code, stdout, stderr, and the
// last stdout line parsed as a JSON object (the `--json` contract). A command that outlives
// the timeout is killed and reported as exit code −1 with "timed out" on stderr.

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace mok::test {

struct CliResult {
  int exit_code = -1;
  QString out, err;
  QJsonObject json;  // the last stdout line, when it is a JSON object
};

inline CliResult run_command(const QString& program, const QStringList& args, const QString& cwd,
                             int timeout_ms = 120000) {
  QProcess p;
  p.setWorkingDirectory(cwd);
  // Open MPI in containers that forbid cross-memory attach (harmless elsewhere).
  QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
  e.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
  p.setProcessEnvironment(e);
  p.start(program, args);
  CliResult r;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out";
    return r;
  }
  r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  const QStringList lines = r.out.trimmed().split('\n');
  if (!lines.isEmpty()) r.json = QJsonDocument::fromJson(lines.last().toUtf8()).object();
  return r;
}

}  // namespace mok::test
