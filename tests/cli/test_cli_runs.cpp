// `mok runs` over a database filled through RunStore: list (table and --json), show,
// export-csv, tag, note, archive, delete, paired (runs of two settings paired by seed), and the exit codes and messages for bad usage
// (2) and store errors (1), including a non-database file that must stay unchanged.
#include <QDir>
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>

#include <cmath>
#include <sstream>

#include "core/config/experiment_config.h"
#include "core/store/run_environment.h"
#include "core/store/run_store.h"

using mok::RunStatus;
using mok::RunStore;

namespace {

struct Result {
  int code = -1;
  QString out;
  QString err;
  QJsonObject json() const {  // the last line of stdout as one JSON object
    const QStringList lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last().toUtf8()).object();
  }
};

Result mok_cli(const QStringList& args) {
  QProcess p;
  p.start(MOK_CLI_PATH, args);
  Result r;
  if (!p.waitForFinished(60000)) return r;
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

mok::MetricRow row(int64_t step, std::vector<mok::MetricValue> v) {
  mok::MetricRow r;
  r.step = step;
  r.tokens = step * 4096;
  r.wall_s = step * 0.25;
  r.values = std::move(v);
  return r;
}

}  // namespace

class TestCliRuns : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  QString db_;
  int64_t quick_ = 0, other_ = 0;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.path() + "/runs/mok.db";
    RunStore store = RunStore::open(db_.toStdString());
    quick_ = store.create_run({.name = "quickstart",
                               .config_yaml = "name: quickstart\nmodel: {layers: 4, d_model: 128, experts: 8, top_k: 2}\n"
                                              "routing: {dispatcher: mok, policy: topk}\n",
                               .device = "cpu"});
    for (int s = 1; s <= 20; ++s) {
      std::vector<mok::MetricValue> v = {{"train/loss", 4.0 - 0.1 * s}, {"perf/tokens_per_s", 1000.0 * s},
                                         {"mem/peak_bytes", 3.0 * 1024 * 1024},
                                         // highest at step 20 and at step 7: runs show reports each series' top
                                         {"mem/peak_block_bytes", (2.0 + 0.05 * s) * 1024 * 1024},
                                         {"mem/peak_reserved_bytes", (s == 7 ? 5.0 : 4.0) * 1024 * 1024}};
      if (s % 10 == 0) v.push_back({"val/bpb", 3.0 - 0.1 * s});
      store.append_metrics(quick_, row(s, v));
    }
    store.add_checkpoint(quick_, 20, "ck/quick/step20.mokc");
    store.set_status(quick_, RunStatus::finished, "done");
    other_ = store.create_run({.name = "kitten, \"quoted\" run"});
    store.append_metrics(other_, row(1, {{"odd,name", 1.5}}));
    store.set_status(other_, RunStatus::failed, "NaN loss");
  }

  void listJson() {
    const Result r = mok_cli({"runs", "list", "--db", db_, "--json"});
    QCOMPARE(r.code, 0);
    const QJsonArray runs = r.json()["runs"].toArray();
    QCOMPARE(runs.size(), 2);
    const QJsonObject q = runs[1].toObject();  // newest first
    QCOMPARE(q["id"].toInteger(), quick_);
    QCOMPARE(q["name"].toString(), QString("quickstart"));
    QCOMPARE(q["status"].toString(), QString("finished"));
    QCOMPARE(q["layers"].toInt(), 4);
    QCOMPARE(q["experts"].toInt(), 8);
    QCOMPARE(q["dispatcher"].toString(), QString("mok"));
    QCOMPARE(q["last_step"].toInt(), 20);
    QCOMPARE(q["tokens"].toInteger(), qint64(20 * 4096));
    QCOMPARE(q["best_val_bpb"].toDouble(), 3.0 - 0.1 * 20);
    QCOMPARE(q["tokens_per_s"].toDouble(), 10500.0);  // median of 1000..20000
    QCOMPARE(q["peak_bytes"].toDouble(), 3.0 * 1024 * 1024);
    QVERIFY(runs[0].toObject()["best_val_bpb"].isNull());
    QCOMPARE(runs[0].toObject()["name"].toString(), QString("kitten, \"quoted\" run"));
  }

  void listTableAndFilters() {
    const Result r = mok_cli({"runs", "list", "--db", db_});
    QCOMPARE(r.code, 0);
    const QStringList lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 3);
    QVERIFY(lines[0].startsWith("ID"));
    QVERIFY(lines[0].contains("VAL_BPB"));
    QVERIFY(lines[2].contains("quickstart"));
    QVERIFY(lines[2].contains("4x128 e8k2"));
    QVERIFY(lines[2].contains("3.0 MiB"));
    // Aligned: the STATUS column starts at the same offset on every line.
    const int col = lines[0].indexOf("STATUS");
    QCOMPARE(lines[1].indexOf("failed"), col);
    QCOMPARE(lines[2].indexOf("finished"), col);

    const Result failed = mok_cli({"runs", "list", "--db", db_, "--status", "failed", "--json"});
    QCOMPARE(failed.code, 0);
    QCOMPARE(failed.json()["runs"].toArray().size(), 1);
    const Result text = mok_cli({"runs", "list", "--db", db_, "--filter", "QUICK", "--json"});
    QCOMPARE(text.json()["runs"].toArray().size(), 1);
    const Result none = mok_cli({"runs", "list", "--db", db_, "--filter", "zzz"});
    QCOMPARE(none.code, 0);
    QVERIFY(none.out.contains("no runs"));
  }

  void showJsonAndText() {
    const Result r = mok_cli({"runs", "show", QString::number(quick_), "--db", db_, "--json"});
    QCOMPARE(r.code, 0);
    const QJsonObject o = r.json();
    QCOMPARE(o["name"].toString(), QString("quickstart"));
    QVERIFY(o["config_yaml"].toString().contains("d_model: 128"));
    QCOMPARE(o["device"].toString(), QString("cpu"));
    const QJsonObject last = o["last_metrics"].toObject();
    QCOMPARE(last["train/loss"].toObject()["step"].toInt(), 20);
    QCOMPARE(last["train/loss"].toObject()["value"].toDouble(), 4.0 - 0.1 * 20);
    QCOMPARE(last["val/bpb"].toObject()["step"].toInt(), 20);
    QCOMPARE(o["peak_block_bytes"].toDouble(), 3.0 * 1024 * 1024);
    QCOMPARE(o["peak_reserved_bytes"].toDouble(), 5.0 * 1024 * 1024);
    QCOMPARE(o["checkpoints"].toArray().size(), 1);
    QCOMPARE(o["checkpoints"].toArray()[0].toObject()["path"].toString(), QString("ck/quick/step20.mokc"));
    QVERIFY(o["events"].toArray().size() >= 2);

    // The run was created in this process: its environment is what this process probes.
    const mok::RunEnvironment here = mok::probe_run_environment();
    const QJsonObject env = o["environment"].toObject();
    QCOMPARE(env["cpu_model"].toString(), QString::fromStdString(here.cpu_model));
    QCOMPARE(env["cpu_count"].toInt(), here.cpu_count);
    QCOMPARE(env["blas_library"].toString(), QString::fromStdString(here.blas_library));
    QCOMPARE(env["blas_kernel"].toString(), QString::fromStdString(here.blas_kernel));
    QCOMPARE(env["blas_config"].toString(), QString::fromStdString(here.blas_config));
    QCOMPARE(env["threads"].toInt(), mok::ParallelConfig{}.threads);  // the config leaves parallel.threads out
    for (const char* gpu : {"gpu_model", "gpu_driver", "cuda_version", "cublas_version", "nccl_version"}) {
      QVERIFY2(env.contains(gpu), gpu);  // the place for GPU runs, empty on this CPU run
      QCOMPARE(env[gpu].toString(), QString());
    }

    const Result text = mok_cli({"runs", "show", QString::number(quick_), "--db", db_});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("quickstart"));
    QVERIFY(text.out.contains("ck/quick/step20.mokc"));
    QVERIFY2(text.out.contains("peak mem 3.0 MiB (blocks 3.0 MiB, reserved 5.0 MiB)"), qPrintable(text.out));
    QVERIFY(text.out.contains("routing: {dispatcher: mok, policy: topk}"));
    mok::RunEnvironment shown = here;
    shown.threads = mok::ParallelConfig{}.threads;
    QVERIFY2(text.out.contains("machine   " + QString::fromStdString(mok::environment_summary(shown))),
             qPrintable(text.out));
    QVERIFY2(text.out.contains(QString::fromStdString(here.blas_kernel)), qPrintable(text.out));

    // A run without a recorded environment (from an older store) says so.
    int64_t unknown = 0;
    {
      RunStore store = RunStore::open(db_.toStdString());
      unknown = store.create_run({.name = "from before", .environment = mok::RunEnvironment{}});
    }
    const Result old_json = mok_cli({"runs", "show", QString::number(unknown), "--db", db_, "--json"});
    QCOMPARE(old_json.code, 0);
    QVERIFY(old_json.json().contains("environment"));
    QVERIFY(old_json.json()["environment"].isNull());
    const Result old_text = mok_cli({"runs", "show", QString::number(unknown), "--db", db_});
    QVERIFY2(old_text.out.contains("machine   not recorded"), qPrintable(old_text.out));
    RunStore::open(db_.toStdString()).delete_run(unknown);
  }

  // compare names the runs that computed on other hardware than the baseline, in the table
  // (a note), --markdown (a quoted note) and --json (same_environment, differences per run).
  void compareFlagsOtherHardware() {
    mok::RunEnvironment zen4;
    zen4.recorded = true;
    zen4.cpu_model = "AMD EPYC 9654 96-Core Processor";
    zen4.cpu_count = 192;
    zen4.blas_library = "OpenBLAS 0.3.21";
    zen4.blas_kernel = "Cooperlake";
    mok::RunEnvironment avx2 = zen4;
    avx2.cpu_model = "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz";
    avx2.blas_kernel = "Haswell";
    mok::RunEnvironment zen4_more_threads = zen4;
    zen4_more_threads.threads = 8;
    int64_t a = 0, b = 0, c = 0;
    {
      RunStore store = RunStore::open(db_.toStdString());
      a = store.create_run({.name = "on zen4", .environment = zen4});
      b = store.create_run({.name = "on broadwell", .environment = avx2});
      c = store.create_run({.name = "on zen4, 8 threads", .environment = zen4_more_threads});
      for (int64_t id : {a, b, c}) store.append_metrics(id, row(1, {{"train/loss", 2.0}}));
    }
    const QString ia = QString::number(a), ib = QString::number(b), ic = QString::number(c);

    const Result same = mok_cli({"runs", "compare", ia, ic, "--skip", "0", "--db", db_});
    QCOMPARE(same.code, 0);
    QVERIFY2(!same.out.contains("note:"), qPrintable(same.out));  // thread counts do not matter
    const Result same_json = mok_cli({"runs", "compare", ia, ic, "--skip", "0", "--db", db_, "--json"});
    QCOMPARE(same_json.json()["same_environment"].toBool(), true);

    const Result text = mok_cli({"runs", "compare", ia, ib, ic, "--skip", "0", "--db", db_});
    QCOMPARE(text.code, 0);
    QVERIFY2(text.out.contains("note: runs from other (or unknown) hardware than the baseline"), qPrintable(text.out));
    QVERIFY2(text.out.contains("#" + ib + ": CPU Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz vs AMD EPYC 9654 "
                               "96-Core Processor; BLAS kernel Haswell vs Cooperlake"),
             qPrintable(text.out));
    QVERIFY2(!text.out.contains("#" + ic + ":"), qPrintable(text.out));

    const Result md = mok_cli({"runs", "compare", ia, ib, "--skip", "0", "--db", db_, "--markdown"});
    QVERIFY2(md.out.contains("> note: runs from other") &&
                 md.out.contains(">   #" + ib + ": CPU Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz vs"),
             qPrintable(md.out));

    const Result json = mok_cli({"runs", "compare", ia, ib, "--skip", "0", "--db", db_, "--json"});
    QCOMPARE(json.code, 0);
    QCOMPARE(json.json()["same_environment"].toBool(), false);
    const QJsonArray runs = json.json()["runs"].toArray();
    QCOMPARE(runs[0].toObject()["environment_differences"].toArray().size(), 0);
    const QJsonArray d = runs[1].toObject()["environment_differences"].toArray();
    QCOMPARE(d.size(), 2);
    QCOMPARE(d[1].toObject()["field"].toString(), QString("blas_kernel"));
    QCOMPARE(d[1].toObject()["baseline"].toString(), QString("Cooperlake"));
    QCOMPARE(d[1].toObject()["value"].toString(), QString("Haswell"));
    QCOMPARE(runs[1].toObject()["environment"].toObject()["blas_kernel"].toString(), QString("Haswell"));

    RunStore store = RunStore::open(db_.toStdString());
    for (int64_t id : {a, b, c}) store.delete_run(id);
  }

  void exportCsvMatchesTheStore() {
    const QString out = dir_.path() + "/other.csv";
    const Result r = mok_cli({"runs", "export-csv", QString::number(other_), "--db", db_, "--out", out});
    QCOMPARE(r.code, 0);
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray csv = f.readAll();
    QCOMPARE(csv, QByteArray("step,tokens,wall_s,name,value\n1,4096,0.25,\"odd,name\",1.5\n"));
    // Nothing beside it: no temporary of the export is left.
    QCOMPARE(QDir(dir_.path()).entryList({"*other.csv*"}, QDir::Files | QDir::Hidden), QStringList{"other.csv"});

    const Result stdout_csv = mok_cli({"runs", "export-csv", QString::number(quick_), "--db", db_});
    QCOMPARE(stdout_csv.code, 0);
    std::ostringstream expected;
    RunStore::open_readonly(db_.toStdString()).export_csv(quick_, expected);
    QCOMPARE(stdout_csv.out, QString::fromStdString(expected.str()));
  }

  // compare: per-step metrics are means after the skipped steps, val/* and infer/* the last
  // value, ratios against the first run; record adds measured figures to a run.
  void compareAndRecord() {
    int64_t other;
    {
      RunStore store = RunStore::open(db_.toStdString());
      other = store.create_run({.name = "mok r2"});
      for (int s = 1; s <= 5; ++s) store.append_metrics(other, row(s, {{"train/loss", s == 1 ? 9.0 : 2.0}}));
      store.set_status(other, RunStatus::finished, "done");
    }
    const QString base = QString::number(quick_), id = QString::number(other);
    const Result rec = mok_cli({"runs", "record", id, "infer/tokens_per_s=512.5", "--db", db_, "--json"});
    QCOMPARE(rec.code, 0);
    QCOMPARE(rec.json()["ok"].toBool(), true);
    {
      const auto series = RunStore::open_readonly(db_.toStdString()).metric_series(other, "infer/tokens_per_s");
      QCOMPARE(series.size(), size_t(1));
      QCOMPARE(series[0].step, int64_t(5));  // the run's last step
      QCOMPARE(series[0].value, 512.5);
    }
    const Result r = mok_cli({"runs", "compare", base, id, "--metrics", "train/loss,val/bpb,infer/tokens_per_s",
                              "--db", db_, "--json"});
    QCOMPARE(r.code, 0);
    const QJsonArray runs = r.json()["runs"].toArray();
    QCOMPARE(runs.size(), 2);
    const QJsonObject b = runs[0].toObject()["figures"].toObject(), o = runs[1].toObject()["figures"].toObject();
    QVERIFY(std::abs(b["train/loss"].toDouble() - 2.9) < 1e-12);   // mean of steps 2..20
    QVERIFY(std::abs(b["val/bpb"].toDouble() - 1.0) < 1e-12);      // last evaluation
    QVERIFY(b["infer/tokens_per_s"].isNull());
    QCOMPARE(o["train/loss"].toDouble(), 2.0);                      // step 1's 9.0 skipped
    QCOMPARE(o["infer/tokens_per_s"].toDouble(), 512.5);
    const QJsonObject ratio = runs[1].toObject()["ratios"].toObject();
    QVERIFY(std::abs(ratio["train/loss"].toDouble() - 2.0 / 2.9) < 1e-12);
    QVERIFY(ratio["val/bpb"].isNull());
    // --skip 0 takes every step; the text table shows the ratio.
    const Result all = mok_cli({"runs", "compare", base, id, "--metrics", "train/loss", "--skip", "0", "--db", db_});
    QCOMPARE(all.code, 0);
    // (9 + 4·2) / 5 = 3.4 against the base's mean of steps 1..20, 2.95: 1.15x.
    QVERIFY2(all.out.contains("3.4 (1.15x)"), qPrintable(all.out));
    // Both runs were created by this process: same hardware, no note.
    QVERIFY2(!all.out.contains("note:"), qPrintable(all.out));
    QCOMPARE(r.json()["same_environment"].toBool(), true);
    for (const QStringList& bad : {QStringList{"runs", "compare", base, "--db", db_},
                                   QStringList{"runs", "compare", base, id, "--skip", "-1", "--db", db_},
                                   QStringList{"runs", "record", id, "infer/x", "--db", db_},
                                   QStringList{"runs", "record", id, "infer/x=fast", "--db", db_}}) {
      const Result e = mok_cli(bad);
      QVERIFY2(e.code == 2, qPrintable(bad.join(' ') + " → " + QString::number(e.code)));
      QVERIFY(!e.err.isEmpty());
    }
    QCOMPARE(mok_cli({"runs", "compare", base, "99999", "--db", db_}).code, 1);  // no such run
    RunStore::open(db_.toStdString()).delete_run(other);
  }

  void tagNoteArchiveDelete() {
    const QString id = QString::number(other_);
    QCOMPARE(mok_cli({"runs", "tag", id, "sweep", "paper", "--db", db_}).code, 0);
    QCOMPARE(mok_cli({"runs", "tag", id, "paper", "--remove", "--db", db_}).code, 0);
    QCOMPARE(mok_cli({"runs", "note", id, "diverged", "at", "step", "900", "--db", db_}).code, 0);
    {
      RunStore store = RunStore::open_readonly(db_.toStdString());
      const mok::RunRecord rec = store.get_run(other_);
      QCOMPARE(rec.summary.tags.size(), size_t(1));
      QCOMPARE(QString::fromStdString(rec.summary.tags[0]), QString("sweep"));
      QCOMPARE(QString::fromStdString(rec.notes), QString("diverged at step 900"));
    }
    QCOMPARE(mok_cli({"runs", "archive", id, "--db", db_}).code, 0);
    QCOMPARE(mok_cli({"runs", "list", "--db", db_, "--json"}).json()["runs"].toArray().size(), 1);
    QCOMPARE(mok_cli({"runs", "list", "--db", db_, "--all", "--json"}).json()["runs"].toArray().size(), 2);

    const Result unconfirmed = mok_cli({"runs", "delete", id, "--db", db_});
    QCOMPARE(unconfirmed.code, 2);
    QVERIFY(unconfirmed.err.contains("--yes"));
    QVERIFY(RunStore::open_readonly(db_.toStdString()).find_run(other_).has_value());
    const Result del = mok_cli({"runs", "delete", id, "--yes", "--db", db_, "--json"});
    QCOMPARE(del.code, 0);
    QCOMPARE(del.json()["ok"].toBool(), true);
    QVERIFY(!RunStore::open_readonly(db_.toStdString()).find_run(other_).has_value());
    const Result again = mok_cli({"runs", "delete", id, "--yes", "--db", db_});
    QCOMPARE(again.code, 1);
    QVERIFY(again.err.contains("does not exist"));
  }

  void pairedBySeed() {
    // Two settings over seeds in a store of their own: base (tag exact) seeds 1-4 and a run
    // without val/bpb; other (tag kitten) seeds 1-4 and seed 9, which base lacks.
    const QString db = dir_.path() + "/paired.db";
    RunStore store = RunStore::open(db.toStdString());
    const double base_bpb[] = {2.00, 2.02, 1.98, 2.01}, other_bpb[] = {2.01, 2.01, 2.00, 2.03};
    auto run = [&](const char* tag, int seed, double bpb) {
      const int64_t id = store.create_run({.name = tag, .config_yaml = "seed: " + std::to_string(seed) + "\n"});
      if (!std::isnan(bpb)) store.append_metrics(id, row(10, {{"val/bpb", bpb}}));
      store.add_tag(id, tag);
      return id;
    };
    std::vector<int64_t> base_ids, other_ids;
    for (int s = 0; s < 4; ++s) {
      base_ids.push_back(run("exact", s + 1, base_bpb[s]));
      other_ids.push_back(run("kitten", s + 1, other_bpb[s]));
    }
    const int64_t no_figure = run("exact", 5, NAN);
    const int64_t lone = run("kitten", 9, 2.5);

    Result r = mok_cli({"runs", "paired", "tag:exact", "tag:kitten", "--db", db, "--json"});
    QCOMPARE(r.code, 0);
    const QJsonObject o = r.json();
    const QJsonArray pairs = o["pairs"].toArray();
    QCOMPARE(pairs.size(), 4);
    double d[4], mean = 0.0;
    for (int s = 0; s < 4; ++s) {
      const QJsonObject p = pairs[s].toObject();
      QCOMPARE(p["seed"].toInt(), s + 1);
      QCOMPARE(p["base_run"].toInteger(), base_ids[size_t(s)]);
      QCOMPARE(p["other_run"].toInteger(), other_ids[size_t(s)]);
      d[s] = (other_bpb[s] / base_bpb[s] - 1.0) * 100.0;
      QVERIFY(std::abs(p["diff_percent"].toDouble() - d[s]) < 1e-9);
      mean += d[s] / 4.0;
    }
    double ss = 0.0;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double se = std::sqrt(ss / 3.0 / 4.0);
    QVERIFY(std::abs(o["mean_percent"].toDouble() - mean) < 1e-9);
    QVERIFY(std::abs(o["standard_error_percent"].toDouble() - se) < 1e-9);
    QVERIFY(std::abs(o["low95_percent"].toDouble() - (mean - 3.182 * se)) < 1e-9);  // t, 3 degrees of freedom
    QVERIFY(std::abs(o["high95_percent"].toDouble() - (mean + 3.182 * se)) < 1e-9);
    QCOMPARE(o["other_above"].toInt(), 3);  // seed 2 is lower
    QCOMPARE(o["unpaired_base"].toArray().size(), 1);
    QCOMPARE(o["unpaired_base"].toArray()[0].toInteger(), no_figure);
    QCOMPARE(o["unpaired_other"].toArray()[0].toInteger(), lone);

    // The table: one row per pair, the summary line, the runs left out.
    r = mok_cli({"runs", "paired", QString("%1,%2").arg(base_ids[0]).arg(base_ids[1]),
                 QString("%1,%2").arg(other_ids[0]).arg(other_ids[1]), "--db", db});
    QCOMPARE(r.code, 0);
    // +0.50 % and −0.50 %: mean 0, standard error 0.50 %, t for one degree of freedom 12.706.
    QVERIFY2(r.out.contains("2 pair(s)") && r.out.contains("95 % interval -6.32 % to +6.32 % (t, 1 degree of freedom)"),
             qPrintable(r.out));

    // Bad groups exit 2 with what is wrong.
    const QString b0 = QString::number(base_ids[0]), b1 = QString::number(base_ids[1]);
    r = mok_cli({"runs", "paired", b0, b0 + "," + b1, "--db", db});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("is in both groups"), qPrintable(r.err));
    r = mok_cli({"runs", "paired", b0 + "," + QString::number(run("exact", 1, 2.0)), "tag:kitten", "--db", db});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("both have seed 1"), qPrintable(r.err));
    r = mok_cli({"runs", "paired", "tag:exact", "tag:nosuch", "--db", db});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("no run has the tag 'nosuch'"), qPrintable(r.err));
    r = mok_cli({"runs", "paired", b0, QString::number(lone), "--db", db});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("no seed has a run with val/bpb in both groups"), qPrintable(r.err));
  }

  void usageErrorsExitTwo() {
    for (const QStringList& args : {QStringList{"runs"}, QStringList{"runs", "frobnicate"},
                                    QStringList{"runs", "show", "--db", db_}, QStringList{"runs", "show", "abc", "--db", db_},
                                    QStringList{"runs", "list", "--db", db_, "--status", "sleepy"},
                                    QStringList{"runs", "list", "--db"}, QStringList{"runs", "list", "--nope"}}) {
      const Result r = mok_cli(args);
      QVERIFY2(r.code == 2, qPrintable(args.join(' ') + " → " + QString::number(r.code)));
      QVERIFY(!r.err.isEmpty());
    }
    QCOMPARE(mok_cli({"runs", "--help"}).code, 0);
  }

  void storeErrorsExitOneAndTouchNothing() {
    const QString missing = dir_.path() + "/nowhere/mok.db";
    const Result r = mok_cli({"runs", "list", "--db", missing});
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("does not exist"));
    QVERIFY(!QFile::exists(missing));
    QVERIFY(!QDir(dir_.path() + "/nowhere").exists());

    const QString text = dir_.path() + "/notes.txt";
    {
      QFile f(text);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("not a database at all\n");
    }
    const QDateTime mtime = QFileInfo(text).lastModified();
    for (const QStringList& args : {QStringList{"runs", "list", "--db", text}, QStringList{"runs", "tag", "1", "x", "--db", text}}) {
      const Result bad = mok_cli(args);
      QCOMPARE(bad.code, 1);
      QVERIFY2(bad.err.contains("is not a MoK run store (not an SQLite database)"), qPrintable(bad.err));
    }
    QFile f(text);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("not a database at all\n"));
    QCOMPARE(QFileInfo(text).lastModified(), mtime);
  }
};

QTEST_GUILESS_MAIN(TestCliRuns)
#include "test_cli_runs.moc"
