// The Compare tab shows what traces::compareRuns computed, with one shared zoom stack.
#include <QAbstractItemModelTester>
#include <QTest>

#include "gui/model/metrics_models.h"
#include "gui/model/trace_loader.h"
#include "gui/model/whatif.h"
#include "gui/widgets/panels.h"
#include "gui/widgets/timeline_view.h"
#include "traces/run_comparison.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

TraceDocumentPtr simulated(double capMb, int worldSize = 16) {
  WhatIfSettings s;
  s.worldSize = worldSize;
  s.ddp.setBucketCapMb(capMb);
  auto result = runWhatIf(s, true);
  if (!result.isOk()) qFatal("%s", result.status().message().c_str());
  return result->document;
}

// Every delta the model shows equals the RunComparison it was given.
void checkModelAgainst(const CompareModel& model, const traces::RunComparison& cmp) {
  using Kind = CompareModel::RowKind;
  int means = 0, iterations = 0, buckets = 0, onlyA = 0, onlyB = 0;
  for (int row = 0; row < model.rowCount(); ++row) {
    const auto& info = model.rowsInfo()[static_cast<size_t>(row)];
    traces::Delta expected;
    switch (info.kind) {
      case Kind::kMean:
        ++means;
        expected = cmp.meanDelta(static_cast<traces::ComparedMetric>(info.metric));
        break;
      case Kind::kIteration:
        ++iterations;
        expected = cmp.iterations[static_cast<size_t>(info.item)].delta(
            static_cast<traces::ComparedMetric>(info.metric));
        break;
      case Kind::kBucket:
        ++buckets;
        expected = cmp.buckets[static_cast<size_t>(info.item)].delta();
        break;
      case Kind::kOnlyInA:
        ++onlyA;
        continue;
      case Kind::kOnlyInB:
        ++onlyB;
        continue;
    }
    QCOMPARE(model.index(row, CompareModel::kAColumn).data(kRawValueRole).toDouble(), expected.a);
    QCOMPARE(model.index(row, CompareModel::kBColumn).data(kRawValueRole).toDouble(), expected.b);
    QCOMPARE(model.index(row, CompareModel::kDeltaColumn).data(kRawValueRole).toDouble(),
             expected.delta);
    QVariant pct = model.index(row, CompareModel::kPercentColumn).data(kRawValueRole);
    QCOMPARE(pct.isValid(), expected.deltaPercent.has_value());
    if (expected.deltaPercent) QCOMPARE(pct.toDouble(), *expected.deltaPercent);
  }
  QCOMPARE(means, cmp.iterations.empty() ? 0 : traces::kComparedMetricCount);
  QCOMPARE(iterations, static_cast<int>(cmp.iterations.size()) * traces::kComparedMetricCount);
  QCOMPARE(buckets, static_cast<int>(cmp.buckets.size()));
  QCOMPARE(onlyA, static_cast<int>(cmp.iterationsOnlyInA.size() + cmp.bucketsOnlyInA.size()));
  QCOMPARE(onlyB, static_cast<int>(cmp.iterationsOnlyInB.size() + cmp.bucketsOnlyInB.size()));
}

}  // namespace

class CompareTest : public QObject {
  Q_OBJECT
 private slots:
  void compareModelPassesTesterAndEqualsRunComparison();
  void comparePanelShowsCoreDeltasWithOneSharedZoom();
  void goldenAgainstKinetoListsUnmatchedKeys();
};

void CompareTest::compareModelPassesTesterAndEqualsRunComparison() {
  CompareModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  TraceDocumentPtr a = simulated(5);
  TraceDocumentPtr b = simulated(100);
  traces::RunComparison cmp = traces::compareRuns(a->timeline(), b->timeline());
  QVERIFY(!cmp.iterations.empty());
  QVERIFY(!cmp.buckets.empty());
  model.setComparison(cmp);
  checkModelAgainst(model, cmp);
  // Different caps → different bucket counts: some buckets exist only in A.
  QVERIFY(!cmp.bucketsOnlyInA.empty());
  model.setComparison({});
  QCOMPARE(model.rowCount(), 0);
}

void CompareTest::comparePanelShowsCoreDeltasWithOneSharedZoom() {
  ComparePanel panel;
  panel.resize(1200, 800);
  panel.show();
  TraceDocumentPtr a = simulated(5);
  TraceDocumentPtr b = simulated(100);
  panel.setRuns(a, b, "cap 5", "cap 100");
  traces::RunComparison cmp = traces::compareRuns(a->timeline(), b->timeline());
  checkModelAgainst(*panel.model(), cmp);
  // Both views aligned at the first matched iteration's start, on one zoom stack.
  QCOMPARE(panel.viewA()->offset(), cmp.alignA);
  QCOMPARE(panel.viewB()->offset(), cmp.alignB);
  ZoomStack* zoom = panel.zoom();
  zoom->zoomTo(Nanos::fromMillis(1), Nanos::fromMillis(3));
  QCOMPARE(panel.viewA()->timeScale().start, Nanos::fromMillis(1));
  QCOMPARE(panel.viewB()->timeScale().end, Nanos::fromMillis(3));
  QVERIFY(zoom->back());
  QCOMPARE(panel.viewA()->timeScale().start, panel.viewB()->timeScale().start);
  // The first iteration of both runs is at display time 0.
  QCOMPARE(a->iterations(0).front().start - panel.viewA()->offset(), Nanos(0));
  QCOMPARE(b->iterations(0).front().start - panel.viewB()->offset(), Nanos(0));
  QVERIFY(!panel.grab().isNull());
}

void CompareTest::goldenAgainstKinetoListsUnmatchedKeys() {
  auto a = loadTraceDocument(QString(DDPSCOPE_TEST_DATA_DIR) + "/traces/golden_small.json");
  auto b = loadTraceDocument(QString(DDPSCOPE_TEST_DATA_DIR) + "/traces/kineto_ddp_small.json");
  QVERIFY(a.isOk() && b.isOk());
  ComparePanel panel;
  panel.setRuns(*a, *b, "golden", "kineto");
  traces::RunComparison cmp = traces::compareRuns((*a)->timeline(), (*b)->timeline());
  checkModelAgainst(*panel.model(), cmp);
  QVERIFY(!cmp.iterationsOnlyInA.empty() || !cmp.iterationsOnlyInB.empty());
}

QTEST_MAIN(CompareTest)
#include "compare_test.moc"
