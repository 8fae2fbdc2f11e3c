// Item models of the runs browser and Compare page, checked by QAbstractItemModelTester
// through inserts, updates, removals, filtering and sorting.
#include <QAbstractItemModelTester>
#include <QtTest>

#include "widgets/models/compare_summary_model.h"
#include "widgets/models/config_diff_model.h"
#include "widgets/models/flatten_yaml.h"
#include "widgets/models/run_table_model.h"

using namespace mok::gui;

static RunRecord make_run(int64_t id, const QString& name, const QString& status, double bpb, double tps) {
  RunRecord r;
  r.id = id;
  r.name = name;
  r.status = status;
  r.model = "2L d32 4e top2";
  r.policy = id % 2 ? "mok/locality" : "classic/topk";
  r.best_val_bpb = bpb;
  r.tokens_per_s = tps;
  r.tokens = id * 1000;
  return r;
}

class TestItemModels : public QObject {
  Q_OBJECT

 private slots:
  void run_table_and_proxy() {
    RunTableModel model;
    RunFilterProxy proxy;
    proxy.setSourceModel(&model);
    QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);

    model.set_runs({make_run(1, "baseline", "finished", 2.1, 900), make_run(2, "kitten r8", "running", NAN, 1500),
                    make_run(3, "kitten r16", "failed", 2.05, 1200)});
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(proxy.rowCount(), 3);

    // Numeric sort on best bpb, missing values last.
    proxy.sort(RunTableModel::BestBpb, Qt::AscendingOrder);
    QCOMPARE(proxy.index(0, RunTableModel::Name).data().toString(), QStringLiteral("kitten r16"));
    QCOMPARE(proxy.index(2, RunTableModel::Name).data().toString(), QStringLiteral("kitten r8"));
    proxy.sort(RunTableModel::TokensPerS, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, RunTableModel::Name).data().toString(), QStringLiteral("kitten r8"));

    proxy.set_search_text("KITTEN");
    QCOMPARE(proxy.rowCount(), 2);
    proxy.set_search_text("kitten locality");  // every word must match somewhere (only run 3)
    QCOMPARE(proxy.rowCount(), 1);
    proxy.set_search_text("");
    proxy.set_status_filter("failed");
    QCOMPARE(proxy.rowCount(), 1);
    proxy.set_status_filter("");

    RunRecord updated = make_run(2, "kitten r8", "finished", 2.2, 1500);
    updated.tags = {"sweep"};
    model.upsert(updated);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.index(1, RunTableModel::Status).data().toString(), QStringLiteral("finished"));
    proxy.set_search_text("sweep");
    QCOMPARE(proxy.rowCount(), 1);
    proxy.set_search_text("");

    model.upsert(make_run(4, "new", "queued", NAN, NAN));
    QCOMPARE(proxy.rowCount(), 4);
    RunRecord archived = make_run(4, "new", "stopped", NAN, NAN);
    archived.archived = true;
    model.upsert(archived);
    QCOMPARE(proxy.rowCount(), 3);  // archived runs hidden by default
    proxy.set_show_archived(true);
    QCOMPARE(proxy.rowCount(), 4);
    QVERIFY(model.remove(1));
    QVERIFY(!model.remove(1));
    QCOMPARE(model.row_of(1), -1);
    QCOMPARE(proxy.rowCount(), 3);
  }

  void formatting() {
    QCOMPARE(format_bytes(1536.0), QStringLiteral("1.50 KiB"));
    QCOMPARE(format_bytes(200.0 * 1024 * 1024), QStringLiteral("200.0 MiB"));
    QCOMPARE(format_count(1.5e6), QStringLiteral("1.50M"));
  }

  void flatten_and_diff() {
    auto a = flatten_yaml("name: a\nmodel: {layers: 2, d_model: 32}\nrouting: {dispatcher: classic}\n");
    auto b = flatten_yaml("name: b\nmodel: {layers: 2, d_model: 64}\nrouting: {dispatcher: mok}\nextra: [1, 2]\n");
    QCOMPARE(QString::fromStdString(a.at("model.d_model")), QStringLiteral("32"));
    QCOMPARE(QString::fromStdString(b.at("extra")), QStringLiteral("[1, 2]"));
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, flatten_yaml("a: [1, 2"));

    auto to_q = [](const std::map<std::string, std::string>& m) {
      std::map<QString, QString> out;
      for (const auto& [k, v] : m) out[QString::fromStdString(k)] = QString::fromStdString(v);
      return out;
    };
    ConfigDiffModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_runs({{"a", to_q(a)}, {"b", to_q(b)}});
    QCOMPARE(model.columnCount(), 3);
    QCOMPARE(model.rowCount(), 5);  // extra, model.d_model, model.layers, name, routing.dispatcher
    model.set_only_differences(true);
    QCOMPARE(model.keys(), QStringList({"extra", "model.d_model", "name", "routing.dispatcher"}));
    const int row = model.keys().indexOf("model.d_model");
    QVERIFY(model.index(row, 2).data(ConfigDiffModel::kDiffersRole).toBool());
    QVERIFY(!model.index(row, 1).data(ConfigDiffModel::kDiffersRole).toBool());
    QCOMPARE(model.index(model.keys().indexOf("extra"), 1).data().toString(), QStringLiteral("–"));
    model.set_baseline(1);
    QVERIFY(model.index(row, 1).data(ConfigDiffModel::kDiffersRole).toBool());
    QVERIFY(model.headerData(2, Qt::Horizontal).toString().contains("baseline"));
    model.set_only_differences(false);
    QCOMPARE(model.rowCount(), 5);
  }

  void summary_ratios() {
    CompareSummaryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_rows({{"base", {{"val/bpb", 2.0}, {"perf/tokens_per_s", 1000.0}}},
                    {"kitten", {{"val/bpb", 2.2}, {"perf/tokens_per_s", 2500.0}}}});
    const int bpb = 0, tps = 3;
    QCOMPARE(model.ratio(1, bpb), 1.1);
    QCOMPARE(model.ratio(1, tps), 2.5);
    QVERIFY(std::isnan(model.ratio(1, 4)));  // peak memory missing
    QVERIFY(model.index(1, 1 + bpb).data().toString().contains("×1.100"));
    model.set_baseline(1);
    QCOMPARE(model.ratio(0, tps), 0.4);
    QVERIFY(model.index(1, 0).data().toString().contains("baseline"));
  }
};

QTEST_MAIN(TestItemModels)
#include "test_item_models.moc"
