// Fuzz target: a run store file someone hands over — a damaged copy, a cluster's store, a
// file that only looks like one. The input bytes become the database file, which then goes
// through every way MoK opens a store:
//   1. the checked reader of `mok runs import` and the workbench's File → Open
//      (open_checked_store_reader);
//   2. a snapshot (`mok runs list|show|export-csv|compare`): every run listed, each one's
//      record, metric names and series, events, checkpoints, CSV export, and a comparison;
//   3. an import of every run into a fresh store, when the checked reader accepted the file,
//      and a second import that must copy nothing;
//   4. a read-only open (the workbench's pages), with the same reads;
//   5. the read-write open of `mok train` (RunStore::open), with the same reads.
// Each step ends in a StoreError naming the file, or in data (a run listed can be read); any
// other exception, a crash or a hang fails. No step but a successful read-write open changes
// a byte of the file. Steps 1–3 create nothing beside it (no -wal, -shm or -journal file),
// and neither does a read-write open that refuses the file.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/checked_store_reader.h"
#include "core/store/run_comparison.h"
#include "core/store/run_import.h"
#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "core/store/store_error.h"
#include "tests/fuzz/fuzz_require.h"

namespace {

namespace fs = std::filesystem;
using mok::fuzz::fuzz_require;

// A folder of this process's own for the database file, removed at exit.
struct ScratchFolder {
  fs::path dir;
  ScratchFolder() {
    dir = fs::temp_directory_path() / ("mok-fuzz-run-store-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~ScratchFolder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files SQLite may put beside a database.
const char* const kBeside[] = {"-wal", "-shm", "-journal"};

void require_untouched(const std::string& path, const std::string& bytes, const std::string& by) {
  fuzz_require(read_bytes(path) == bytes, by + " changed the file's bytes");
  for (const char* suffix : kBeside) fuzz_require(!fs::exists(path + suffix), by + " left a " + suffix + " file beside it");
}

// MOK_FUZZ_SHOW_ERRORS=1 prints every error a step ends in, to judge their wording.
void require_names_file(const mok::StoreError& e, const std::string& path, const std::string& by) {
  const std::string what = e.what();
  static const bool show = std::getenv("MOK_FUZZ_SHOW_ERRORS") != nullptr;
  if (show) std::fprintf(stderr, "%s: %s\n", by.c_str(), what.c_str());
  fuzz_require(what.find(path) != std::string::npos, by + ": the error names the file: " + what);
}

// Everything the CLI and the workbench read of a store. A run that is listed can be read.
void read_everything(mok::RunStore& store) {
  mok::RunFilter all;
  all.include_archived = true;
  const std::vector<mok::RunSummary> runs = store.list_runs(all);
  store.list_runs();
  mok::RunFilter text;
  text.text = "a";
  text.status = mok::RunStatus::finished;
  store.list_runs(text);
  std::vector<int64_t> ids;
  std::vector<std::string> names;
  for (const mok::RunSummary& r : runs) {
    const mok::RunRecord rec = store.get_run(r.id);
    fuzz_require(rec.summary.id == r.id, "the record of run " + std::to_string(r.id) + " is that run's");
    ids.push_back(r.id);
    for (const std::string& name : store.metric_names(r.id)) {
      const std::vector<mok::MetricPoint> series = store.metric_series(r.id, name);
      if (!series.empty()) store.metric_series_since(r.id, name, series.front().step);
      names.push_back(name);
    }
    store.metric_row_count(r.id);
    store.events(r.id);
    store.checkpoints(r.id);
    std::ostringstream csv;
    store.export_csv(r.id, csv);
    fuzz_require(csv.str().rfind("step,tokens,wall_s,name,value\n", 0) == 0, "the CSV export starts with its header");
    if (ids.size() >= 8) break;  // a long list only repeats the same reads
  }
  if (!ids.empty()) {
    if (names.size() > 8) names.resize(8);
    const mok::RunComparison c = mok::compare_runs(store, ids, names, 1);
    fuzz_require(c.figure.size() == ids.size() && c.ratio.size() == ids.size(), "one comparison row per run");
  }
  store.data_version();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFolder scratch;
  const std::string path = (scratch.dir / "fuzz.db").string();
  for (const char* suffix : kBeside) fs::remove(path + suffix);
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fuzz_require(static_cast<bool>(out.flush()), "the input could be written to " + path);
  }

  // 1. The checked reader: refused, or a store every later open accepts too.
  bool checked = false;
  try {
    mok::CheckedStoreReader reader = mok::open_checked_store_reader(path);
    fuzz_require(reader.version >= 1 && reader.version <= mok::kRunStoreSchemaVersion, "a schema this build reads");
    checked = true;
  } catch (const mok::StoreError& e) {
    require_names_file(e, path, "the checked reader");
  }
  require_untouched(path, bytes, "the checked reader");

  // 2. A snapshot (the one-shot `mok runs` commands).
  try {
    mok::RunStore store = mok::RunStore::open_snapshot(path);
    read_everything(store);
  } catch (const mok::StoreError& e) {
    require_names_file(e, path, "a snapshot");
  }
  require_untouched(path, bytes, "a snapshot");

  // 3. An import of every run into a fresh store (in memory: only the source matters here).
  if (checked) {
    try {
      mok::RunStore destination = mok::RunStore::open(":memory:");
      const mok::RunImportResult result = mok::import_runs(destination, path);
      fuzz_require(result.skipped.empty() || !result.imported.empty(), "an empty store skips nothing");
      mok::RunFilter all;
      all.include_archived = true;
      fuzz_require(destination.list_runs(all).size() == result.imported.size(),
                   "every imported run is in the destination");
      for (const mok::ImportedRun& run : result.imported)
        fuzz_require(destination.metric_row_count(run.id) == run.metric_values, "an imported run has its metric rows");
      // Importing again brings nothing new.
      const mok::RunImportResult again = mok::import_runs(destination, path);
      fuzz_require(again.imported.empty(), "a second import of the same file copies nothing");
      read_everything(destination);
    } catch (const mok::StoreError& e) {
      require_names_file(e, path, "an import");
    }
    require_untouched(path, bytes, "an import");
  }

  // 4. A read-only open (the workbench's pages). In a folder it may write, it is a live
  // connection that sees a trainer's commits; SQLite may leave its -wal and -shm files
  // beside a store in write-ahead log mode (empty; a writer's next open removes them).
  try {
    mok::RunStore store = mok::RunStore::open_readonly(path);
    read_everything(store);
  } catch (const mok::StoreError& e) {
    require_names_file(e, path, "a read-only open");
  }
  fuzz_require(read_bytes(path) == bytes, "a read-only open changed the file's bytes");
  std::vector<std::string> beside;
  for (const char* suffix : kBeside)
    if (fs::exists(path + suffix)) beside.push_back(suffix);

  // 5. The read-write open of a trainer. Refusing the file leaves it as it was.
  std::optional<mok::RunStore> writable;
  try {
    writable.emplace(mok::RunStore::open(path));
    fuzz_require(!writable->read_only(), "a read-write open");
  } catch (const mok::StoreError& e) {
    require_names_file(e, path, "a read-write open");
    fuzz_require(read_bytes(path) == bytes, "a refusing read-write open changed the file's bytes");
    for (const char* suffix : kBeside)
      fuzz_require(fs::exists(path + suffix) == (std::find(beside.begin(), beside.end(), suffix) != beside.end()),
                   std::string("a refusing read-write open left a ") + suffix + " file beside it");
  }
  if (writable) {
    try {
      read_everything(*writable);
    } catch (const mok::StoreError& e) {
      require_names_file(e, path, "reading a store opened read-write");
    }
  }
  return 0;
}
