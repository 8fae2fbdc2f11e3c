#pragma once
// What the run import tests share: a store filled as a cluster's would be (runs with metrics,
// a NaN among them, events, checkpoints, tags, notes, an environment, an archived run), a
// digest of a file's bytes, and a run's rows of one table as text, read behind the store's
// back, so a copy can be compared with its original row for row.

#include <QCryptographicHash>
#include <QFile>
#include <QString>

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/store/run_store.h"
#include "core/store/store_location.h"

namespace mok::test {

// Every column a run's copy must share with its original, by table; %1 is the run's id.
inline const std::vector<std::pair<const char*, const char*>>& run_row_queries() {
  static const std::vector<std::pair<const char*, const char*>> queries = {
      {"runs",
       "SELECT name, status, status_message, created_at, started_at, finished_at, updated_at, config_yaml, host, "
       "device, code_version, pid, process_start, boot_id, notes, archived, model_layers, model_d_model, "
       "model_experts, model_top_k, dispatcher, policy, kittens_mode, last_step, last_tokens, last_wall_s, "
       "best_val_bpb, best_val_ppl, peak_bytes FROM runs WHERE id = %1"},
      {"metrics",
       "SELECT n.name, m.step, m.tokens, m.wall_s, m.value FROM metrics m JOIN metric_names n ON n.id = m.name_id "
       "WHERE m.run_id = %1 ORDER BY n.name, m.step"},
      {"events", "SELECT time, level, text FROM events WHERE run_id = %1 ORDER BY id"},
      {"checkpoints", "SELECT step, path, created_at FROM checkpoints WHERE run_id = %1 ORDER BY id"},
      {"tags", "SELECT tag FROM tags WHERE run_id = %1 ORDER BY tag"},
      {"environments",
       "SELECT cpu_model, cpu_count, threads, blas_library, blas_kernel, blas_config, gpu_model, gpu_driver, "
       "cuda_version, cublas_version, nccl_version FROM environments WHERE run_id = %1"},
  };
  return queries;
}

// The rows a query gives, each as "type:value|…" (reals to 17 digits). A store no writer has
// open (no -wal beside it) is read as immutable, so it gets nothing beside it; one with a
// writer through a read-only connection that sees the writer's log. {"error: …"} when the
// query fails.
inline std::vector<std::string> rows_as_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  const bool no_writer = !std::filesystem::exists(path + "-wal");
  const std::string name = no_writer ? mok::immutable_uri(path) : path;
  if (sqlite3_open_v2(name.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return {"error: cannot open " + path};
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    out.push_back(std::string("error: ") + sqlite3_errmsg(db));
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        char buf[64];
        switch (sqlite3_column_type(st, c)) {
          case SQLITE_NULL: row += "null"; break;
          case SQLITE_INTEGER: row += "i:" + std::to_string(sqlite3_column_int64(st, c)); break;
          case SQLITE_FLOAT:
            std::snprintf(buf, sizeof buf, "r:%.17g", sqlite3_column_double(st, c));
            row += buf;
            break;
          default: row += std::string("t:") + reinterpret_cast<const char*>(sqlite3_column_text(st, c)); break;
        }
        row += '|';
      }
      out.push_back(row);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

inline std::vector<std::string> run_rows(const std::string& path, const char* query, int64_t run_id) {
  return rows_as_text(path, QString::fromLatin1(query).arg(run_id).toStdString());
}

inline QByteArray sha256_of(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) return {};
  QCryptographicHash h(QCryptographicHash::Sha256);
  h.addData(&f);
  return h.result();
}

// One run as a trainer leaves it: `steps` metric rows (train/loss every step, a NaN grad norm
// at step 2, val/bpb every 5th), status, notes, a tag, two checkpoints, its environment.
inline int64_t add_finished_run(RunStore& store, const std::string& name, int steps, double loss_offset = 0) {
  NewRun run;
  run.name = name;
  run.config_yaml = "name: " + name + "\nmodel: {layers: 2, d_model: 32, experts: 4, top_k: 2}\n";
  run.device = "cpu";
  const int64_t id = store.create_run(run);
  for (int s = 1; s <= steps; ++s) {
    MetricRow row;
    row.step = s;
    row.tokens = s * 128;
    row.wall_s = 0.125 * s;
    row.values = {{"train/loss", 4.0 - 0.01 * s + loss_offset}, {"perf/tokens_per_s", 1000.0 + s}};
    if (s == 2) row.values.push_back({"train/grad_norm", std::nan("")});
    if (s % 5 == 0) row.values.push_back({"val/bpb", 3.0 - 0.01 * s});
    store.append_metrics(id, row);
  }
  store.add_checkpoint(id, steps / 2, "/scratch/ckpt/" + name + "/step" + std::to_string(steps / 2));
  store.add_checkpoint(id, steps, "/scratch/ckpt/" + name + "/step" + std::to_string(steps));
  store.add_tag(id, "cluster");
  store.set_notes(id, "notes of " + name);
  store.set_status(id, RunStatus::finished, "done");
  return id;
}

}  // namespace mok::test
