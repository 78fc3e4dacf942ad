// Time ↔ pixel mapping, tick generation and the zoom stack: no display needed.
#include "gui/model/time_scale.h"

#include <QSignalSpy>
#include <QTest>
#include <cmath>

#include "gui/model/zoom_stack.h"

using namespace ddpscope;
using namespace ddpscope::gui;

class TimeScaleTest : public QObject {
  Q_OBJECT
 private slots:
  void pixelToTimeToPixelRoundTrips_data();
  void pixelToTimeToPixelRoundTrips();
  void timeToPixelToTimeRoundTripsWhenPixelsAreFinerThanNanoseconds();
  void ticksAreNiceEvenlySpacedAndLabelled();
  void formatsDurationsWithUnits();
  void zoomStackHistoryAndWheelGestures();
  void zoomStackClampsAndPans();
  void zoomStackUpdateFullRangeKeepsUserZoom();
};

void TimeScaleTest::pixelToTimeToPixelRoundTrips_data() {
  QTest::addColumn<qint64>("startNs");
  QTest::addColumn<qint64>("endNs");
  QTest::addColumn<double>("x0");
  QTest::addColumn<double>("width");
  QTest::newRow("1 µs over 1000 px") << qint64(0) << qint64(1000) << 150.0 << 1000.0;
  QTest::newRow("1 s over 1234 px") << qint64(5'000'000) << qint64(1'005'000'000) << 0.0 << 1234.0;
  QTest::newRow("negative start") << qint64(-7'777'777) << qint64(3'333'333) << 42.5 << 777.0;
  QTest::newRow("hour over 3 px") << qint64(0) << qint64(3'600'000'000'000) << 10.0 << 3.0;
}

void TimeScaleTest::pixelToTimeToPixelRoundTrips() {
  QFETCH(qint64, startNs);
  QFETCH(qint64, endNs);
  QFETCH(double, x0);
  QFETCH(double, width);
  TimeScale scale{Nanos(startNs), Nanos(endNs), x0, width};
  QCOMPARE(scale.toPixel(scale.start), x0);
  QVERIFY(std::fabs(scale.toPixel(scale.end) - (x0 + width)) < 1e-6);
  // Rounding to whole ns moves a pixel by at most half a nanosecond's width.
  const double tolerance = 0.5 * scale.pixelsPerNs() + 1e-9;
  for (double px = x0 - 20; px <= x0 + width + 20; px += 0.37) {
    double back = scale.toPixel(scale.toTime(px));
    QVERIFY2(std::fabs(back - px) <= tolerance,
             qPrintable(QString("px %1 → %2").arg(px).arg(back)));
  }
}

void TimeScaleTest::timeToPixelToTimeRoundTripsWhenPixelsAreFinerThanNanoseconds() {
  TimeScale scale{Nanos(1000), Nanos(1500), 100, 1000};  // 2 px per ns
  for (int64_t t = 900; t <= 1600; ++t) QCOMPARE(scale.toTime(scale.toPixel(Nanos(t))), Nanos(t));
  QCOMPARE(scale.durationOf(2.0), Nanos(1));
}

void TimeScaleTest::ticksAreNiceEvenlySpacedAndLabelled() {
  TimeScale scale{Nanos(0), Nanos::fromMillis(183), 150, 1200};
  auto ticks = computeTicks(scale, 90.0);
  QVERIFY(ticks.size() >= 5);
  Nanos step = ticks[1].time - ticks[0].time;
  QCOMPARE(step, Nanos::fromMillis(20));
  QVERIFY((ticks[1].x - ticks[0].x) >= 90.0);
  QCOMPARE(QString::fromStdString(ticks[0].label), QString("0 ms"));
  QCOMPARE(QString::fromStdString(ticks[1].label), QString("20 ms"));
  for (size_t i = 1; i < ticks.size(); ++i) QCOMPARE(ticks[i].time - ticks[i - 1].time, step);
  // Relative to an origin: a window starting at 1.5 µs with 0.5 µs steps.
  TimeScale fine{Nanos(1'500), Nanos(4'000), 0, 500};
  auto fineTicks = computeTicks(fine, 90.0, Nanos(0));
  QCOMPARE(QString::fromStdString(fineTicks[0].label), QString("1.5 µs"));
  QCOMPARE(niceTickStep(Nanos(1000), 1000, 50), Nanos(50));
  QCOMPARE(niceTickStep(Nanos(1000), 1000, 100), Nanos(100));
  QCOMPARE(niceTickStep(Nanos(1000), 1000, 150), Nanos(200));
}

void TimeScaleTest::formatsDurationsWithUnits() {
  QCOMPARE(QString::fromStdString(formatDuration(Nanos(850))), QString("850 ns"));
  QCOMPARE(QString::fromStdString(formatDuration(Nanos(12'500))), QString("12.5 µs"));
  QCOMPARE(QString::fromStdString(formatDuration(Nanos(1'250'000))), QString("1.25 ms"));
  QCOMPARE(QString::fromStdString(formatDuration(Nanos(2'310'000'000))), QString("2.31 s"));
  QCOMPARE(QString::fromStdString(formatDuration(Nanos(-340'000))), QString("-340 µs"));
  QCOMPARE(QString::fromStdString(formatTickLabel(Nanos(2'500'000), Nanos(500'000))),
           QString("2.5 ms"));
}

void TimeScaleTest::zoomStackHistoryAndWheelGestures() {
  ZoomStack zoom;
  QSignalSpy changed(&zoom, &ZoomStack::rangeChanged);
  zoom.setFullRange(Nanos(0), Nanos(1'000'000));
  QVERIFY(!zoom.canGoBack());
  zoom.zoomTo(Nanos(100'000), Nanos(200'000));
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(100'000), Nanos(200'000)}));
  QCOMPARE(zoom.historyDepth(), 1);
  // A wheel gesture: the anchor keeps its relative position; one history entry for all steps.
  zoom.zoomAround(Nanos(125'000), 0.5);
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(112'500), Nanos(162'500)}));
  zoom.zoomAround(Nanos(125'000), 0.5);
  zoom.zoomAround(Nanos(125'000), 2.0);
  QCOMPARE(zoom.historyDepth(), 2);
  QVERIFY(zoom.back());
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(100'000), Nanos(200'000)}));
  QVERIFY(zoom.back());
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(0), Nanos(1'000'000)}));
  QVERIFY(!zoom.back());
  zoom.zoomTo(Nanos(10), Nanos(20'000));
  zoom.reset();
  QCOMPARE(zoom.range(), zoom.fullRange());
  QVERIFY(zoom.back());
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(10), Nanos(20'000)}));
  QVERIFY(changed.count() >= 8);
}

void TimeScaleTest::zoomStackClampsAndPans() {
  ZoomStack zoom;
  zoom.setFullRange(Nanos(0), Nanos(1'000'000));
  zoom.zoomTo(Nanos(500), Nanos(510));  // narrower than kMinSpan
  QCOMPARE(zoom.range().end - zoom.range().start, ZoomStack::kMinSpan);
  int depth = zoom.historyDepth();
  zoom.panBy(Nanos(1000));
  QCOMPARE(zoom.historyDepth(), depth);
  QCOMPARE(zoom.range().start, Nanos(455 + 1000));
  zoom.reset();
  zoom.panBy(Nanos(10'000'000));  // cannot leave [−full, 2·full]
  QCOMPARE(zoom.range().end, Nanos(2'000'000));
}

void TimeScaleTest::zoomStackUpdateFullRangeKeepsUserZoom() {
  ZoomStack zoom;
  zoom.updateFullRange(Nanos(0), Nanos(1000));
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(0), Nanos(1000)}));
  zoom.updateFullRange(Nanos(0), Nanos(2000));  // not zoomed: follows the extent
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(0), Nanos(2000)}));
  zoom.zoomTo(Nanos(100), Nanos(400));
  zoom.updateFullRange(Nanos(0), Nanos(3000));  // zoomed: keeps the window
  QCOMPARE(zoom.range(), (ZoomStack::Range{Nanos(100), Nanos(400)}));
  QCOMPARE(zoom.fullRange(), (ZoomStack::Range{Nanos(0), Nanos(3000)}));
}

QTEST_GUILESS_MAIN(TimeScaleTest)
#include "time_scale_test.moc"
