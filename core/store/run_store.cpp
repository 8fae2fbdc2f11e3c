#include "core/store/run_store.h"
#include "core/util/code_version.h"

#include <sqlite3.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <ostream>
#include <thread>
#include <unordered_map>

#include "core/config/experiment_config.h"
#include "core/store/csv_field.h"
#include "core/store/process_identity.h"
#include "core/store/run_store_schema.h"
#include "core/store/run_uid.h"
#include "core/store/sqlite_connection.h"
#include "core/store/store_integrity.h"
#include "core/store/store_location.h"

namespace mok {
namespace {

constexpr int kBusyTimeoutMs = 10000;  // SQLite waits this long for a lock on its own
constexpr int kBusyRetries = 5;        // then the whole transaction is retried this often

double now_s() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool is_terminal(RunStatus s) {
  return s == RunStatus::finished || s == RunStatus::stopped || s == RunStatus::failed ||
         s == RunStatus::interrupted;
}

RunStatus status_from_text(const std::string& text) {
  RunStatus s = RunStatus::interrupted;
  parse_run_status(text, &s);
  return s;
}

std::string like_pattern(const std::string& text) {
  std::string p = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') p += '\\';
    p += c;
  }
  return p + "%";
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The columns every summary query selects, in this order (see read_summary_row).
constexpr const char* kSummaryColumns =
    "r.id, r.name, r.status, r.created_at, r.finished_at, r.model_layers, r.model_d_model, "
    "r.model_experts, r.model_top_k, r.dispatcher, r.policy, r.kittens_mode, r.last_step, "
    "r.last_tokens, r.last_wall_s, r.best_val_bpb, r.best_val_ppl, r.peak_bytes, r.archived, "
    "r.host, r.pid, r.process_start, r.boot_id";
constexpr int kSummaryColumnCount = 23;

}  // namespace

struct RunStore::Impl {
  std::string path;
  bool read_only = false;
  int version = 0;
  std::unique_ptr<SqliteConnection> db;
  ProcessIdentity me = current_process_identity();
  std::unordered_map<std::string, int64_t> name_ids;  // metric name → id, committed ones only
  std::mutex mu;

  void require_writable() const {
    if (read_only) throw StoreError(path + " was opened read-only; this change needs a read-write store");
  }

  // Runs `body` inside BEGIN IMMEDIATE … COMMIT. SQLite waits kBusyTimeoutMs for the write
  // lock itself; if it is still busy the transaction is rolled back and tried again.
  template <class F>
  void write_txn(F&& body) {
    require_writable();
    for (int attempt = 0;; ++attempt) {
      try {
        db->exec("BEGIN IMMEDIATE");
        body();
        db->exec("COMMIT");
        return;
      } catch (const StoreBusyError& e) {
        db->rollback_quietly();
        if (attempt + 1 >= kBusyRetries) {
          throw StoreBusyError(path + " stayed locked by another process (" + e.what() + ")");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50 * (attempt + 1)));
      } catch (...) {
        db->rollback_quietly();
        throw;
      }
    }
  }

  void require_run(int64_t run_id) {
    SqliteStatement st = db->prepare("SELECT 1 FROM runs WHERE id = ?1");
    st.bind(1, run_id);
    if (!st.step()) throw StoreError("run " + std::to_string(run_id) + " does not exist in " + path);
  }

  void insert_event(int64_t run_id, const std::string& level, const std::string& text) {
    SqliteStatement st = db->prepare("INSERT INTO events(run_id, time, level, text) VALUES (?1, ?2, ?3, ?4)");
    st.bind(1, run_id).bind(2, now_s()).bind(3, level).bind(4, text).run();
  }

  // The environments row of a run: cpu_count, threads, then the text fields in
  // environment_text_fields() order.
  static std::string environment_columns() {
    std::string cols = "cpu_count, threads";
    for (const EnvironmentTextField& f : environment_text_fields()) cols += std::string(", ") + f.key;
    return cols;
  }

  void insert_environment(int64_t run_id, const RunEnvironment& env) {
    const auto& fields = environment_text_fields();
    std::string values = "?1, ?2, ?3";
    for (size_t i = 0; i < fields.size(); ++i) values += ", ?" + std::to_string(i + 4);
    SqliteStatement st =
        db->prepare("INSERT INTO environments(run_id, " + environment_columns() + ") VALUES (" + values + ")");
    st.bind(1, run_id).bind(2, env.cpu_count).bind(3, env.threads);
    for (size_t i = 0; i < fields.size(); ++i) st.bind(static_cast<int>(i + 4), env.*fields[i].member);
    st.run();
  }

  // Not recorded when the schema predates environments or the run has no row.
  RunEnvironment read_environment(int64_t run_id) {
    RunEnvironment env;
    if (version < 2) return env;
    SqliteStatement st = db->prepare("SELECT " + environment_columns() + " FROM environments WHERE run_id = ?1");
    st.bind(1, run_id);
    if (!st.step()) return env;
    env.recorded = true;
    env.cpu_count = static_cast<int>(st.int64(0));
    env.threads = static_cast<int>(st.int64(1));
    const auto& fields = environment_text_fields();
    for (size_t i = 0; i < fields.size(); ++i) env.*fields[i].member = st.text(static_cast<int>(i + 2));
    return env;
  }

  // The run's uid and where it was imported from; empty for a store before schema 3.
  void read_origin(int64_t run_id, RunRecord& rec) {
    if (version < 3) return;
    SqliteStatement st =
        db->prepare("SELECT uid, imported_from, imported_run_id, imported_at FROM runs WHERE id = ?1");
    st.bind(1, run_id);
    if (!st.step()) return;
    rec.uid = st.text(0);
    rec.imported_from = st.text(1);
    rec.imported_run_id = st.is_null(2) ? 0 : st.int64(2);
    rec.imported_at = st.is_null(3) ? 0 : st.real(3);
  }

  // Metric name id, inserting the name when new. `pending` collects ids created in the open
  // transaction; they join the cache only after COMMIT.
  int64_t name_id(const std::string& name, std::unordered_map<std::string, int64_t>& pending) {
    if (auto it = name_ids.find(name); it != name_ids.end()) return it->second;
    if (auto it = pending.find(name); it != pending.end()) return it->second;
    {
      SqliteStatement ins = db->prepare("INSERT OR IGNORE INTO metric_names(name) VALUES (?1)");
      ins.bind(1, name).run();
    }
    SqliteStatement sel = db->prepare("SELECT id FROM metric_names WHERE name = ?1");
    sel.bind(1, name);
    if (!sel.step()) throw StoreError(path + ": metric name '" + name + "' could not be stored");
    const int64_t id = sel.int64(0);
    pending.emplace(name, id);
    return id;
  }

  // The metric rows and the run's summary columns; inside an open write transaction.
  void insert_metrics(int64_t run_id, const std::vector<MetricRow>& rows,
                      std::unordered_map<std::string, int64_t>& pending) {
    // Summary of the batch, folded into the run's summary columns.
    const MetricRow* last = &rows.front();
    double best_bpb = kNoValue, best_ppl = kNoValue, peak = kNoValue;
    for (const MetricRow& r : rows) {
      if (r.step >= last->step) last = &r;
      for (const MetricValue& v : r.values) {
        if (std::isnan(v.value)) continue;
        if (v.name == "val/bpb" && !(v.value >= best_bpb)) best_bpb = v.value;
        if (v.name == "val/ppl" && !(v.value >= best_ppl)) best_ppl = v.value;
        if (v.name == "mem/peak_bytes" && !(v.value <= peak)) peak = v.value;
      }
    }
    for (const MetricRow& r : rows) {
      for (const MetricValue& v : r.values) {
        const int64_t nid = name_id(v.name, pending);
        SqliteStatement st = db->prepare(
            "INSERT OR REPLACE INTO metrics(run_id, name_id, step, tokens, wall_s, value) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        st.bind(1, run_id).bind(2, nid).bind(3, r.step).bind(4, r.tokens).bind(5, r.wall_s).bind(6, v.value);
        st.run();
      }
    }
    SqliteStatement up = db->prepare(
        "UPDATE runs SET "
        " last_tokens = CASE WHEN last_step IS NULL OR ?2 >= last_step THEN ?3 ELSE last_tokens END,"
        " last_wall_s = CASE WHEN last_step IS NULL OR ?2 >= last_step THEN ?4 ELSE last_wall_s END,"
        " last_step = CASE WHEN last_step IS NULL OR ?2 >= last_step THEN ?2 ELSE last_step END,"
        " best_val_bpb = CASE WHEN ?5 IS NULL THEN best_val_bpb WHEN best_val_bpb IS NULL THEN ?5"
        "                     ELSE min(best_val_bpb, ?5) END,"
        " best_val_ppl = CASE WHEN ?6 IS NULL THEN best_val_ppl WHEN best_val_ppl IS NULL THEN ?6"
        "                     ELSE min(best_val_ppl, ?6) END,"
        " peak_bytes = CASE WHEN ?7 IS NULL THEN peak_bytes WHEN peak_bytes IS NULL THEN ?7"
        "                   ELSE max(peak_bytes, ?7) END,"
        " updated_at = ?8 WHERE id = ?1");
    up.bind(1, run_id).bind(2, last->step).bind(3, last->tokens).bind(4, last->wall_s);
    up.bind(5, best_bpb).bind(6, best_ppl).bind(7, peak).bind(8, now_s());
    up.run();
  }

  // In a read-only store nothing is written, so a run whose process died still says
  // running; report it as interrupted anyway (what a read-write open would record).
  RunStatus effective_status(RunStatus stored, const std::string& host, int64_t pid, int64_t start,
                             const std::string& boot) const {
    if (!read_only) return stored;
    if (stored != RunStatus::running && stored != RunStatus::paused) return stored;
    if (host != me.host) return stored;
    return process_is_alive({host, pid, start, boot}) ? stored : RunStatus::interrupted;
  }

  RunSummary read_summary_row(SqliteStatement& st) {
    RunSummary s;
    s.id = st.int64(0);
    s.name = st.text(1);
    s.created_at = st.real(3);
    s.finished_at = st.is_null(4) ? 0 : st.real(4);
    s.shape.layers = static_cast<int>(st.int64(5));
    s.shape.d_model = static_cast<int>(st.int64(6));
    s.shape.experts = static_cast<int>(st.int64(7));
    s.shape.top_k = static_cast<int>(st.int64(8));
    s.shape.dispatcher = st.text(9);
    s.shape.policy = st.text(10);
    s.shape.kittens = st.text(11);
    s.last_step = st.is_null(12) ? -1 : st.int64(12);
    s.tokens = st.int64(13);
    s.wall_s = st.is_null(14) ? 0 : st.real(14);
    s.best_val_bpb = st.real(15);
    s.best_val_ppl = st.real(16);
    s.peak_bytes = st.real(17);
    s.archived = st.int64(18) != 0;
    s.status = effective_status(status_from_text(st.text(2)), st.text(19), st.int64(20), st.int64(21), st.text(22));
    return s;
  }

  void fill_tags_and_speed(RunSummary& s) {
    {
      SqliteStatement st = db->prepare("SELECT tag FROM tags WHERE run_id = ?1 ORDER BY tag");
      st.bind(1, s.id);
      while (st.step()) s.tags.push_back(st.text(0));
    }
    SqliteStatement st = db->prepare(
        "SELECT m.value FROM metrics m JOIN metric_names n ON n.id = m.name_id "
        "WHERE m.run_id = ?1 AND n.name = 'perf/tokens_per_s' AND m.value IS NOT NULL ORDER BY m.value");
    st.bind(1, s.id);
    std::vector<double> v;
    while (st.step()) v.push_back(st.real(0));
    if (!v.empty()) {
      const size_t n = v.size();
      s.tokens_per_s = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
  }

  std::vector<MetricPoint> series(int64_t run_id, const std::string& name, int64_t after_step) {
    SqliteStatement st = db->prepare(
        "SELECT m.step, m.tokens, m.wall_s, m.value FROM metrics m "
        "WHERE m.run_id = ?1 AND m.name_id = (SELECT id FROM metric_names WHERE name = ?2) "
        "AND m.step > ?3 ORDER BY m.step");
    st.bind(1, run_id).bind(2, name).bind(3, after_step);
    std::vector<MetricPoint> out;
    while (st.step()) out.push_back({st.int64(0), st.int64(1), st.real(2), st.real(3)});
    return out;
  }
};

RunStore::RunStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunStore::~RunStore() = default;
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;

const std::string& RunStore::path() const { return impl_->path; }
bool RunStore::read_only() const { return impl_->read_only; }
int RunStore::schema_version() const { return impl_->version; }

RunStore RunStore::open(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw StoreError("no run store path given");
  std::error_code ec;
  if (fs::exists(path, ec)) {
    check_run_store_header(path);
    if (fs::file_size(path, ec) > 0) {
      // Look before writing anything: a foreign or newer database must stay untouched.
      // Immutable when no writer has the store open, so that a refused file gets no -wal
      // and -shm files beside it either.
      const bool no_writer = !fs::exists(path + "-wal", ec);
      SqliteConnection probe(path, SQLITE_OPEN_READONLY | (no_writer ? SQLITE_OPEN_URI : 0),
                             no_writer ? immutable_uri(path) : std::string());
      sqlite3_busy_timeout(probe.handle(), kBusyTimeoutMs);
      const StoreInspection found = inspect_run_store(probe);
      check_run_store_usable(found, path);
      if (found.kind == StoreInspection::Kind::ours) check_run_store_intact(probe, path);
    }
  } else {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec) throw StoreError(path + ": cannot create the folder " + parent.string() + ": " + ec.message());
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->db = std::make_unique<SqliteConnection>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  SqliteConnection& db = *impl->db;
  // SQLite quietly opens a file it may not write read-only; a writer must know now, not
  // after a run has trained with nowhere to record it.
  if (sqlite3_db_readonly(db.handle(), "main") == 1) {
    throw StoreError(path + " cannot be written (" + why_not_writable(path) + "); it was left unchanged");
  }
  sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    try {
      // WAL: readers never block the writer; a commit is durable against process death.
      // Before the schema is created: a process killed while creating the store then leaves
      // an uncommitted log that the next open ignores, not half a schema in the file itself
      // with a rollback journal beside it (which the checks above read past, immutable,
      // refusing the store as damaged).
      db.query_text("PRAGMA journal_mode=WAL");
      migrate_run_store(db);
      break;
    } catch (const StoreBusyError&) {
      if (attempt + 1 >= kBusyRetries) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (const StoreError& e) {
      if (!folder_is_writable(path)) {
        throw StoreError(path + " cannot be written (" + why_not_writable(path) + "): " + e.what());
      }
      throw;
    }
  }
  db.exec("PRAGMA synchronous=NORMAL");
  db.exec("PRAGMA foreign_keys=ON");
  impl->version = static_cast<int>(db.query_int("PRAGMA user_version"));
  RunStore store(std::move(impl));
  store.mark_interrupted_runs();
  return store;
}

RunStore RunStore::open_readonly(const std::string& path) { return open_reader(path, false); }

RunStore RunStore::open_snapshot(const std::string& path) { return open_reader(path, true); }

RunStore RunStore::open_reader(const std::string& path, bool snapshot) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw StoreError("no run store path given");
  if (!fs::exists(path, ec)) throw StoreError(path + " does not exist (no run store there)");
  check_run_store_header(path);
  if (fs::file_size(path, ec) == 0) throw StoreError(path + " is an empty file, not a MoK run store");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = true;
  // Without a write-ahead log beside it no writer has the store open. Then a snapshot, or
  // any read where no writer could start (a read-only folder or medium), reads the file as
  // immutable: SQLite creates no -wal and -shm files beside it, which it could not on
  // read-only media and would leave behind elsewhere. Otherwise a live read-only
  // connection sees what a running trainer commits.
  const bool no_writer = !fs::exists(path + "-wal", ec);
  const bool immutable = no_writer && (snapshot || !folder_is_writable(path));
  if (immutable) {
    impl->db = std::make_unique<SqliteConnection>(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, immutable_uri(path));
  } else {
    impl->db = std::make_unique<SqliteConnection>(path, SQLITE_OPEN_READONLY);
  }
  SqliteConnection& db = *impl->db;
  sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs);
  const StoreInspection found = inspect_run_store(db);
  check_run_store_usable(found, path);
  if (found.kind == StoreInspection::Kind::empty) {
    throw StoreError(path + " is an empty SQLite database, not a MoK run store");
  }
  // An older schema is read as it is (a read-only open never migrates); what later schemas
  // added reads as not recorded (see find_run).
  if (found.version < 1) throw StoreError(path + " has no schema version; it is not a usable MoK run store");
  db.exec("PRAGMA query_only=1");
  impl->version = found.version;
  return RunStore(std::move(impl));
}

RunShape run_shape_from_yaml(const std::string& config_yaml) {
  RunShape shape;
  if (trimmed(config_yaml).empty()) return shape;
  try {
    const YAML::Node root = YAML::Load(config_yaml);
    if (!root.IsMap()) return shape;
    const ModelConfig m;
    const RoutingConfig r;
    const KittensConfig k;
    // section.key when both exist, else the default (indexing a missing node throws).
    auto get = [&root](const char* section, const char* key, auto fallback) {
      const YAML::Node sec = root[section];
      if (!sec.IsDefined() || !sec.IsMap()) return fallback;
      const YAML::Node v = sec[key];
      return v.IsDefined() && v.IsScalar() ? v.as<decltype(fallback)>() : fallback;
    };
    shape.layers = get("model", "layers", m.layers);
    shape.d_model = get("model", "d_model", m.d_model);
    shape.experts = get("model", "experts", m.experts);
    shape.top_k = get("model", "top_k", m.top_k);
    shape.dispatcher = get("routing", "dispatcher", r.dispatcher);
    shape.policy = get("routing", "policy", r.policy);
    shape.kittens = get("kittens", "mode", k.mode);
  } catch (const std::exception&) {
    return RunShape{};
  }
  return shape;
}

namespace {

// parallel.threads of a config (its default when the key is missing; 0 when the text is
// empty or not YAML), recorded with the run's environment.
int threads_from_yaml(const std::string& config_yaml) {
  if (trimmed(config_yaml).empty()) return 0;
  try {
    const YAML::Node root = YAML::Load(config_yaml);
    if (!root.IsMap()) return 0;
    const YAML::Node parallel = root["parallel"];
    if (!parallel.IsDefined() || !parallel.IsMap()) return ParallelConfig{}.threads;
    const YAML::Node threads = parallel["threads"];
    return threads.IsDefined() && threads.IsScalar() ? threads.as<int>() : ParallelConfig{}.threads;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

int64_t RunStore::create_run(const NewRun& run) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  const RunShape shape = run_shape_from_yaml(run.config_yaml);
  const std::string host = run.host.empty() ? s.me.host : run.host;
  const std::string code = run.code_version.empty() ? std::string(mok::code_version()) : run.code_version;
  RunEnvironment env = run.environment ? *run.environment : probe_run_environment();
  if (env.threads == 0) env.threads = threads_from_yaml(run.config_yaml);
  int64_t id = 0;
  s.write_txn([&] {
    const double t = now_s();
    SqliteStatement st = s.db->prepare(
        "INSERT INTO runs(name, status, created_at, started_at, updated_at, config_yaml, host, device, "
        "code_version, pid, process_start, boot_id, model_layers, model_d_model, model_experts, "
        "model_top_k, dispatcher, policy, kittens_mode, uid) "
        "VALUES (?1, 'running', ?2, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
    st.bind(1, run.name).bind(2, t).bind(3, run.config_yaml).bind(4, host).bind(5, run.device).bind(6, code);
    st.bind(7, s.me.pid).bind(8, s.me.start_ticks).bind(9, s.me.boot_id);
    st.bind(10, shape.layers).bind(11, shape.d_model).bind(12, shape.experts).bind(13, shape.top_k);
    st.bind(14, shape.dispatcher).bind(15, shape.policy).bind(16, shape.kittens).bind(17, new_run_uid());
    st.run();
    id = s.db->last_insert_id();
    if (env.recorded) s.insert_environment(id, env);
    s.insert_event(id, "info", "created on " + host + " (pid " + std::to_string(s.me.pid) + ")");
  });
  return id;
}

void RunStore::append_metrics(int64_t run_id, const MetricRow& row) {
  append_metrics(run_id, std::vector<MetricRow>{row});
}

void RunStore::append_metrics(int64_t run_id, const std::vector<MetricRow>& rows) {
  if (rows.empty()) return;
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  std::unordered_map<std::string, int64_t> pending;
  s.write_txn([&] {
    pending.clear();
    s.require_run(run_id);
    s.insert_metrics(run_id, rows, pending);
  });
  s.name_ids.insert(pending.begin(), pending.end());
}

void RunStore::record_checkpoint(int64_t run_id, const std::vector<MetricRow>& rows, int64_t step,
                                 const std::string& path) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  std::unordered_map<std::string, int64_t> pending;
  s.write_txn([&] {
    pending.clear();
    s.require_run(run_id);
    if (!rows.empty()) s.insert_metrics(run_id, rows, pending);
    s.db->prepare("DELETE FROM checkpoints WHERE run_id = ?1 AND step >= ?2").bind(1, run_id).bind(2, step).run();
    SqliteStatement st =
        s.db->prepare("INSERT INTO checkpoints(run_id, step, path, created_at) VALUES (?1, ?2, ?3, ?4)");
    st.bind(1, run_id).bind(2, step).bind(3, path).bind(4, now_s()).run();
  });
  s.name_ids.insert(pending.begin(), pending.end());
}

void RunStore::append_event(int64_t run_id, const std::string& level, const std::string& text) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    s.insert_event(run_id, level.empty() ? "info" : level, text);
  });
}

void RunStore::set_status(int64_t run_id, RunStatus status, const std::string& message) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    const double t = now_s();
    if (status == RunStatus::running) {
      // Running (again): this process owns the run now, so a later open checks this pid.
      SqliteStatement st = s.db->prepare(
          "UPDATE runs SET status = 'running', status_message = ?2, updated_at = ?3, finished_at = NULL,"
          " started_at = coalesce(started_at, ?3), host = ?4, pid = ?5, process_start = ?6, boot_id = ?7"
          " WHERE id = ?1");
      st.bind(1, run_id).bind(2, message).bind(3, t).bind(4, s.me.host).bind(5, s.me.pid);
      st.bind(6, s.me.start_ticks).bind(7, s.me.boot_id).run();
    } else {
      SqliteStatement st = s.db->prepare(
          "UPDATE runs SET status = ?2, status_message = ?3, updated_at = ?4,"
          " finished_at = CASE WHEN ?5 THEN ?4 ELSE finished_at END WHERE id = ?1");
      st.bind(1, run_id).bind(2, run_status_name(status)).bind(3, message).bind(4, t);
      st.bind(5, is_terminal(status) ? 1 : 0).run();
    }
    const char* level = status == RunStatus::failed        ? "error"
                        : status == RunStatus::interrupted ? "warning"
                                                           : "info";
    std::string text = std::string("status: ") + run_status_name(status);
    if (!message.empty()) text += " (" + message + ")";
    s.insert_event(run_id, level, text);
  });
}

void RunStore::add_checkpoint(int64_t run_id, int64_t step, const std::string& path) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    SqliteStatement st =
        s.db->prepare("INSERT INTO checkpoints(run_id, step, path, created_at) VALUES (?1, ?2, ?3, ?4)");
    st.bind(1, run_id).bind(2, step).bind(3, path).bind(4, now_s()).run();
  });
}

void RunStore::set_notes(int64_t run_id, const std::string& notes) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    SqliteStatement st = s.db->prepare("UPDATE runs SET notes = ?2 WHERE id = ?1");
    st.bind(1, run_id).bind(2, notes).run();
  });
}

void RunStore::add_tag(int64_t run_id, const std::string& tag) {
  const std::string t = trimmed(tag);
  if (t.empty()) throw StoreError("a tag must not be empty");
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    SqliteStatement st = s.db->prepare("INSERT OR IGNORE INTO tags(run_id, tag) VALUES (?1, ?2)");
    st.bind(1, run_id).bind(2, t).run();
  });
}

void RunStore::remove_tag(int64_t run_id, const std::string& tag) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    SqliteStatement st = s.db->prepare("DELETE FROM tags WHERE run_id = ?1 AND tag = ?2");
    st.bind(1, run_id).bind(2, trimmed(tag)).run();
  });
}

void RunStore::archive(int64_t run_id, bool archived) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    SqliteStatement st = s.db->prepare("UPDATE runs SET archived = ?2 WHERE id = ?1");
    st.bind(1, run_id).bind(2, archived ? 1 : 0).run();
  });
}

void RunStore::delete_run(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] {
    s.require_run(run_id);
    for (const std::string& table : per_run_tables()) {
      s.db->prepare("DELETE FROM " + table + " WHERE run_id = ?1").bind(1, run_id).run();
    }
    s.db->prepare("DELETE FROM runs WHERE id = ?1").bind(1, run_id).run();
  });
}

std::vector<int64_t> RunStore::mark_interrupted_runs() {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  if (s.read_only) return {};
  struct Candidate {
    int64_t id;
    ProcessIdentity who;
    int64_t last_step;
  };
  std::vector<Candidate> dead;
  {
    SqliteStatement st = s.db->prepare(
        "SELECT id, pid, process_start, boot_id, coalesce(last_step, -1) FROM runs "
        "WHERE status IN ('running', 'paused') AND host = ?1");
    st.bind(1, s.me.host);
    while (st.step()) {
      Candidate c{st.int64(0), {s.me.host, st.int64(1), st.int64(2), st.text(3)}, st.int64(4)};
      if (!process_is_alive(c.who)) dead.push_back(c);
    }
  }
  std::vector<int64_t> changed;
  for (const Candidate& c : dead) {
    s.write_txn([&] {
      const std::string msg = "process " + std::to_string(c.who.pid) + " on " + c.who.host +
                              " ended without finishing the run" +
                              (c.last_step >= 0 ? " (last metrics at step " + std::to_string(c.last_step) + ")" : "");
      SqliteStatement st = s.db->prepare(
          "UPDATE runs SET status = 'interrupted', status_message = ?2, finished_at = coalesce(updated_at, ?3) "
          "WHERE id = ?1 AND status IN ('running', 'paused')");
      st.bind(1, c.id).bind(2, msg).bind(3, now_s()).run();
      if (s.db->changes() > 0) {
        s.insert_event(c.id, "warning", "status: interrupted (" + msg + ")");
        changed.push_back(c.id);
      }
    });
  }
  return changed;
}

std::vector<RunSummary> RunStore::list_runs(const RunFilter& filter) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  const std::string text = trimmed(filter.text);
  SqliteStatement st = s.db->prepare(
      std::string("SELECT ") + kSummaryColumns +
      " FROM runs r WHERE (?1 OR r.archived = 0) AND (?2 = '' OR r.name LIKE ?3 ESCAPE '\\'"
      " OR r.notes LIKE ?3 ESCAPE '\\' OR r.host LIKE ?3 ESCAPE '\\' OR r.device LIKE ?3 ESCAPE '\\'"
      " OR r.dispatcher LIKE ?3 ESCAPE '\\' OR r.policy LIKE ?3 ESCAPE '\\' OR CAST(r.id AS TEXT) = ?2"
      " OR EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.tag LIKE ?3 ESCAPE '\\'))"
      " ORDER BY r.id DESC");
  st.bind(1, filter.include_archived ? 1 : 0).bind(2, text).bind(3, like_pattern(text));
  std::vector<RunSummary> out;
  while (st.step()) {
    RunSummary r = s.read_summary_row(st);
    if (filter.status && r.status != *filter.status) continue;
    out.push_back(std::move(r));
  }
  for (RunSummary& r : out) s.fill_tags_and_speed(r);
  return out;
}

std::optional<RunRecord> RunStore::find_run(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  SqliteStatement st = s.db->prepare(
      std::string("SELECT ") + kSummaryColumns +
      ", r.status_message, r.started_at, r.updated_at, r.config_yaml, r.device, r.code_version, r.notes"
      " FROM runs r WHERE r.id = ?1");
  st.bind(1, run_id);
  if (!st.step()) return std::nullopt;
  RunRecord rec;
  rec.summary = s.read_summary_row(st);
  const int c = kSummaryColumnCount;
  rec.host = st.text(19);
  rec.pid = st.int64(20);
  rec.status_message = st.text(c);
  rec.started_at = st.is_null(c + 1) ? 0 : st.real(c + 1);
  rec.updated_at = st.is_null(c + 2) ? 0 : st.real(c + 2);
  rec.config_yaml = st.text(c + 3);
  rec.device = st.text(c + 4);
  rec.code_version = st.text(c + 5);
  rec.notes = st.text(c + 6);
  rec.environment = s.read_environment(run_id);
  s.read_origin(run_id, rec);
  if (rec.summary.status == RunStatus::interrupted && st.text(2) != "interrupted") {
    rec.status_message = "process " + std::to_string(rec.pid) + " on " + rec.host +
                         " is gone (recorded at the next read-write open)";
  }
  s.fill_tags_and_speed(rec.summary);
  return rec;
}

RunRecord RunStore::get_run(int64_t run_id) {
  std::optional<RunRecord> r = find_run(run_id);
  if (!r) throw StoreError("run " + std::to_string(run_id) + " does not exist in " + impl_->path);
  return std::move(*r);
}

std::vector<std::string> RunStore::metric_names(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  SqliteStatement st = impl_->db->prepare(
      "SELECT n.name FROM metric_names n WHERE EXISTS "
      "(SELECT 1 FROM metrics m WHERE m.run_id = ?1 AND m.name_id = n.id) ORDER BY n.name");
  st.bind(1, run_id);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.text(0));
  return out;
}

std::vector<MetricPoint> RunStore::metric_series(int64_t run_id, const std::string& name) {
  std::lock_guard lock(impl_->mu);
  return impl_->series(run_id, name, std::numeric_limits<int64_t>::min());
}

std::vector<MetricPoint> RunStore::metric_series_since(int64_t run_id, const std::string& name,
                                                       int64_t after_step) {
  std::lock_guard lock(impl_->mu);
  return impl_->series(run_id, name, after_step);
}

int64_t RunStore::metric_row_count(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  SqliteStatement st = impl_->db->prepare("SELECT count(*) FROM metrics WHERE run_id = ?1");
  st.bind(1, run_id);
  return st.step() ? st.int64(0) : 0;
}

std::vector<RunEvent> RunStore::events(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  SqliteStatement st =
      impl_->db->prepare("SELECT id, time, level, text FROM events WHERE run_id = ?1 ORDER BY id");
  st.bind(1, run_id);
  std::vector<RunEvent> out;
  while (st.step()) out.push_back({st.int64(0), st.real(1), st.text(2), st.text(3)});
  return out;
}

std::vector<CheckpointRecord> RunStore::checkpoints(int64_t run_id) {
  std::lock_guard lock(impl_->mu);
  SqliteStatement st = impl_->db->prepare(
      "SELECT step, path, created_at FROM checkpoints WHERE run_id = ?1 ORDER BY step, id");
  st.bind(1, run_id);
  std::vector<CheckpointRecord> out;
  while (st.step()) out.push_back({st.int64(0), st.text(1), st.real(2)});
  return out;
}

void RunStore::export_csv(int64_t run_id, std::ostream& out) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.require_run(run_id);
  SqliteStatement st = s.db->prepare(
      "SELECT m.step, m.tokens, m.wall_s, n.name, m.value FROM metrics m "
      "JOIN metric_names n ON n.id = m.name_id WHERE m.run_id = ?1 ORDER BY m.step, n.name");
  st.bind(1, run_id);
  out << "step,tokens,wall_s,name,value\n";
  while (st.step()) {
    out << st.int64(0) << ',' << st.int64(1) << ',' << csv_number(st.real(2)) << ',' << csv_field(st.text(3))
        << ',' << csv_number(st.real(4)) << '\n';
  }
  if (!out) throw StoreError("writing the CSV export of run " + std::to_string(run_id) + " failed");
}

void RunStore::write_transaction(const std::function<void(SqliteConnection&)>& body) {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  s.write_txn([&] { body(*s.db); });
}

int64_t RunStore::data_version() {
  std::lock_guard lock(impl_->mu);
  return impl_->db->query_int("PRAGMA data_version");
}

}  // namespace mok
