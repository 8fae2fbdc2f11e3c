// RunStore across processes: two forked writers appending to one database at once lose
// nothing (including both creating the database at the same moment), a writer killed
// with SIGKILL keeps exactly the rows it flushed and is reported as interrupted, and a
// writer killed at any write while it creates the store leaves a store the next open takes,
// and forked writers record runs of distinct uids.
// Children never touch Qt; they report through their exit status (0 = ok).
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/store/metric_writer.h"
#include "core/store/run_store.h"

using mok::MetricRow;
using mok::RunStatus;
using mok::RunStore;

namespace {

MetricRow row(int64_t step, double v) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 64;
  r.wall_s = step * 0.01;
  r.values = {{"train/loss", v}, {"train/lr", 1e-3}, {"perf/tokens_per_s", 1000.0 + step}};
  return r;
}

// Waits for a child; true when it exited with status 0.
bool child_ok(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// In a child: SIGKILL at the Nth write this process makes through SQLite (to a database, its
// rollback journal or its write-ahead log), just before it reaches the file. SQLite's unix
// VFS lets a program replace the system calls it makes; the -shm index is memory-mapped,
// so its changes are not writes here.
int g_writes_left = 0;
sqlite3_syscall_ptr g_write = nullptr, g_pwrite = nullptr, g_pwrite64 = nullptr;

void count_write() {
  if (--g_writes_left == 0) raise(SIGKILL);
}
ssize_t killing_write(int fd, const void* buf, size_t n) {
  count_write();
  return reinterpret_cast<ssize_t (*)(int, const void*, size_t)>(g_write)(fd, buf, n);
}
ssize_t killing_pwrite(int fd, const void* buf, size_t n, off_t at) {
  count_write();
  return reinterpret_cast<ssize_t (*)(int, const void*, size_t, off_t)>(g_pwrite)(fd, buf, n, at);
}
ssize_t killing_pwrite64(int fd, const void* buf, size_t n, off64_t at) {
  count_write();
  return reinterpret_cast<ssize_t (*)(int, const void*, size_t, off64_t)>(g_pwrite64)(fd, buf, n, at);
}

void kill_at_write(int n) {
  g_writes_left = n;
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  g_write = vfs->xGetSystemCall(vfs, "write");
  g_pwrite = vfs->xGetSystemCall(vfs, "pwrite");
  g_pwrite64 = vfs->xGetSystemCall(vfs, "pwrite64");
  if (g_write) vfs->xSetSystemCall(vfs, "write", reinterpret_cast<sqlite3_syscall_ptr>(killing_write));
  if (g_pwrite) vfs->xSetSystemCall(vfs, "pwrite", reinterpret_cast<sqlite3_syscall_ptr>(killing_pwrite));
  if (g_pwrite64) vfs->xSetSystemCall(vfs, "pwrite64", reinterpret_cast<sqlite3_syscall_ptr>(killing_pwrite64));
}

void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

}  // namespace

class TestStoreProcesses : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

 private slots:
  void twoWritersAtOnceLoseNothing() {
    const std::string p = path("shared/concurrent.db");  // created by the children, racing
    constexpr int kSteps = 150;
    int gate[2];
    QCOMPARE(pipe(gate), 0);
    pid_t kids[2];
    for (int k = 0; k < 2; ++k) {
      kids[k] = fork();
      QVERIFY(kids[k] >= 0);
      if (kids[k] == 0) {
        close(gate[1]);
        char c;
        (void)!read(gate[0], &c, 1);  // returns 0 when the parent closes the pipe: start together
        int code = 0;
        try {
          RunStore store = RunStore::open(p);
          const int64_t id = store.create_run({.name = "writer " + std::to_string(k)});
          if (k == 0) {
            for (int s = 0; s < kSteps; ++s) store.append_metrics(id, row(s, 1.0 / (s + 1)));
          } else {
            mok::MetricWriter w(store, id, {.max_rows = 4, .max_delay_ms = 50, .background = true});
            for (int s = 0; s < kSteps; ++s) {
              w.append(row(s, 1.0 / (s + 1)));
              if (s % 25 == 0) store.append_event(id, "info", "step " + std::to_string(s));
            }
            w.flush();
          }
          store.set_status(id, RunStatus::finished);
        } catch (...) {
          code = 3;
        }
        _exit(code);
      }
    }
    close(gate[0]);
    close(gate[1]);
    QVERIFY(child_ok(kids[0]));
    QVERIFY(child_ok(kids[1]));

    RunStore store = RunStore::open_readonly(p);
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(2));
    for (const auto& r : runs) {
      QCOMPARE(r.status, RunStatus::finished);
      QCOMPARE(store.metric_row_count(r.id), int64_t(3 * kSteps));
      const auto loss = store.metric_series(r.id, "train/loss");
      QCOMPARE(loss.size(), size_t(kSteps));
      for (int s = 0; s < kSteps; ++s) {
        QCOMPARE(loss[s].step, int64_t(s));
        QCOMPARE(loss[s].value, 1.0 / (s + 1));
      }
      QCOMPARE(r.last_step, int64_t(kSteps - 1));
    }
  }

  void killedWriterKeepsFlushedRowsAndIsInterrupted() {
    const std::string p = path("killed.db");
    constexpr int kFlushed = 40;
    int report[2];
    QCOMPARE(pipe(report), 0);
    const pid_t kid = fork();
    QVERIFY(kid >= 0);
    if (kid == 0) {
      close(report[0]);
      try {
        RunStore store = RunStore::open(p);
        const int64_t id = store.create_run({.name = "doomed"});
        (void)!write(report[1], &id, sizeof(id));
        for (int s = 0; s < kFlushed; ++s) store.append_metrics(id, row(s, 2.0 + s));
        // These stay in the writer's buffer: never written, so they must not appear.
        mok::MetricWriter w(store, id, {.max_rows = 1000, .max_delay_ms = 600000, .background = false});
        for (int s = kFlushed; s < kFlushed + 7; ++s) w.append(row(s, 0.0));
        raise(SIGKILL);
      } catch (...) {
      }
      _exit(3);
    }
    close(report[1]);
    int64_t id = 0;
    QCOMPARE(read(report[0], &id, sizeof(id)), ssize_t(sizeof(id)));
    close(report[0]);
    int status = 0;
    QCOMPARE(waitpid(kid, &status, 0), kid);
    QVERIFY(WIFSIGNALED(status));
    QCOMPARE(WTERMSIG(status), SIGKILL);

    {
      // A read-only browser already shows it as interrupted, without writing.
      RunStore ro = RunStore::open_readonly(p);
      QCOMPARE(ro.get_run(id).summary.status, RunStatus::interrupted);
    }
    RunStore store = RunStore::open(p);
    const mok::RunRecord rec = store.get_run(id);
    QCOMPARE(rec.summary.status, RunStatus::interrupted);
    QVERIFY(rec.summary.finished_at > 0);
    QVERIFY(QString::fromStdString(rec.status_message).contains(QString::number(kid)));
    QCOMPARE(store.metric_row_count(id), int64_t(3 * kFlushed));
    const auto loss = store.metric_series(id, "train/loss");
    QCOMPARE(loss.size(), size_t(kFlushed));
    QCOMPARE(loss.back().step, int64_t(kFlushed - 1));
    QCOMPARE(loss.back().value, 2.0 + kFlushed - 1);
    QCOMPARE(rec.summary.last_step, int64_t(kFlushed - 1));
    const auto ev = store.events(id);
    QCOMPARE(QString::fromStdString(ev.back().level), QString("warning"));
    QVERIFY(QString::fromStdString(ev.back().text).contains("interrupted"));
    // Opening again changes nothing more (one event, status stays).
    RunStore again = RunStore::open(p);
    QCOMPARE(again.events(id).size(), ev.size());
  }

  // A trainer killed while it creates its store, at each of the writes that takes in turn
  // (the schema, the first run, its first metric rows): the next open takes the store,
  // with whatever was committed before the kill, and records a run in it. The schema used to
  // be created before the store switched to its write-ahead log: a kill inside that commit
  // left half a schema in the file beside a rollback journal, and every later open refused
  // the store as damaged or not a database (its checks read the file as immutable, past the
  // journal that would have rolled it back).
  void killedAtAnyWriteWhileCreatingTheStoreOpensAgain() {
    const std::string p = path("created.db");
    int killed = 0;
    for (int n = 1;; ++n) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(p + suffix);
      const pid_t kid = fork();
      QVERIFY(kid >= 0);
      if (kid == 0) {
        kill_at_write(n);
        try {
          RunStore store = RunStore::open(p);
          const int64_t id = store.create_run({.name = "first"});
          store.append_metrics(id, {row(1, 3.0), row(2, 2.5)});
        } catch (...) {
          _exit(3);
        }
        _exit(0);
      }
      int status = 0;
      QCOMPARE(waitpid(kid, &status, 0), kid);
      if (WIFEXITED(status)) {
        QCOMPARE(WEXITSTATUS(status), 0);  // every write made: done
        break;
      }
      QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
      ++killed;
      try {
        RunStore store = RunStore::open(p);
        const auto runs = store.list_runs();
        QVERIFY(runs.size() <= 1);
        if (!runs.empty()) QCOMPARE(runs.front().status, RunStatus::interrupted);
        QVERIFY(store.create_run({.name = "next"}) > 0);
      } catch (const mok::StoreError& e) {
        QFAIL(qPrintable(QString("killed at write %1 of the store's creation: %2").arg(n).arg(e.what())));
      }
      QVERIFY2(n < 1000, "the creation never ran to its end");
    }
    QVERIFY2(killed >= 5, qPrintable(QString("only %1 writes").arg(killed)));
  }

  // Processes forked from one that had made a run uid make uids of their own. They used to
  // repeat the parent's sequence (its generator, copied by fork), so a second run recorded
  // into a shared store was refused by its unique index on runs.uid.
  void forkedProcessesMakeUidsOfTheirOwn() {
    const std::string p = path("uids.db");
    {
      RunStore store = RunStore::open(p);
      store.create_run({.name = "parent"});  // this thread's uid generator is seeded now
    }
    pid_t kids[2];
    for (pid_t& kid : kids) {
      kid = fork();
      QVERIFY(kid >= 0);
      if (kid == 0) {
        try {
          RunStore store = RunStore::open(p);
          store.create_run({.name = "child"});
        } catch (...) {
          _exit(3);
        }
        _exit(0);
      }
      QVERIFY(child_ok(kid));
    }
    RunStore store = RunStore::open(p);
    QVERIFY(store.create_run({.name = "parent again"}) > 0);
    QCOMPARE(store.list_runs().size(), size_t(4));
  }

  void liveRunsAndOtherHostsAreLeftAlone() {
    const std::string p = path("alive.db");
    int64_t mine = 0, remote = 0, reused = 0;
    {
      RunStore store = RunStore::open(p);
      mine = store.create_run({.name = "this process"});
      remote = store.create_run({.name = "on a cluster node", .host = "node-that-is-not-here-17"});
      reused = store.create_run({.name = "pid reused"});
    }
    // Same (live) pid as this process but another start time: a different process.
    raw_exec(p, "UPDATE runs SET process_start = process_start + 12345 WHERE id = " + std::to_string(reused));
    RunStore store = RunStore::open(p);
    QCOMPARE(store.get_run(mine).summary.status, RunStatus::running);
    QCOMPARE(store.get_run(remote).summary.status, RunStatus::running);
    QCOMPARE(store.get_run(reused).summary.status, RunStatus::interrupted);
    QVERIFY(store.mark_interrupted_runs().empty());
  }
};

QTEST_GUILESS_MAIN(TestStoreProcesses)
#include "test_store_processes.moc"
