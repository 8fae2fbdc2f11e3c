#include "core/store/run_import.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "core/store/checked_store_reader.h"
#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "core/store/run_uid.h"
#include "core/store/sqlite_connection.h"
#include "core/store/store_error.h"

namespace mok {
namespace {

namespace fs = std::filesystem;

double now_s() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::vector<std::string> table_columns(SqliteConnection& db, const std::string& table) {
  std::vector<std::string> columns;
  SqliteStatement st = db.prepare("PRAGMA table_info(" + table + ")");
  while (st.step()) columns.push_back(st.text(1));
  return columns;
}

// The columns of `table` that both stores have (a source of an older schema lacks what later
// ones added), in the destination's order, less `leave_out`.
std::vector<std::string> shared_columns(SqliteConnection& src, SqliteConnection& dst, const std::string& table,
                                        const std::set<std::string>& leave_out) {
  const std::vector<std::string> in_source = table_columns(src, table);
  std::vector<std::string> out;
  for (const std::string& c : table_columns(dst, table)) {
    if (leave_out.count(c)) continue;
    if (std::find(in_source.begin(), in_source.end(), c) != in_source.end()) out.push_back(c);
  }
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// "?1, ?2, …, ?count".
std::string placeholders(size_t count) {
  std::string out;
  for (size_t i = 1; i <= count; ++i) out += (i > 1 ? ", ?" : "?") + std::to_string(i);
  return out;
}

// A column whose value is not copied but computed from the source row (a metric's name id,
// which differs between stores).
struct RemappedColumn {
  std::string name;
  std::function<int64_t(const SqliteStatement& row, int col)> value;
};

// Copies the rows of `table` that belong to source run `from` as rows of local run `to`: every
// shared column as stored, `remapped` through its function. The destination assigns `id`.
int64_t copy_run_rows(SqliteConnection& src, SqliteConnection& dst, const std::string& table, int64_t from,
                      int64_t to, const std::string& order_by, const RemappedColumn* remapped = nullptr) {
  std::set<std::string> leave_out = {"run_id", "id"};
  if (remapped) leave_out.insert(remapped->name);
  const std::vector<std::string> columns = shared_columns(src, dst, table, leave_out);
  std::vector<std::string> read = columns, written = {"run_id"};
  if (remapped) {
    read.insert(read.begin(), remapped->name);
    written.push_back(remapped->name);
  }
  written.insert(written.end(), columns.begin(), columns.end());
  SqliteStatement sel = src.prepare("SELECT " + (read.empty() ? std::string("1") : joined(read)) + " FROM " + table +
                                    " WHERE run_id = ?1 ORDER BY " + order_by);
  sel.bind(1, from);
  SqliteStatement ins =
      dst.prepare("INSERT INTO " + table + "(" + joined(written) + ") VALUES (" + placeholders(written.size()) + ")");
  const int first_copied = remapped ? 1 : 0;
  int64_t rows = 0;
  while (sel.step()) {
    int param = 1;
    ins.bind(param++, to);
    if (remapped) ins.bind(param++, remapped->value(sel, 0));
    for (size_t c = 0; c < columns.size(); ++c) ins.bind_column(param++, sel, first_copied + static_cast<int>(c));
    ins.run();
    ins.reset();
    ++rows;
  }
  return rows;
}

// The source's runs to import, in id order, with the uid each one has (or would get from
// migration 3, for a source of an older schema).
struct SourceRun {
  int64_t id = 0;
  std::string name;
  std::string uid;
};

std::vector<SourceRun> source_runs(SqliteConnection& src, int version, const std::string& path,
                                   const std::vector<int64_t>& wanted) {
  const std::string uid = version >= 3 ? std::string("coalesce(uid, ") + kLegacyRunUidSql + ")" : kLegacyRunUidSql;
  std::vector<SourceRun> all;
  SqliteStatement st = src.prepare("SELECT id, name, " + uid + " FROM runs ORDER BY id");
  while (st.step()) all.push_back({st.int64(0), st.text(1), st.text(2)});
  if (wanted.empty()) return all;
  const std::set<int64_t> ids(wanted.begin(), wanted.end());
  std::vector<SourceRun> out;
  for (const SourceRun& r : all)
    if (ids.count(r.id)) out.push_back(r);
  for (int64_t id : ids) {
    if (std::none_of(out.begin(), out.end(), [id](const SourceRun& r) { return r.id == id; })) {
      throw StoreError("run " + std::to_string(id) + " does not exist in " + path + " (it holds " +
                       std::to_string(all.size()) + " run" + (all.size() == 1 ? "" : "s") + "); nothing was imported");
    }
  }
  return out;
}

// The local id of the run with this uid; 0 when there is none.
int64_t local_run_with_uid(SqliteConnection& dst, const std::string& uid) {
  SqliteStatement st = dst.prepare("SELECT id FROM runs WHERE uid = ?1");
  st.bind(1, uid);
  return st.step() ? st.int64(0) : 0;
}

// Whether source run `from` and local run `to` differ in status or last step.
bool run_moved_on(SqliteConnection& src, int64_t from, SqliteConnection& dst, int64_t to) {
  const std::string sql = "SELECT status, coalesce(last_step, -1) FROM runs WHERE id = ?1";
  SqliteStatement a = src.prepare(sql);
  a.bind(1, from);
  SqliteStatement b = dst.prepare(sql);
  b.bind(1, to);
  if (!a.step() || !b.step()) return false;
  return a.text(0) != b.text(0) || a.int64(1) != b.int64(1);
}

// Copies the source's runs row as a new local run (new id, same uid, where it came from).
int64_t copy_run_row(SqliteConnection& src, SqliteConnection& dst, const SourceRun& run,
                     const std::string& source_path) {
  const std::vector<std::string> columns =
      shared_columns(src, dst, "runs", {"id", "uid", "imported_from", "imported_run_id", "imported_at"});
  SqliteStatement sel = src.prepare("SELECT " + joined(columns) + " FROM runs WHERE id = ?1");
  sel.bind(1, run.id);
  if (!sel.step()) throw StoreError(source_path + ": run " + std::to_string(run.id) + " vanished while importing");
  std::vector<std::string> written = columns;
  written.insert(written.end(), {"uid", "imported_from", "imported_run_id", "imported_at"});
  SqliteStatement ins =
      dst.prepare("INSERT INTO runs(" + joined(written) + ") VALUES (" + placeholders(written.size()) + ")");
  const int n = static_cast<int>(columns.size());
  for (int c = 0; c < n; ++c) ins.bind_column(c + 1, sel, c);
  std::error_code ec;
  const fs::path absolute = fs::absolute(source_path, ec);
  ins.bind(n + 1, run.uid).bind(n + 2, ec ? source_path : absolute.lexically_normal().string());
  ins.bind(n + 3, run.id).bind(n + 4, now_s());
  ins.run();
  return dst.last_insert_id();
}

bool has_table(SqliteConnection& db, const std::string& table) {
  SqliteStatement st = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  st.bind(1, table);
  return st.step();
}

// One attempt of the whole import, inside the destination's write transaction.
void copy_runs(SqliteConnection& src, SqliteConnection& dst, const std::vector<SourceRun>& runs,
               const std::string& source_path, RunImportResult& result) {
  result.imported.clear();
  result.skipped.clear();
  // Metric names by id in the source, and their ids here (filled as names are met).
  std::unordered_map<int64_t, std::string> source_names;
  {
    SqliteStatement st = src.prepare("SELECT id, name FROM metric_names");
    while (st.step()) source_names.emplace(st.int64(0), st.text(1));
  }
  std::unordered_map<int64_t, int64_t> local_name_ids;
  int64_t current_source_run = 0;
  const RemappedColumn metric_name{"name_id", [&](const SqliteStatement& row, int col) -> int64_t {
    const int64_t source_id = row.int64(col);
    if (auto it = local_name_ids.find(source_id); it != local_name_ids.end()) return it->second;
    auto name = source_names.find(source_id);
    if (name == source_names.end()) {
      throw StoreError(source_path + ": run " + std::to_string(current_source_run) +
                       " has metric values under a name id (" + std::to_string(source_id) +
                       ") that its metric_names table lacks; nothing was imported");
    }
    dst.prepare("INSERT OR IGNORE INTO metric_names(name) VALUES (?1)").bind(1, name->second).run();
    SqliteStatement sel = dst.prepare("SELECT id FROM metric_names WHERE name = ?1");
    sel.bind(1, name->second);
    if (!sel.step()) throw StoreError(dst.path() + ": metric name '" + name->second + "' could not be stored");
    return local_name_ids[source_id] = sel.int64(0);
  }};
  // Which per-run tables the source has (environments came with schema 2), each with the
  // order its rows are copied in, so events and checkpoints keep theirs under new ids.
  const std::map<std::string, std::string> order = {
      {"metrics", "name_id, step"}, {"events", "id"}, {"checkpoints", "id"}, {"tags", "tag"}, {"environments", "run_id"}};
  for (const SourceRun& run : runs) {
    if (const int64_t here = local_run_with_uid(dst, run.uid)) {
      ImportedRun skipped{run.id, here, run.name};
      skipped.changed_at_source = run_moved_on(src, run.id, dst, here);
      result.skipped.push_back(skipped);
      continue;
    }
    current_source_run = run.id;
    ImportedRun copied{run.id, copy_run_row(src, dst, run, source_path), run.name};
    for (const std::string& table : per_run_tables()) {
      if (!has_table(src, table)) continue;
      auto how = order.find(table);
      if (how == order.end()) throw StoreError("importing runs: no copy order for the table " + table);
      const int64_t rows = copy_run_rows(src, dst, table, run.id, copied.id, how->second,
                                         table == "metrics" ? &metric_name : nullptr);
      if (table == "metrics") copied.metric_values = rows;
      if (table == "events") copied.events = rows;
      if (table == "checkpoints") copied.checkpoints = rows;
    }
    result.imported.push_back(copied);
  }
}

}  // namespace

CheckedStoreReader open_import_source(const std::string& source_path, const std::string& destination_path) {
  // Reading a file as immutable while writing it through another connection would read
  // pages half changed; and every run would be skipped anyway.
  std::error_code ec;
  if (fs::equivalent(source_path, destination_path, ec)) {
    throw StoreError(source_path + " is the store the runs would be imported into; nothing to import");
  }
  return open_checked_store_reader(source_path);
}

RunImportResult import_runs(RunStore& destination, CheckedStoreReader& source, const std::vector<int64_t>& run_ids) {
  SqliteConnection& src = *source.db;
  RunImportResult result;
  result.source = src.path();
  destination.write_transaction([&](SqliteConnection& dst) {
    // One read transaction on the source: a trainer writing it meanwhile cannot make the
    // copy of a run half old, half new.
    src.exec("BEGIN");
    try {
      const std::vector<SourceRun> runs = source_runs(src, source.version, src.path(), run_ids);
      copy_runs(src, dst, runs, src.path(), result);
      src.exec("COMMIT");
    } catch (...) {
      src.rollback_quietly();
      throw;
    }
  });
  return result;
}

RunImportResult import_runs(RunStore& destination, const std::string& source_path,
                            const std::vector<int64_t>& run_ids) {
  CheckedStoreReader source = open_import_source(source_path, destination.path());
  return import_runs(destination, source, run_ids);
}

}  // namespace mok
