// Writes the seeds of the run_store fuzz target (tests/fuzz/corpus/run_store/): small run
// stores made by the store itself, and damaged copies of one.
//
//   make_run_store_seeds DIR
//
// The stores use 512-byte pages (a VACUUM after they are filled) so that each seed is a few
// kilobytes, and every time, pid, host and uid in them is fixed, so the seeds come out the
// same on every machine but for the SQLite version in the header (bytes 96–99).
//   store.db             schema 3: two runs (one finished, with metrics, a NaN among them,
//                        validation figures, events, checkpoints, tags, notes and an
//                        environment; one running on another host), write-ahead log mode
//   store_schema1.db     schema 1 (before run environments and uids), rollback journal mode
//   store_no_runs.db     schema 3, no run
//   store_truncated_*    store.db cut at half its pages, and inside its first page
//   store_flipped_*      store.db with one byte changed: in a metric row's page, in a page
//                        of the schema table, and the page count in the header
//   regress_runs_view_never_ends.db
//                        store.db whose runs table became a view without end (every run
//                        joined with an endless recursive count): every read of the runs
//                        once ran until memory ran out
// The other regress_* seeds are inputs the fuzzer found, checked in as they were.

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"

namespace fs = std::filesystem;

namespace {

void sql(const std::string& path, const std::string& text) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("cannot open " + path);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(path + ": " + message);
}

// Fixed values for everything a store takes from the clock, the process and the machine;
// then 512-byte pages. `wal`: leave the store in write-ahead log mode, as a trainer does.
void settle(const std::string& path, bool wal) {
  sql(path,
      "UPDATE runs SET created_at = 1700000000 + id, started_at = 1700000000 + id, updated_at = 1700000500 + id,"
      " finished_at = CASE WHEN finished_at IS NULL THEN NULL ELSE 1700000900 + id END,"
      " host = CASE WHEN status = 'running' THEN 'cluster-node-7' ELSE 'seed-host' END,"
      " pid = 4242 + id, process_start = 123456, boot_id = 'seed-boot', code_version = 'seed';"
      "UPDATE events SET time = 1700000000 + id;"
      "UPDATE events SET text = 'created on ' || (SELECT host FROM runs WHERE runs.id = events.run_id) || ' (pid 4242)'"
      " WHERE text LIKE 'created on %';"
      "UPDATE checkpoints SET created_at = 1700000100 + id;"
      "UPDATE meta SET value = 'mok seed' WHERE key = 'schema_written_by';");
  sql(path, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM;");
  if (wal) sql(path, "PRAGMA journal_mode=WAL;");
}

mok::MetricRow row(int64_t step, double loss, bool with_eval) {
  mok::MetricRow r;
  r.step = step;
  r.tokens = step * 128;
  r.wall_s = 0.25 * static_cast<double>(step);
  r.values = {{"train/loss", loss}, {"train/lr", 0.003}, {"perf/tokens_per_s", 5000.0 + static_cast<double>(step)}};
  if (with_eval) r.values.insert(r.values.end(), {{"val/bpb", loss / 2}, {"val/ppl", std::exp(loss)}});
  return r;
}

void write_store(const std::string& path) {
  mok::RunStore store = mok::RunStore::open(path);
  mok::RunEnvironment env;
  env.recorded = true;
  env.cpu_model = "Seed CPU";
  env.cpu_count = 2;
  env.threads = 1;
  env.blas_library = "OpenBLAS 0.3.21";
  env.blas_kernel = "Haswell";
  const int64_t a = store.create_run({.name = "quickstart",
                                      .config_yaml = "name: quickstart\nseed: 5\nmodel: {layers: 2, d_model: 32, "
                                                     "experts: 4, top_k: 2}\nparallel: {threads: 1}\n",
                                      .host = "seed-host",
                                      .device = "cpu",
                                      .code_version = "seed",
                                      .environment = env});
  store.append_metrics(a, {row(1, 5.5, false), row(2, 5.25, true)});
  mok::MetricRow nan = row(3, std::nan(""), false);
  store.record_checkpoint(a, {nan}, 3, "runs/checkpoints/quickstart-run1/step_000003");
  store.append_metrics(a, row(4, 4.75, true));
  store.record_checkpoint(a, {}, 4, "runs/checkpoints/quickstart-run1/step_000004");
  store.append_event(a, "warning", "a warning, with a comma, and \"quotes\"");
  store.set_notes(a, "kept notes");
  store.add_tag(a, "baseline");
  store.add_tag(a, "paper");
  store.set_status(a, mok::RunStatus::finished, "done");

  mok::RunEnvironment none;
  none.recorded = false;
  const int64_t b = store.create_run({.name = "moe-8x",
                                      .config_yaml = "name: moe-8x\nrouting: {dispatcher: mok}\n",
                                      .host = "cluster-node-7",
                                      .device = "cpu",
                                      .code_version = "seed",
                                      .environment = none});
  store.append_metrics(b, row(1, 6.0, false));
  store.archive(b, true);
  // The uids are random: fixed ones instead.
  sql(path, "UPDATE runs SET uid = '00000000-0000-4000-8000-00000000000' || id;");
}

void write_schema1_store(const std::string& path) {
  sql(path, mok::run_store_migrations().front().sql);
  sql(path,
      "INSERT INTO meta(key, value) VALUES ('app', 'mok-run-store'), ('schema_written_by', 'mok 0.1.0');"
      "PRAGMA user_version = 1;"
      "INSERT INTO runs(id, name, status, created_at, config_yaml, host, device, code_version, notes, model_layers,"
      " model_d_model, last_step, last_tokens, last_wall_s, best_val_bpb) VALUES (1, 'old', 'finished', 1700000000.0,"
      " 'name: old', 'oldhost', 'cpu', 'v0.1', 'kept notes', 2, 64, 3, 300, 1.5, 2.25);"
      "INSERT INTO metric_names(id, name) VALUES (1, 'train/loss'), (2, 'val/bpb');"
      "INSERT INTO metrics(run_id, name_id, step, tokens, wall_s, value) VALUES (1, 1, 1, 100, 0.5, 3.5),"
      " (1, 1, 2, 200, 1.0, 3.25), (1, 1, 3, 300, 1.5, 3.125), (1, 2, 3, 300, 1.5, 2.25);"
      "INSERT INTO events(run_id, time, level, text) VALUES (1, 1700000000.0, 'info', 'created');"
      "INSERT INTO checkpoints(run_id, step, path, created_at) VALUES (1, 3, 'ck/step3', 1700000100.0);"
      "INSERT INTO tags(run_id, tag) VALUES (1, 'baseline');");
  settle(path, false);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

// The page number (1-based) of the root of `table`'s b-tree.
int64_t root_page(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int64_t page = 0;
  const std::string q = "SELECT rootpage FROM sqlite_master WHERE name = '" + table + "'";
  if (sqlite3_prepare_v2(db, q.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    page = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (page <= 0) throw std::runtime_error(path + ": no table " + table);
  return page;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_run_store_seeds DIR\n");
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    const fs::path work = dir / ".work";
    fs::remove_all(work);
    fs::create_directories(work);

    const std::string store = (work / "store.db").string();
    write_store(store);
    settle(store, true);
    const std::string empty = (work / "store_no_runs.db").string();
    mok::RunStore::open(empty);
    settle(empty, true);
    const std::string old = (work / "store_schema1.db").string();
    write_schema1_store(old);

    const std::string view = (work / "view.db").string();
    write_bytes(view, read_bytes(store));
    sql(view,
        "PRAGMA legacy_alter_table=ON; ALTER TABLE runs RENAME TO runs_kept;"
        "CREATE VIEW runs AS SELECT r.* FROM runs_kept r,"
        " (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n);"
        "PRAGMA journal_mode=DELETE; VACUUM; PRAGMA journal_mode=WAL;");

    const std::string good = read_bytes(store);
    const size_t page = 512;
    std::string half = good.substr(0, (good.size() / page / 2) * page);
    std::string first_page = good.substr(0, 300);
    std::string metric_page = good;
    metric_page[(root_page(store, "metrics") - 1) * page + 20] ^= 0x10;  // a byte among the rows' cells
    std::string schema_page = good;
    schema_page[page + 200] ^= 0x01;  // page 2: the schema table spans several pages
    std::string page_count = good;
    page_count[31] ^= 0x04;  // header bytes 28–31: the database size in pages

    write_bytes((dir / "store.db").string(), good);
    write_bytes((dir / "store_no_runs.db").string(), read_bytes(empty));
    write_bytes((dir / "store_schema1.db").string(), read_bytes(old));
    write_bytes((dir / "store_truncated_half.db").string(), half);
    write_bytes((dir / "store_truncated_first_page.db").string(), first_page);
    write_bytes((dir / "store_flipped_metric_page.db").string(), metric_page);
    write_bytes((dir / "store_flipped_schema_page.db").string(), schema_page);
    write_bytes((dir / "store_flipped_page_count.db").string(), page_count);
    write_bytes((dir / "regress_runs_view_never_ends.db").string(), read_bytes(view));
    fs::remove_all(work);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_run_store_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
