#pragma once
// Bringing runs home: copies runs with every row they own (config, notes, metrics, events,
// checkpoint paths, tags, environment) from another run store, a cluster's say, into this one.
//
//   RunStore local = RunStore::open("runs/mok.db");
//   RunImportResult all = import_runs(local, "cluster.db");        // every run of cluster.db
//   RunImportResult one = import_runs(local, "cluster.db", {12});  // its run 12 only
//
// To refuse a bad source before the destination is even created, open the source first:
//   CheckedStoreReader source = open_import_source("cluster.db", "runs/mok.db");
//   RunStore local = RunStore::open("runs/mok.db");
//   import_runs(local, source);
//
// The source passes the checks a writer makes (checked_store_reader.h) and is never
// written. Everything is copied in one transaction on the destination, so a failure part way
// leaves it as it was. A copy gets a new id here and keeps its uid (run_uid.h): a run whose uid
// the destination holds already is skipped, so importing again copies only what is new. A
// copy records where it came from (RunRecord::imported_from, imported_run_id, imported_at).
// Checkpoint paths are copied as the source recorded them.

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/checked_store_reader.h"

namespace mok {

class RunStore;

struct ImportedRun {
  int64_t source_id = 0;  // the run's id in the source
  int64_t id = 0;         // its id here: the new copy's, or for a skipped run the copy already here
  std::string name;
  // Rows copied (0 for a skipped run).
  int64_t metric_values = 0;
  int64_t events = 0;
  int64_t checkpoints = 0;
  // For a skipped run: the source's has moved on since it was copied (another status or last
  // step), e.g. it was imported while still training. The copy here is not updated.
  bool changed_at_source = false;
};

struct RunImportResult {
  std::string source;                 // the source's path as given
  std::vector<ImportedRun> imported;  // in the source's id order
  std::vector<ImportedRun> skipped;   // already in the destination
};

// The source, checked (open_checked_store_reader); StoreError when it is refused: missing, not
// an SQLite database, someone else's, of a newer schema, damaged, or the destination itself
// (which may not exist yet).
CheckedStoreReader open_import_source(const std::string& source_path, const std::string& destination_path);

// `run_ids`: the source runs to import (every run when empty; repeats count once). Throws
// StoreError, with the destination unchanged, when a run id is not in the source or a row
// cannot be copied.
RunImportResult import_runs(RunStore& destination, CheckedStoreReader& source,
                            const std::vector<int64_t>& run_ids = {});
// open_import_source, then the import.
RunImportResult import_runs(RunStore& destination, const std::string& source_path,
                            const std::vector<int64_t>& run_ids = {});

}  // namespace mok
