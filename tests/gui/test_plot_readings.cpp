// What the plots show is what the run recorded: memory at its peak within the step, single
// points visible, nothing left over from the previous run, one axis per magnitude, ticks
// that can be read, legends off the data, and hover values that are real samples.
#include <cmath>

#include <QFontMetrics>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

// Designated initializers leave the other members at their defaults, on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "core/store/run_store.h"
#include "widgets/dashboard/live_dashboard.h"
#include "widgets/plot/layer_bar_plot.h"
#include "widgets/plot/metric_unit.h"
#include "widgets/plot/readable_ticker.h"
#include "widgets/plot/stacked_memory_plot.h"
#include "widgets/plot/streaming_plot.h"
#include "widgets/workbench/compare_page.h"
#include "widgets/workbench/run_manager.h"

using namespace mok;
using namespace mok::gui;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A training row as the trainer writes it: saved activations are freed by the end of the
// step (live 0) and recorded at their peak within it.
MetricRow train_row(int64_t step, bool with_eval) {
  MetricRow r;
  r.step = step;
  r.tokens = step * 256;
  r.wall_s = step * 0.1;
  r.values = {{"train/loss", 5.0 - 0.02 * double(step)},
              {"train/lr", 0.003},
              {"train/grad_norm", 0.5 + 0.01 * double(step)},
              {"mem/parameters_bytes", 1.0 * kMiB},
              {"mem/gradients_bytes", 1.0 * kMiB},
              {"mem/optimizer_state_bytes", 2.0 * kMiB},
              {"mem/saved_activations_bytes", 0.0},
              {"mem/workspace_bytes", 0.0},
              {"mem/communication_bytes", 0.0},
              {"mem/peak_bytes", 96.0 * kMiB},
              {"mem/peak_saved_activation_bytes", 92.5 * kMiB}};
  if (with_eval) {
    r.values.push_back({"val/loss", 4.0 - 0.01 * double(step)});
    r.values.push_back({"val/bpb", 4.0 + 0.001 * double(step)});
    r.values.push_back({"val/ppl", 90.0 - 0.1 * double(step)});
  }
  return r;
}

std::vector<MetricRow> run_rows(int64_t steps, int64_t eval_every) {
  std::vector<MetricRow> rows;
  for (int64_t s = 1; s <= steps; ++s) rows.push_back(train_row(s, s % eval_every == 0 || s == steps));
  return rows;
}

void flush_all(LiveDashboard& dash) {
  for (int i = 0; i < 2; ++i)  // the second pass sees the first one's layout
    for (CoalescedPlot* p : dash.plots()) p->flush();
}

// Fraction of the axis's span that the values of `curve` cover.
double span_share(StreamingPlot* plot, int curve) {
  double lo = INFINITY, hi = -INFINITY;
  for (const gui::MetricPoint& p : plot->points(curve)) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  return (hi - lo) / plot->value_axis(curve)->range().size();
}

}  // namespace

class TestPlotReadings : public QObject {
  Q_OBJECT

 private slots:
  void memory_by_category_shows_saved_activations_at_their_peak() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    dash.add_rows(run_rows(20, 10));
    flush_all(dash);
    StackedMemoryPlot* mem = dash.memory_plot();
    const int saved = int(mem->categories().indexOf("saved_activations"));
    QVERIFY(saved >= 0);
    QCOMPARE(mem->last_category_mib(saved), 92.5);
    QCOMPARE(mem->last_category_mib(0), 1.0);
    QCOMPARE(mem->last_peak_mib(), 96.0);
    QVERIFY2(mem->y_label().contains("peak in step"), qPrintable(mem->y_label()));
    // The axis reaches the peak line, not only the stack.
    QVERIFY(mem->plot()->yAxis->range().upper >= 96.0);
  }

  void a_single_evaluation_is_a_visible_marker_inside_the_range() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    dash.add_rows(run_rows(40, 50));  // eval_every beyond the run: one evaluation, at step 40
    flush_all(dash);
    StreamingPlot* val = dash.validation_plot();
    const int bpb = val->find_curve("val/bpb");
    QCOMPARE(val->point_count(bpb), 1);
    QVERIFY(val->curve_has_markers(bpb));
    const QCPRange x = val->plot()->xAxis->range();
    QVERIFY2(x.lower < 40.0 && x.upper > 40.0, qPrintable(QStringLiteral("%1..%2").arg(x.lower).arg(x.upper)));
    QVERIFY(val->value_axis(bpb)->range().contains(4.04));
    // A dense curve is a line without markers.
    StreamingPlot dense;
    dense.resize(400, 300);
    dense.show();
    const int c = dense.add_curve("train/loss");
    for (int i = 0; i < 2000; ++i) dense.append(c, gui::MetricPoint{i, i, double(i), 1.0 / (1 + i)});
    dense.flush();
    dense.flush();
    QVERIFY(!dense.curve_has_markers(c));
  }

  void switching_runs_leaves_no_hover_and_no_old_range() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dash));
    dash.add_rows(run_rows(500, 50));
    flush_all(dash);
    StreamingPlot* loss = dash.loss_plot();
    const QPoint centre = loss->plot()->axisRect()->rect().center();
    QTest::mouseMove(loss->plot(), centre);
    QTRY_VERIFY(loss->hover_visible());

    dash.clear();
    dash.add_rows(run_rows(40, 10));
    flush_all(dash);
    QVERIFY(!loss->hover_visible());
    for (StreamingPlot* p : {dash.loss_plot(), dash.validation_plot()}) {
      const QCPRange x = p->plot()->xAxis->range();
      QVERIFY2(x.upper < 60.0, qPrintable(QStringLiteral("%1: x up to %2").arg(p->title()).arg(x.upper)));
    }
    QCOMPARE(dash.validation_plot()->shown_empty_note(), QString());
    // A plot without data of this run shows none of the previous run's range either, and
    // says why it is empty.
    dash.clear();
    flush_all(dash);
    QCOMPARE(dash.validation_plot()->plot()->xAxis->range().upper, 1.0);
    QVERIFY(dash.validation_plot()->shown_empty_note().contains("no evaluation"));
    QVERIFY(dash.comm_plot()->shown_empty_note().contains("one rank"));
  }

  void exported_png_has_no_hover_box() {
    QTemporaryDir dir;
    StreamingPlot plot;
    plot.resize(500, 300);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    const int c = plot.add_curve("train/loss");
    for (int i = 1; i <= 50; ++i) plot.append(c, gui::MetricPoint{i, i, double(i), 5.0 - 0.05 * i});
    plot.flush();
    QVERIFY(plot.export_png(dir.filePath("clean.png"), 500, 300));
    QTest::mouseMove(plot.plot(), plot.plot()->axisRect()->rect().center());
    QTRY_VERIFY(plot.hover_visible());
    QVERIFY(plot.export_png(dir.filePath("after_hover.png"), 500, 300));
    QVERIFY(!plot.hover_visible());
    QCOMPARE(QImage(dir.filePath("after_hover.png")), QImage(dir.filePath("clean.png")));
  }

  void magnitudes_apart_get_their_own_axes() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    dash.add_rows(run_rows(60, 10));
    flush_all(dash);
    StreamingPlot* val = dash.validation_plot();
    const int bpb = val->find_curve("val/bpb"), ppl = val->find_curve("val/ppl");
    QVERIFY(val->value_axis(bpb) != val->value_axis(ppl));
    QVERIFY(val->value_axis(ppl)->visible());
    QVERIFY(!val->value_axis(bpb)->label().isEmpty() && !val->value_axis(ppl)->label().isEmpty());
    // Each curve spans a good part of its own axis instead of lying flat under the other.
    QVERIFY2(span_share(val, bpb) > 0.3, qPrintable(QString::number(span_share(val, bpb))));
    QVERIFY2(span_share(val, ppl) > 0.3, qPrintable(QString::number(span_share(val, ppl))));
    StreamingPlot* opt = dash.optimizer_plot();
    const int lr = opt->find_curve("train/lr"), grad = opt->find_curve("train/grad_norm");
    QVERIFY(opt->value_axis(lr) != opt->value_axis(grad));
    QVERIFY(opt->value_axis(lr)->range().contains(0.003));
    QVERIFY2(opt->value_axis(lr)->range().size() < 0.01, qPrintable(QString::number(opt->value_axis(lr)->range().size())));
  }

  void kitten_rank_axis_explains_all_zero_ranks() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    MetricRow r = train_row(1, false);
    r.values.push_back({"kittens/rank/layer0", 0});
    r.values.push_back({"kittens/rank/layer1", 0});
    r.values.push_back({"mem/saved/layer0/mlp.input", 1.0 * kMiB});
    dash.add_rows({r});
    flush_all(dash);
    QVERIFY2(dash.layer_plot()->shown_note().contains("rank 0"), qPrintable(dash.layer_plot()->shown_note()));
    MetricRow s = train_row(2, false);
    s.values.push_back({"kittens/rank/layer0", 8});
    s.values.push_back({"kittens/rank/layer1", 16});
    dash.add_rows({s});
    flush_all(dash);
    QCOMPARE(dash.layer_plot()->shown_note(), QString());
    QVERIFY(dash.layer_plot()->plot()->yAxis2->range().contains(16.0));
  }

  void tick_labels_do_not_run_together() {
    StackedMemoryPlot mem;
    mem.set_categories({"parameters", "saved_activations"});
    mem.resize(330, 220);
    mem.show();
    QVERIFY(QTest::qWaitForWindowExposed(&mem));
    for (int s = 10; s <= 15; ++s) mem.append(gui::MetricPoint{s, s * 256, s * 0.1, 0}, {1.0 * kMiB, 2.0 * kMiB});
    mem.flush();
    mem.flush();
    QCPAxis* x = mem.plot()->xAxis;
    const QVector<double> ticks = x->tickVector();
    const QVector<QString> labels = x->tickVectorLabels();
    QVERIFY(ticks.size() >= 2);
    const QFontMetrics metrics(x->tickLabelFont());
    for (int i = 0; i < ticks.size(); ++i) {
      QCOMPARE(ticks[i], std::round(ticks[i]));  // steps are whole numbers
      if (i == 0) continue;
      const double gap = x->coordToPixel(ticks[i]) - x->coordToPixel(ticks[i - 1]);
      const double needed = (metrics.horizontalAdvance(labels[i]) + metrics.horizontalAdvance(labels[i - 1])) / 2.0;
      QVERIFY2(gap > needed + 4, qPrintable(QStringLiteral("'%1' and '%2' are %3 px apart").arg(labels[i - 1], labels[i]).arg(gap)));
    }
    QCOMPARE(nice_step_at_least(0.3), 0.5);
    QCOMPARE(nice_step_at_least(2.0), 2.0);
    QCOMPARE(nice_step_at_least(2.1), 2.5);
    QCOMPARE(nice_step_at_least(26.0), 50.0);
  }

  void legends_sit_off_the_data() {
    LiveDashboard dash;
    dash.resize(1200, 800);
    dash.show();
    dash.add_rows(run_rows(60, 10));
    flush_all(dash);
    for (StreamingPlot* p : {dash.loss_plot(), dash.validation_plot(), dash.comm_plot()}) {
      QVERIFY(p->plot()->legend->visible());
      QVERIFY2(!p->plot()->legend->outerRect().intersects(p->plot()->axisRect()->rect()), qPrintable(p->title()));
    }
    StackedMemoryPlot* mem = dash.memory_plot();
    QVERIFY(!mem->plot()->legend->outerRect().intersects(mem->plot()->axisRect()->rect()));
  }

  // Every legend entry is shown whole: inside the plot, as wide as its text needs (a
  // dashboard a third narrower than a 1600-pixel screen's).
  void legend_entries_show_whole() {
    LiveDashboard dash;
    dash.resize(1000, 750);
    dash.show();
    dash.add_rows(run_rows(60, 10));
    flush_all(dash);
    for (StreamingPlot* p : {dash.loss_plot(), dash.validation_plot(), dash.throughput_plot(), dash.comm_plot(),
                             dash.optimizer_plot()}) {
      p->plot()->replot();
      QCPLegend* legend = p->plot()->legend;
      QVERIFY(legend->itemCount() > 0);
      for (int i = 0; i < legend->itemCount(); ++i) {
        QCPAbstractLegendItem* item = legend->item(i);
        auto* entry = qobject_cast<QCPPlottableLegendItem*>(item);
        const QString text = entry ? entry->plottable()->name() : QString();
        const QString where = QStringLiteral("%1: '%2'").arg(p->title(), text);
        QVERIFY2(p->plot()->viewport().contains(item->outerRect()), qPrintable(where + " leaves the plot"));
        QVERIFY2(item->outerRect().width() >= item->minimumOuterSizeHint().width(), qPrintable(where + " is cut"));
      }
    }
  }

  void hover_shows_the_nearest_real_sample_with_its_step() {
    StreamingPlot plot;
    const int train = plot.add_curve("train/loss");
    const int val = plot.add_curve("val/loss");
    for (int s = 1; s <= 40; ++s) {
      plot.append(train, gui::MetricPoint{s, s, double(s), 5.0 - 0.01 * s});
      if (s % 10 == 0) plot.append(val, gui::MetricPoint{s, s, double(s), 100.0 + s});
    }
    plot.flush();
    const QStringList lines = plot.hover_text_at(27.0).split('\n');
    QCOMPARE(lines.size(), 2);
    QVERIFY2(lines[0].startsWith("train/loss: 4.73") && lines[0].endsWith("step 27"), qPrintable(lines[0]));
    // val/loss was measured at steps 10, 20, 30, 40: the hover gives step 30's value and says so.
    QCOMPARE(lines[1], QStringLiteral("val/loss: 130  @ step 30"));
  }

  void compare_plot_names_its_unit_and_shows_a_single_point() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.db");
    QList<qint64> ids;
    {
      RunStore store = RunStore::open(db.toStdString());
      for (const char* name : {"quickstart", "quickstart"}) {
        const int64_t id = store.create_run({.name = name, .environment = RunEnvironment{}});
        for (const MetricRow& r : run_rows(40, 50)) store.append_metrics(id, r);
        store.set_status(id, RunStatus::finished);
        ids << id;
      }
    }
    RunManager runs;
    runs.set_db_path(db);
    ComparePage page(&runs);
    page.resize(1200, 800);
    page.show();
    page.set_runs(ids);
    page.set_metric("val/bpb");
    page.plot()->flush();
    page.plot()->flush();
    QCOMPARE(page.plot()->plot()->yAxis->label(), QStringLiteral("val/bpb (bits per byte)"));
    QCOMPARE(page.plot()->curve_count(), 2);
    for (int c = 0; c < 2; ++c) {
      QCOMPARE(page.plot()->point_count(c), 1);
      QVERIFY(page.plot()->curve_has_markers(c));
    }
    const QCPRange x = page.plot()->plot()->xAxis->range();
    QVERIFY(x.lower < 40.0 && x.upper > 40.0);
    page.set_metric("mem/peak_bytes");
    page.plot()->flush();
    QCOMPARE(page.plot()->plot()->yAxis->label(), QStringLiteral("mem/peak_bytes (MiB)"));
    QCOMPARE(page.plot()->points(0).back().value, 96.0);  // MiB, as the summary table shows it
    QCOMPARE(metric_unit("comm/remote_bytes").unit, QStringLiteral("MiB"));
  }
};

QTEST_MAIN(TestPlotReadings)
#include "test_plot_readings.moc"
