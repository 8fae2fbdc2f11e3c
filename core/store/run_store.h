#pragma once
// RunStore: every run, its metrics, events, checkpoints, tags, notes and environment (the
// CPU, BLAS kernel and GPU it computed on), in one SQLite file (WAL mode, so the GUI reads
// while a trainer writes, and several processes may write).
//
//   RunStore store = RunStore::open("runs/mok.db");          // creates folders and file
//   int64_t id = store.create_run({.name = "quickstart", .config_yaml = yaml, .device = "cpu"});
//   store.append_metrics(id, row);                            // one transaction per call
//   store.set_status(id, RunStatus::finished, "done");
//   RunStore browse = RunStore::open_readonly("runs/mok.db"); // never writes or creates
//
// Safety: before anything is written, a file that is not an SQLite database, someone
// else's database, a newer schema or a damaged one (a table or column missing, a view or
// trigger) is refused with StoreError, and the file is left exactly as it was. A read-write open marks runs of this host whose process has died as
// `interrupted`. All methods are thread-safe (one mutex per store). Schema: run_store_schema.h,
// docs/run_store.md.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/events/metric_event.h"
#include "core/store/run_records.h"
#include "core/store/store_error.h"

namespace mok {

class SqliteConnection;

class RunStore {
 public:
  static RunStore open(const std::string& path);           // read-write; creates when missing
  // Browse only; the file must exist. An older schema is read as it is (never migrated):
  // what later schemas added, such as run environments, reads as not recorded.
  static RunStore open_readonly(const std::string& path);
  // Browse once, as the store is now (the one-shot `mok runs` commands): when no writer has
  // the store open, the file is read as immutable and nothing is created beside it (no -wal
  // or -shm files); while a trainer writes it, as open_readonly. A writer that starts and
  // finishes during the read may make that read fail; read again.
  static RunStore open_snapshot(const std::string& path);
  ~RunStore();
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;

  const std::string& path() const;
  bool read_only() const;
  int schema_version() const;

  // --- writing (StoreError on a read-only store) ---
  // Status running; pid/process start of this process; its environment (NewRun::environment).
  int64_t create_run(const NewRun& run);
  // One transaction for the row or batch; also updates the run's summary columns. A metric
  // logged twice at the same step keeps the later value.
  void append_metrics(int64_t run_id, const MetricRow& row);
  void append_metrics(int64_t run_id, const std::vector<MetricRow>& rows);
  void append_event(int64_t run_id, const std::string& level, const std::string& text);
  // Sets the status; a non-empty message also becomes an event. finished/stopped/failed/
  // interrupted set finished_at; running (e.g. a resume) makes this process the run's owner.
  void set_status(int64_t run_id, RunStatus status, const std::string& message = {});
  void add_checkpoint(int64_t run_id, int64_t step, const std::string& path);
  // The step's unwritten metric rows (may be empty) and its checkpoint row, in one
  // transaction, before the checkpoint becomes visible on disk: the store never lags a
  // checkpoint. Checkpoint rows of the run at `step` or later are replaced (a save that died
  // before its folder appeared, or a history the run was rewound past).
  void record_checkpoint(int64_t run_id, const std::vector<MetricRow>& rows, int64_t step, const std::string& path);
  void set_notes(int64_t run_id, const std::string& notes);
  void add_tag(int64_t run_id, const std::string& tag);
  void remove_tag(int64_t run_id, const std::string& tag);
  void archive(int64_t run_id, bool archived);
  void delete_run(int64_t run_id);  // the run and all its rows
  // For store modules that write many rows of several tables as one change (run_import.h):
  // runs `body` on the store's connection inside one write transaction, with the store's
  // lock held; an exception rolls everything back. A transaction SQLite keeps busy is rolled
  // back and tried again, so `body` may run more than once and must start afresh each time.
  void write_transaction(const std::function<void(SqliteConnection&)>& body);
  // Runs on this host in running/paused whose process is gone become interrupted (with an
  // event). Called by open(); returns the ids it changed.
  std::vector<int64_t> mark_interrupted_runs();

  // --- reading ---
  std::vector<RunSummary> list_runs(const RunFilter& filter = {});  // newest first
  std::optional<RunRecord> find_run(int64_t run_id);
  RunRecord get_run(int64_t run_id);  // StoreError when there is no such run
  std::vector<std::string> metric_names(int64_t run_id);  // sorted
  std::vector<MetricPoint> metric_series(int64_t run_id, const std::string& name);  // by step
  // Points with step > after_step, for live polling.
  std::vector<MetricPoint> metric_series_since(int64_t run_id, const std::string& name, int64_t after_step);
  int64_t metric_row_count(int64_t run_id);  // stored (step, name) values
  std::vector<RunEvent> events(int64_t run_id);
  std::vector<CheckpointRecord> checkpoints(int64_t run_id);
  // Long form: header "step,tokens,wall_s,name,value", rows ordered by step then name.
  void export_csv(int64_t run_id, std::ostream& out);
  // Changes whenever another connection commits; cheap to poll (PRAGMA data_version).
  int64_t data_version();

 private:
  struct Impl;
  explicit RunStore(std::unique_ptr<Impl> impl);
  static RunStore open_reader(const std::string& path, bool snapshot);
  std::unique_ptr<Impl> impl_;
};

// The shape columns read from an experiment config's YAML (keys missing → defaults of
// ExperimentConfig; text that is not YAML → all empty).
RunShape run_shape_from_yaml(const std::string& config_yaml);

}  // namespace mok
