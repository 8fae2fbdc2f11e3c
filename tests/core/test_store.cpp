// RunStore: schema creation and reopen, metric round trips, summaries, events, checkpoints,
// tags, notes, archive, delete, filters, CSV export, the buffered writer and the sink.
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/store/metric_writer.h"
#include "core/util/code_version.h"
#include "core/store/run_store.h"
#include "core/store/run_store_schema.h"
#include "core/store/run_store_sink.h"
#include "support/raw_sqlite.h"

using mok::MetricRow;
using mok::RunStatus;
using mok::RunStore;

namespace {

const char* kYaml =
    "name: shape\nmodel: {layers: 6, d_model: 256, experts: 16, top_k: 4}\n"
    "routing: {dispatcher: mok, policy: locality}\nkittens: {mode: kitten}\n";

MetricRow row(int64_t step, std::vector<mok::MetricValue> values) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 1000;
  r.wall_s = step * 0.5;
  r.values = std::move(values);
  return r;
}

}  // namespace

class TestStore : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string db_path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

 private slots:
  void createsSchemaAndFoldersThenReopens() {
    const std::string path = db_path("nested/deeper/runs.db");
    int64_t id = 0;
    {
      RunStore store = RunStore::open(path);
      QCOMPARE(store.schema_version(), mok::kRunStoreSchemaVersion);
      QVERIFY(!store.read_only());
      id = store.create_run({.name = "first", .config_yaml = kYaml, .device = "cpu"});
      QVERIFY(id > 0);
    }
    QVERIFY(std::filesystem::exists(path));
    QCOMPARE(mok::test::raw_count(path, "PRAGMA user_version"), int64_t(mok::kRunStoreSchemaVersion));
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
    QCOMPARE(sqlite3_step(st), SQLITE_ROW);
    QCOMPARE(QString(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))), QString("wal"));
    sqlite3_finalize(st);
    sqlite3_close(db);

    RunStore again = RunStore::open(path);
    const mok::RunRecord rec = again.get_run(id);
    QCOMPARE(QString::fromStdString(rec.summary.name), QString("first"));
    QCOMPARE(rec.summary.status, RunStatus::running);  // this process is alive
    QCOMPARE(QString::fromStdString(rec.config_yaml), QString(kYaml));
    QCOMPARE(QString::fromStdString(rec.device), QString("cpu"));
    QCOMPARE(QString::fromStdString(rec.code_version), QString(mok::code_version()));
    QCOMPARE(rec.summary.shape.layers, 6);
    QCOMPARE(rec.summary.shape.d_model, 256);
    QCOMPARE(rec.summary.shape.experts, 16);
    QCOMPARE(rec.summary.shape.top_k, 4);
    QCOMPARE(QString::fromStdString(rec.summary.shape.dispatcher), QString("mok"));
    QCOMPARE(QString::fromStdString(rec.summary.shape.policy), QString("locality"));
    QCOMPARE(QString::fromStdString(rec.summary.shape.kittens), QString("kitten"));
    QCOMPARE(again.list_runs().size(), size_t(1));
  }

  void shapeDefaultsForMissingKeysAndIgnoresBadYaml() {
    const mok::RunShape partial = mok::run_shape_from_yaml("model: {layers: 2}\n");
    QCOMPARE(partial.layers, 2);
    QCOMPARE(partial.d_model, 128);  // ExperimentConfig default
    QCOMPARE(QString::fromStdString(partial.dispatcher), QString("classic"));
    const mok::RunShape bad = mok::run_shape_from_yaml("model: [unclosed\n");
    QCOMPARE(bad.layers, 0);
    QCOMPARE(mok::run_shape_from_yaml("").layers, 0);
  }

  void metricsRoundTripExactly() {
    RunStore store = RunStore::open(db_path("roundtrip.db"));
    const int64_t id = store.create_run({.name = "rt"});
    const double inf = std::numeric_limits<double>::infinity();
    // Out of order on purpose: series come back sorted by step.
    store.append_metrics(id, row(3, {{"train/loss", 2.5}, {"train/lr", 1e-3}}));
    store.append_metrics(id, std::vector<MetricRow>{row(1, {{"train/loss", 3.0 + 1.0 / 3.0}}),
                                                    row(2, {{"train/loss", std::nan("")}, {"train/grad_norm", inf}})});
    MetricRow big = row(4, {{"train/loss", 1.25}});
    big.tokens = int64_t(1) << 50;
    store.append_metrics(id, big);

    const auto loss = store.metric_series(id, "train/loss");
    QCOMPARE(loss.size(), size_t(4));
    QCOMPARE(loss[0].step, int64_t(1));
    QCOMPARE(loss[0].value, 3.0 + 1.0 / 3.0);
    QCOMPARE(loss[0].tokens, int64_t(1000));
    QCOMPARE(loss[0].wall_s, 0.5);
    QVERIFY(std::isnan(loss[1].value));
    QCOMPARE(loss[2].value, 2.5);
    QCOMPARE(loss[3].tokens, int64_t(1) << 50);
    QCOMPARE(store.metric_series(id, "train/grad_norm")[0].value, inf);
    QVERIFY(store.metric_series(id, "no/such").empty());

    const auto since = store.metric_series_since(id, "train/loss", 2);
    QCOMPARE(since.size(), size_t(2));
    QCOMPARE(since[0].step, int64_t(3));

    const auto names = store.metric_names(id);
    QCOMPARE(names.size(), size_t(3));
    QCOMPARE(QString::fromStdString(names[0]), QString("train/grad_norm"));
    QCOMPARE(QString::fromStdString(names[2]), QString("train/lr"));
    QCOMPARE(store.metric_row_count(id), int64_t(6));

    // Logging a step again (a resumed run) keeps the later value, not a duplicate.
    store.append_metrics(id, row(3, {{"train/loss", 2.0}}));
    QCOMPARE(store.metric_series(id, "train/loss")[2].value, 2.0);
    QCOMPARE(store.metric_row_count(id), int64_t(6));
  }

  void summaryFollowsTheMetrics() {
    RunStore store = RunStore::open(db_path("summary.db"));
    const int64_t id = store.create_run({.name = "sum", .config_yaml = kYaml});
    store.append_metrics(id, row(10, {{"perf/tokens_per_s", 100}, {"mem/peak_bytes", 5e6}}));
    store.append_metrics(id, row(20, {{"perf/tokens_per_s", 300}, {"val/bpb", 1.8}, {"val/ppl", 30}}));
    store.append_metrics(id, row(30, {{"perf/tokens_per_s", 200}, {"val/bpb", 1.6}, {"val/ppl", 25},
                                      {"mem/peak_bytes", 7e6}}));
    store.append_metrics(id, row(40, {{"perf/tokens_per_s", 900}, {"val/bpb", 1.7}, {"val/ppl", 27},
                                      {"mem/peak_bytes", 6e6}}));
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(1));
    const mok::RunSummary& s = runs[0];
    QCOMPARE(s.last_step, int64_t(40));
    QCOMPARE(s.tokens, int64_t(40000));
    QCOMPARE(s.wall_s, 20.0);
    QCOMPARE(s.best_val_bpb, 1.6);
    QCOMPARE(s.best_val_ppl, 25.0);
    QCOMPARE(s.peak_bytes, 7e6);
    QCOMPARE(s.tokens_per_s, 250.0);  // median of 100, 200, 300, 900
    QCOMPARE(s.shape.experts, 16);

    const int64_t empty = store.create_run({.name = "nothing yet"});
    const mok::RunSummary e = store.get_run(empty).summary;
    QCOMPARE(e.last_step, int64_t(-1));
    QVERIFY(std::isnan(e.best_val_bpb));
    QVERIFY(std::isnan(e.tokens_per_s));
  }

  void statusEventsAndCheckpoints() {
    RunStore store = RunStore::open(db_path("status.db"));
    const int64_t id = store.create_run({.name = "st"});
    store.append_event(id, "warning", "loss spike at step 7");
    store.add_checkpoint(id, 100, "runs/checkpoints/st/step100.mokc");
    store.add_checkpoint(id, 50, "runs/checkpoints/st/step50.mokc");
    store.set_status(id, RunStatus::failed, "NaN loss");
    const mok::RunRecord rec = store.get_run(id);
    QCOMPARE(rec.summary.status, RunStatus::failed);
    QCOMPARE(QString::fromStdString(rec.status_message), QString("NaN loss"));
    QVERIFY(rec.summary.finished_at >= rec.summary.created_at);
    const auto ev = store.events(id);
    QCOMPARE(ev.size(), size_t(3));  // created, the warning, the status change
    QCOMPARE(QString::fromStdString(ev[1].level), QString("warning"));
    QCOMPARE(QString::fromStdString(ev[1].text), QString("loss spike at step 7"));
    QCOMPARE(QString::fromStdString(ev[2].level), QString("error"));
    QVERIFY(QString::fromStdString(ev[2].text).contains("NaN loss"));
    const auto ck = store.checkpoints(id);
    QCOMPARE(ck.size(), size_t(2));
    QCOMPARE(ck[0].step, int64_t(50));
    QCOMPARE(QString::fromStdString(ck[1].path), QString("runs/checkpoints/st/step100.mokc"));

    // Running again (a resume) clears finished_at.
    store.set_status(id, RunStatus::running, "resumed");
    QCOMPARE(store.get_run(id).summary.finished_at, 0.0);
  }

  void unknownRunIsAClearError() {
    RunStore store = RunStore::open(db_path("unknown.db"));
    try {
      store.append_metrics(999, row(1, {{"train/loss", 1}}));
      QFAIL("expected StoreError");
    } catch (const mok::StoreError& e) {
      QVERIFY(QString(e.what()).contains("run 999 does not exist"));
    }
    QVERIFY(!store.find_run(999).has_value());
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, store.get_run(999));
  }

  void tagsNotesArchiveAndFilters() {
    RunStore store = RunStore::open(db_path("tags.db"));
    const int64_t a = store.create_run({.name = "baseline classic", .config_yaml = "routing: {dispatcher: classic}"});
    const int64_t b = store.create_run({.name = "kitten r16", .config_yaml = kYaml});
    const int64_t c = store.create_run({.name = "old attempt"});
    store.add_tag(a, "paper");
    store.add_tag(a, " sweep-1 ");  // trimmed
    store.add_tag(a, "paper");      // no duplicate
    store.add_tag(b, "sweep-1");
    store.remove_tag(b, "sweep-1");
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, store.add_tag(a, "  "));
    store.set_notes(b, "rank 16 looked 100% fine");
    store.archive(c, true);
    store.set_status(b, RunStatus::finished);

    auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(2));  // c archived
    QCOMPARE(runs[0].id, b);           // newest first
    QCOMPARE(runs[1].tags.size(), size_t(2));
    QCOMPARE(QString::fromStdString(runs[1].tags[0]), QString("paper"));
    QCOMPARE(QString::fromStdString(runs[1].tags[1]), QString("sweep-1"));
    QVERIFY(runs[0].tags.empty());
    QCOMPARE(QString::fromStdString(store.get_run(b).notes), QString("rank 16 looked 100% fine"));

    QCOMPARE(store.list_runs({.include_archived = true}).size(), size_t(3));
    QVERIFY(store.get_run(c).summary.archived);
    QCOMPARE(store.list_runs({.text = "PAPER"}).size(), size_t(1));     // tag, any case
    QCOMPARE(store.list_runs({.text = "mok"}).size(), size_t(1));       // dispatcher
    QCOMPARE(store.list_runs({.text = "100%"}).size(), size_t(1));      // notes, % literal
    QCOMPARE(store.list_runs({.text = "1_0"}).size(), size_t(0));       // _ literal
    QCOMPARE(store.list_runs({.status = RunStatus::finished}).size(), size_t(1));
    QCOMPARE(store.list_runs({.status = RunStatus::running}).front().id, a);
    store.archive(c, false);
    QCOMPARE(store.list_runs().size(), size_t(3));
  }

  void deleteRemovesEveryRowOfTheRunOnly() {
    const std::string path = db_path("delete.db");
    int64_t keep = 0, gone = 0;
    {
      RunStore store = RunStore::open(path);
      keep = store.create_run({.name = "keep"});
      gone = store.create_run({.name = "gone"});
      for (int64_t id : {keep, gone}) {
        store.append_metrics(id, row(1, {{"train/loss", 1}, {"val/bpb", 2}}));
        store.append_event(id, "info", "hello");
        store.add_checkpoint(id, 1, "x.mokc");
        store.add_tag(id, "t");
      }
      store.delete_run(gone);
      QVERIFY(!store.find_run(gone).has_value());
      QVERIFY_THROWS_EXCEPTION(mok::StoreError, store.delete_run(gone));
    }
    for (const char* table : {"metrics", "events", "checkpoints", "tags"}) {
      const std::string where = std::string(" WHERE run_id = ");
      QCOMPARE(mok::test::raw_count(path, std::string("SELECT count(*) FROM ") + table + where + std::to_string(gone)), int64_t(0));
      QVERIFY(mok::test::raw_count(path, std::string("SELECT count(*) FROM ") + table + where + std::to_string(keep)) > 0);
    }
  }

  void csvExportQuotesFields() {
    RunStore store = RunStore::open(db_path("csv.db"));
    const int64_t id = store.create_run({.name = "csv"});
    store.append_metrics(id, row(2, {{"train/loss", 0.1}, {"odd,\"name\"", 3}}));
    store.append_metrics(id, row(1, {{"train/loss", 0.25}, {"line\nbreak", std::nan("")}}));
    std::ostringstream out;
    store.export_csv(id, out);
    const std::string expected =
        "step,tokens,wall_s,name,value\n"
        "1,1000,0.5,\"line\nbreak\",\n"
        "1,1000,0.5,train/loss,0.25\n"
        "2,2000,1,\"odd,\"\"name\"\"\",3\n"
        "2,2000,1,train/loss,0.1\n";
    QCOMPARE(QString::fromStdString(out.str()), QString::fromStdString(expected));
    std::ostringstream none;
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, store.export_csv(12345, none));
  }

  void readonlyStoreRefusesWritesAndSeesNewData() {
    const std::string path = db_path("ro.db");
    RunStore writer = RunStore::open(path);
    const int64_t id = writer.create_run({.name = "live"});
    RunStore reader = RunStore::open_readonly(path);
    QVERIFY(reader.read_only());
    const int64_t v0 = reader.data_version();
    writer.append_metrics(id, row(1, {{"train/loss", 4}}));
    QVERIFY(reader.data_version() != v0);  // another connection committed
    QCOMPARE(reader.metric_series(id, "train/loss").size(), size_t(1));
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, reader.create_run({.name = "no"}));
    QVERIFY_THROWS_EXCEPTION(mok::StoreError, reader.add_tag(id, "no"));
    QVERIFY(reader.mark_interrupted_runs().empty());
  }

  void writerBatchesRows() {
    RunStore store = RunStore::open(db_path("writer.db"));
    const int64_t id = store.create_run({.name = "w"});
    {
      mok::MetricWriter w(store, id, {.max_rows = 3, .max_delay_ms = 600000, .background = false});
      w.append(row(1, {{"train/loss", 1}}));
      w.append(row(2, {{"train/loss", 1}}));
      QCOMPARE(w.pending(), size_t(2));
      QCOMPARE(store.metric_row_count(id), int64_t(0));
      w.append(row(3, {{"train/loss", 1}}));
      QCOMPARE(w.pending(), size_t(0));
      QCOMPARE(store.metric_row_count(id), int64_t(3));
      w.append(row(4, {{"train/loss", 1}}));
    }  // destructor writes the tail
    QCOMPARE(store.metric_row_count(id), int64_t(4));

    // The background flusher writes a lone row without another append.
    mok::MetricWriter bg(store, id, {.max_rows = 1000, .max_delay_ms = 20, .background = true});
    bg.append(row(5, {{"train/loss", 1}}));
    QTRY_COMPARE_WITH_TIMEOUT(store.metric_row_count(id), int64_t(5), 10000);

    // flush() returns only when every row appended before it is written, even while the
    // flusher thread is busy with earlier batches.
    mok::MetricWriter busy(store, id, {.max_rows = 2, .max_delay_ms = 1, .background = true});
    for (int s = 6; s < 206; ++s) busy.append(row(s, {{"train/loss", 1.0 * s}}));
    busy.flush();
    QCOMPARE(busy.pending(), size_t(0));
    QCOMPARE(store.metric_row_count(id), int64_t(205));
    QCOMPARE(store.metric_series(id, "train/loss").back().value, 205.0);
  }

  void sinkRecordsARun() {
    RunStore store = RunStore::open(db_path("sink.db"));
    int64_t id = 0;
    {
      mok::RunStoreSink sink(store, {.device = "cpu", .writer = {.max_rows = 100, .max_delay_ms = 600000,
                                                                 .background = false}});
      sink.on_run_started({.run_id = 0, .name = "from sink", .config_yaml = kYaml, .total_steps = 3});
      id = sink.run_id();
      QVERIFY(id > 0);
      for (int s = 1; s <= 3; ++s) sink.on_metrics(row(s, {{"train/loss", 3.0 - s}}));
      QCOMPARE(store.metric_row_count(id), int64_t(0));  // still buffered
      sink.on_checkpoint(3, "ck/step3.mokc");             // flushes first
      QCOMPARE(store.metric_row_count(id), int64_t(3));
      sink.on_event("warning: grad norm clipped");
      sink.on_metrics(row(4, {{"train/loss", 0.5}}));
      sink.on_run_finished(RunStatus::finished, "done");
      QCOMPARE(sink.error_count(), 0);
    }
    const mok::RunRecord rec = store.get_run(id);
    QCOMPARE(rec.summary.status, RunStatus::finished);
    QCOMPARE(QString::fromStdString(rec.device), QString("cpu"));
    QCOMPARE(rec.summary.shape.layers, 6);
    QCOMPARE(store.metric_row_count(id), int64_t(4));
    QCOMPARE(store.checkpoints(id).size(), size_t(1));
    bool saw_warning = false;
    for (const auto& e : store.events(id)) saw_warning |= e.level == "warning" && e.text == "warning: grad norm clipped";
    QVERIFY(saw_warning);

    // A caller-created run is taken over (resume): status running again, same id.
    store.set_status(id, RunStatus::stopped, "paused by user");
    mok::RunStoreSink resume(store);
    resume.on_run_started({.run_id = id, .name = "from sink", .start_step = 4});
    QCOMPARE(resume.run_id(), id);
    QCOMPARE(store.get_run(id).summary.status, RunStatus::running);
    QVERIFY(QString::fromStdString(store.events(id).back().text).contains("resumed at step 4"));
  }

  void sinkKeepsTrainingWhenTheStoreFails() {
    RunStore store = RunStore::open(db_path("sinkfail.db"));
    mok::RunStoreSink sink(store, {.writer = {.max_rows = 1, .background = false}});
    sink.on_run_started({.run_id = 4242, .name = "missing"});  // no such run
    QCOMPARE(sink.error_count(), 1);
    QVERIFY(QString::fromStdString(sink.last_error()).contains("4242"));
    sink.on_metrics(row(1, {{"train/loss", 1}}));  // must not throw
  }
};

QTEST_GUILESS_MAIN(TestStore)
#include "test_store.moc"
