// Two settings over seeds on the Compare page: with the baseline's setting (exact) and another
// (kitten) checked, three seeds each, the note shows the other setting's difference in the
// chosen metric paired by seed — its mean, standard error and 95 % interval, as `mok runs
// paired` computes them — and follows the metric; it is hidden where no seed pairs up.
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <algorithm>
#include <cmath>

#include "core/store/paired_comparison.h"
#include "core/store/run_store.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/run_manager.h"

using namespace mok;
using namespace mok::gui;

class TestCompareSeeds : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_;
  std::vector<int64_t> exact_, kitten_;
  int64_t other_model_ = 0;
  const double exact_bpb_[3] = {2.00, 2.02, 1.99}, kitten_bpb_[3] = {2.01, 2.01, 2.00};

  static std::string config(const char* mode, int seed, int layers = 4) {
    return "name: " + std::string(mode) + "_seed" + std::to_string(seed) + "\nseed: " + std::to_string(seed) +
           "\nmodel: {layers: " + std::to_string(layers) + "}\nkittens: {mode: " + mode +
           "}\nlogging: {checkpoint_dir: ck/" + mode + std::to_string(seed) + "}\n";
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db");
    RunStore store = RunStore::open(db_.toStdString());
    auto add = [&](const char* mode, int seed, double bpb, int layers = 4) {
      const int64_t id = store.create_run({.name = std::string(mode) + "_seed" + std::to_string(seed),
                                           .config_yaml = config(mode, seed, layers)});
      MetricRow row;
      row.step = 9;  // per-step metrics count from the second logged step (skip 1, as runs compare)
      row.values = {{"train/loss", 9.0}};
      store.append_metrics(id, row);
      row.step = 10;
      row.values = {{"val/bpb", bpb}, {"train/loss", bpb * 0.7}};
      store.append_metrics(id, row);
      return id;
    };
    for (int s = 0; s < 3; ++s) {
      exact_.push_back(add("exact", s + 1, exact_bpb_[s]));
      kitten_.push_back(add("kitten", s + 1, kitten_bpb_[s]));
    }
    other_model_ = add("exact", 1, 1.5, 8);  // another model: a setting of its own, seed 1
  }

  void settingsGroupBySeedAlone() {
    QCOMPARE(setting_key(config("exact", 1)), setting_key(config("exact", 2)));
    QVERIFY(setting_key(config("exact", 1)) != setting_key(config("kitten", 1)));
    QVERIFY(setting_key(config("exact", 1)) != setting_key(config("exact", 1, 8)));
  }

  void noteShowsThePairedDifference() {
    RunManager runs;
    runs.set_db_path(db_);
    ComparePage page(&runs);
    page.resize(1200, 800);
    page.show();
    QList<qint64> ids;
    for (size_t s = 0; s < 3; ++s) ids << exact_[s] << kitten_[s];
    page.set_runs(ids);  // baseline: the first, exact seed 1
    page.set_metric("val/bpb");
    QVERIFY(page.seeds_note()->isVisible());
    double d[3], mean = 0.0;
    for (int s = 0; s < 3; ++s) {
      d[s] = (kitten_bpb_[s] / exact_bpb_[s] - 1.0) * 100.0;
      mean += d[s] / 3.0;
    }
    double ss = 0.0;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double se = std::sqrt(ss / 2.0 / 3.0), half = 4.303 * se;  // t, 2 degrees of freedom
    const QString text = page.seeds_note()->text();
    QVERIFY2(text.startsWith("val/bpb against the baseline's setting, paired by seed"), qPrintable(text));
    QVERIFY2(text.contains(QString::asprintf("%+.2f %% ± %.2f %% (standard error) over 3 seeds", mean, se)),
             qPrintable(text));
    QVERIFY2(text.contains(QString::asprintf("95 %% interval %+.2f %% to %+.2f %%", mean - half, mean + half)),
             qPrintable(text));
    QVERIFY2(text.contains("higher than the baseline's run on 2 of them"), qPrintable(text));  // seed 2 is lower
    QVERIFY2(text.contains("kitten_seed1"), qPrintable(text));

    // Another metric, another difference: train/loss is 0.7 × bpb here, so the same percentages.
    page.set_metric("train/loss");
    const QString loss = page.seeds_note()->text();
    QVERIFY2(loss.startsWith("train/loss against") && loss.contains(QString::asprintf("%+.2f %% ± %.2f %%", mean, se)),
             qPrintable(loss));

    // With kitten as the baseline, exact is the other setting: exact/kitten − 1 per seed.
    page.set_metric("val/bpb");
    page.set_baseline(kitten_[0]);
    double back = 0.0;
    for (int s = 0; s < 3; ++s) back += (exact_bpb_[s] / kitten_bpb_[s] - 1.0) * 100.0 / 3.0;
    const QString turned = page.seeds_note()->text();
    QVERIFY2(turned.contains("exact_seed1") && turned.contains(QString::asprintf("%+.2f %% ±", back)) && back < 0.0,
             qPrintable(turned));
  }

  // Every figure of two runs fits a page 1100 pixels wide without a horizontal scroll bar:
  // labels and cells take two lines (value, then ×ratio), and each cell shows whole.
  void summaryFitsWithoutScrolling() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString db = dir.filePath("figures.db");
    QList<qint64> ids;
    {
      RunStore store = RunStore::open(db.toStdString());
      for (int r = 0; r < 2; ++r) {
        const int64_t id = store.create_run({.name = r ? "kitten-long-name" : "exact-long-name",
                                             .config_yaml = config(r ? "kitten" : "exact", 1)});
        for (int step = 1; step <= 10; ++step) {
          MetricRow row;
          row.step = step;
          row.wall_s = 12.5 * step;
          row.values = {{"train/loss", 3.1234 - 0.01 * step - 0.2 * r},
                        {"val/bpb", 2.3456 + 0.1 * r},
                        {"val/ppl", 22.175 + r},
                        {"perf/tokens_per_s", 78912.0 / (1 + r)},
                        {"mem/peak_bytes", 3.1e9 * (1 - 0.1 * r)},
                        {"mem/peak_saved_activation_bytes", 1.7e9 * (1 - 0.3 * r)},
                        {"comm/remote_bytes", 1.234e9 * (1 + r)}};
          store.append_metrics(id, row);
        }
        ids << id;
      }
    }
    RunManager runs;
    runs.set_db_path(db);
    ComparePage page(&runs);
    page.resize(1100, 800);
    page.show();
    page.set_runs(ids);
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    QTableView* view = page.summary_view();
    QHeaderView* header = view->horizontalHeader();
    QCOMPARE(view->model()->columnCount(), 9);
    int width = 0;
    for (int c = 0; c < header->count(); ++c) width += header->sectionSize(c);
    QVERIFY2(width <= view->viewport()->width(),
             qPrintable(QStringLiteral("columns %1 px in a %2 px view").arg(width).arg(view->viewport()->width())));
    // The other run's cells hold the ratio on a second line, and the row is tall enough for it.
    const int other = view->model()->index(0, 0).data().toString().contains("(baseline)") ? 1 : 0;
    const QModelIndex cell = view->model()->index(other, 1);
    QVERIFY2(cell.data().toString().contains("\n×"), qPrintable(cell.data().toString()));
    QVERIFY(view->rowHeight(other) >= 2 * view->fontMetrics().height());
    for (int c = 0; c < header->count(); ++c) {
      const QString text = view->model()->index(other, c).data().toString();
      int needed = 0;
      for (const QString& line : text.split('\n')) needed = std::max(needed, view->fontMetrics().horizontalAdvance(line));
      QVERIFY2(header->sectionSize(c) >= needed, qPrintable(QStringLiteral("'%1' is cut").arg(text)));
    }
  }

  void noteHiddenWithoutPairs() {
    RunManager runs;
    runs.set_db_path(db_);
    ComparePage page(&runs);
    page.show();
    page.set_runs({exact_[0], exact_[1]});  // one setting
    page.set_metric("val/bpb");
    QVERIFY(!page.seeds_note()->isVisible());
    page.set_runs({exact_[1], other_model_});  // two settings, no seed in common
    QVERIFY(!page.seeds_note()->isVisible());
    page.set_runs({exact_[0], other_model_});  // seed 1 in both: one pair, no spread
    QVERIFY(page.seeds_note()->isVisible());
    QVERIFY2(page.seeds_note()->text().contains("on one seed (no spread to judge it by)"),
             qPrintable(page.seeds_note()->text()));
  }
};

QTEST_MAIN(TestCompareSeeds)
#include "test_compare_seeds.moc"
