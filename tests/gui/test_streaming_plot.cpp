// Live plots: data fed from worker threads all arrive, replots are coalesced onto the
// single-shot timer, smoothing/x-mode/log/autoscale behave, linked zoom propagates.
#include <cmath>
#include <thread>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include "widgets/plot/expert_load_heat_map.h"
#include "widgets/plot/plot_group.h"
#include "widgets/plot/stacked_memory_plot.h"
#include "widgets/plot/streaming_plot.h"

using namespace mok::gui;

class TestStreamingPlot : public QObject {
  Q_OBJECT

 private slots:
  void robust_range_ignores_a_spike() {
    std::vector<double> v;
    for (int i = 0; i < 1000; ++i) v.push_back(2.0 + 0.001 * i);
    v.push_back(1e6);  // one outlier
    std::vector<double> copy = v;
    ValueRange robust = robust_value_range(copy, 0.01, 0.99, 0.0, false);
    QVERIFY(robust.valid);
    QVERIFY(robust.hi < 3.1);
    copy = v;
    ValueRange full = robust_value_range(copy, 0.0, 1.0, 0.0, false);
    QCOMPARE(full.hi, 1e6);
    std::vector<double> negatives = {-1.0, 0.0, 5.0, 10.0};
    ValueRange log_range = robust_value_range(negatives, 0.0, 1.0, 0.0, true);
    QVERIFY(log_range.lo > 0.0);
  }

  void ema_is_debiased() {
    EmaSmoother ema(0.9);
    QCOMPARE(ema.push(4.0), 4.0);  // first value is not pulled towards 0
    double s = ema.push(2.0);
    QVERIFY(s > 2.0 && s < 4.0);
    EmaSmoother raw(0.0);
    QCOMPARE(raw.push(7.5), 7.5);
  }

  // 100k points per curve from three worker threads: every point arrives, and the number
  // of replots is far below the number of append calls. Prints the time it took.
  void hundred_thousand_points_from_threads() {
    StreamingPlot plot;
    plot.resize(800, 400);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot) || true);
    const int curves = 3, points = 100000, batch = 50;
    for (int c = 0; c < curves; ++c) plot.add_curve(QStringLiteral("c%1").arg(c));
    const int replots_before = plot.replot_count();
    QElapsedTimer timer;
    timer.start();
    std::vector<std::thread> workers;
    for (int c = 0; c < curves; ++c) {
      workers.emplace_back([&plot, c] {
        std::vector<MetricPoint> chunk;
        for (int i = 0; i < points; ++i) {
          chunk.push_back(MetricPoint{i, int64_t(i) * 512, i * 0.01, 3.0 + std::sin(i * 0.001) + c});
          if (int(chunk.size()) == batch) plot.append(c, chunk), chunk.clear();
        }
      });
    }
    for (auto& w : workers) w.join();
    QTRY_COMPARE_WITH_TIMEOUT(plot.point_count(0) + plot.point_count(1) + plot.point_count(2), curves * points, 20000);
    QTRY_VERIFY(plot.replot_count() > replots_before);
    const int appends = curves * points / batch;
    const int replots = plot.replot_count() - replots_before;
    qInfo("100k points x %d curves: %lld ms, %d appends, %d replots", curves, (long long)timer.elapsed(), appends, replots);
    QVERIFY(replots < appends / 10);
    for (int c = 0; c < curves; ++c) {
      QCOMPARE(plot.plot()->graph(2 * c + 1)->data()->size(), points);  // smoothed graph
      QCOMPARE(plot.points(c).back().step, int64_t(points - 1));
    }
    QElapsedTimer t2;
    t2.start();
    plot.set_smoothing(0.9);
    plot.flush();
    qInfo("smoothing rebuild + replot of %d points: %lld ms", curves * points, (long long)t2.elapsed());
  }

  // Appends made without returning to the event loop collapse into exactly one drain.
  void appends_between_timer_ticks_coalesce() {
    StreamingPlot plot;
    plot.resize(400, 300);
    plot.show();
    int c = plot.add_curve("loss");
    QTest::qWait(100);
    const int before = plot.replot_count();
    for (int i = 0; i < 1000; ++i) plot.append(c, MetricPoint{i, i, double(i), 1.0 / (1 + i)});
    QCOMPARE(plot.point_count(c), 0);  // nothing drawn before the timer fires
    QTRY_COMPARE(plot.point_count(c), 1000);
    QTest::qWait(3 * CoalescedPlot::kReplotIntervalMs);
    QCOMPARE(plot.replot_count() - before, 1);
  }

  void x_axis_modes_and_log_scale() {
    StreamingPlot plot;
    plot.resize(400, 300);
    plot.show();
    int c = plot.add_curve("ppl");
    for (int i = 1; i <= 10; ++i) plot.append(c, MetricPoint{i, i * 1000, i * 0.5, std::pow(10.0, i)});
    plot.flush();
    QCOMPARE(plot.plot()->xAxis->range().upper, 10.0);
    plot.set_x_axis_mode(XAxisMode::tokens);
    plot.flush();
    QCOMPARE(plot.plot()->xAxis->range().upper, 10000.0);
    QCOMPARE(plot.plot()->xAxis->label(), QStringLiteral("tokens"));
    plot.set_x_axis_mode(XAxisMode::wall_time);
    plot.flush();
    QCOMPARE(plot.plot()->xAxis->range().upper, 5.0);
    plot.set_log_y(true);
    plot.flush();
    QCOMPARE(plot.plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    QVERIFY(plot.plot()->yAxis->range().lower > 0.0);
    const QString hover = plot.hover_text_at(2.4);
    QVERIFY2(hover.contains("ppl: 1e+05"), qPrintable(hover));  // nearest point: wall 2.5 s, step 5
  }

  void linked_zoom_and_reset() {
    PlotGroup group;
    StreamingPlot a, b;
    group.add(&a);
    group.add(&b);
    for (StreamingPlot* p : {&a, &b}) {
      int c = p->add_curve("x");
      for (int i = 0; i < 100; ++i) p->append(c, MetricPoint{i, i, double(i), double(i)});
      p->resize(300, 200);
      p->show();
      p->flush();
    }
    a.plot()->xAxis->setRange(10, 20);  // as a drag or wheel would
    QCOMPARE(b.plot()->xAxis->range().lower, 10.0);
    QCOMPARE(b.plot()->xAxis->range().upper, 20.0);
    QVERIFY(!b.following_x());
    // y follows the visible x range
    QVERIFY(b.plot()->yAxis->range().upper < 40.0);
    group.reset_view();
    QVERIFY(a.following_x() && b.following_x());
    QCOMPARE(b.plot()->xAxis->range().upper, 99.0);
  }

  void stacked_memory_and_heat_map() {
    StackedMemoryPlot mem;
    mem.set_categories({"parameters", "gradients", "saved_activations"});
    const double mib = 1024.0 * 1024.0;
    mem.append(MetricPoint{1, 10, 0.1, 0}, {1 * mib, 2 * mib, 3 * mib});
    mem.append(MetricPoint{2, 20, 0.2, 0}, {1 * mib, 2 * mib, 5 * mib});
    mem.flush();
    QCOMPARE(mem.row_count(), 2);
    QCOMPARE(mem.last_total_mib(), 8.0);

    ExpertLoadHeatMap heat;
    heat.set_expert_count(4);
    for (int s = 0; s < 1000; ++s) heat.append(MetricPoint{s, s, double(s), 0}, {0.1, 0.2, 0.3, 0.4});
    heat.flush();
    QCOMPARE(heat.row_count(), 1000);
    QCOMPARE(heat.column_count(), ExpertLoadHeatMap::kMaxColumns);
    QCOMPARE(heat.cell(7, 3), 0.4);
  }

  void export_png_and_pdf() {
    QTemporaryDir dir;
    StreamingPlot plot;
    int c = plot.add_curve("loss");
    for (int i = 0; i < 100; ++i) plot.append(c, MetricPoint{i, i, double(i), 5.0 - 0.01 * i});
    QVERIFY(plot.export_png(dir.filePath("p.png"), 640, 360));
    QVERIFY(plot.export_pdf(dir.filePath("p.pdf"), 640, 360));
    QImage img(dir.filePath("p.png"));
    QCOMPARE(img.width(), 640);
    QVERIFY(QFileInfo(dir.filePath("p.pdf")).size() > 500);
  }
};

QTEST_MAIN(TestStreamingPlot)
#include "test_streaming_plot.moc"
