// TraceDocument, loading and the item models over it.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>
#include <random>

#include "gui/model/metrics_models.h"
#include "gui/model/timeline_model.h"
#include "gui/model/trace_loader.h"
#include "traces/chrome_reader.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

QString dataPath(const char* name) {
  return QString(DDPSCOPE_TEST_DATA_DIR) + "/traces/" + name;
}

TraceDocumentPtr load(const char* name) {
  auto doc = loadTraceDocument(dataPath(name));
  if (!doc.isOk()) qFatal("%s", doc.status().message().c_str());
  return *doc;
}

}  // namespace

class ModelsTest : public QObject {
  Q_OBJECT
 private slots:
  void goldenTraceHasTheRightLanesAndSpans();
  void kinetoAndGzipTracesMatchTheReader_data();
  void kinetoAndGzipTracesMatchTheReader();
  void visibleRangeMatchesBruteForce();
  void timelineModelPassesTester();
  void searchModelPassesTesterAndFindsByName();
  void overlapModelPassesTesterAndShowsCoreNumbers();
  void detailsShowBucketBytesAndBusbw();
  void loaderParsesOnAWorkerAndReportsProgress();
  void loaderReportsErrors();
};

void ModelsTest::goldenTraceHasTheRightLanesAndSpans() {
  TraceDocumentPtr doc = load("golden_small.json");
  QCOMPARE(doc->timeline().rankCount(), 2);
  QCOMPARE(doc->rowCount(), 6);            // per rank: compute, comm stream 0, iterations
  QCOMPARE(doc->spanCount(), size_t(18));  // 9 X events per rank
  QCOMPARE(doc->rows()[0].label, std::string("compute"));
  QCOMPARE(doc->rows()[1].label, std::string("comm stream 0"));
  QCOMPARE(doc->rows()[2].label, std::string("iterations"));
  QVERIFY(doc->rows()[0].firstOfRank && doc->rows()[3].firstOfRank && !doc->rows()[1].firstOfRank);
  QCOMPARE(doc->rows()[3].rankId, 1);
  // compute lane: forward ⊃ fc1, backward ⊃ fc2 → two levels.
  QCOMPARE(doc->levelCount(0), 2);
  QCOMPARE(doc->levels(0)[0].spans.size(), size_t(4));  // forward, backward, copy, sgd
  QCOMPARE(doc->levels(0)[1].spans.size(), size_t(2));
  QCOMPARE(doc->startTime(), Nanos(0));
  QCOMPARE(doc->endTime(), Nanos(1'001'500));
  // Exposed comm of rank 0 = [801.5, 891.75) µs (after backward ends, before sgd).
  const auto& exposed = doc->exposedComm(0);
  QCOMPARE(exposed.size(), size_t(1));
  QCOMPARE(exposed[0].start, Nanos(801'500));
  QCOMPARE(exposed[0].end, Nanos(891'750));
  QCOMPARE(doc->overlap()[0].total.exposedComm, Nanos(90'250));
  QCOMPARE(doc->iterations(0).size(), size_t(1));
  QCOMPARE(doc->worldSize(), 2);
}

void ModelsTest::kinetoAndGzipTracesMatchTheReader_data() {
  QTest::addColumn<QString>("file");
  QTest::newRow("kineto") << "kineto_ddp_small.json";
  QTest::newRow("gzip") << "tiny.json.gz";
  QTest::newRow("golden") << "golden_small.json";
}

void ModelsTest::kinetoAndGzipTracesMatchTheReader() {
  QFETCH(QString, file);
  auto timeline = traces::readChromeTrace(dataPath(file.toUtf8().constData()).toStdString());
  QVERIFY2(timeline.isOk(), timeline.status().message().c_str());
  TraceDocumentPtr doc = load(file.toUtf8().constData());
  int nonEmptyLanes = 0;
  for (const auto& rank : timeline->ranks()) {
    for (const auto& lane : rank.lanes) nonEmptyLanes += lane.spans.empty() ? 0 : 1;
  }
  QCOMPARE(doc->rowCount(), nonEmptyLanes);
  QCOMPARE(doc->spanCount(), timeline->spanCount());
  QCOMPARE(doc->timeline().rankCount(), timeline->rankCount());
  // Every span sits in exactly one level.
  for (int row = 0; row < doc->rowCount(); ++row) {
    size_t inLevels = 0;
    for (const auto& level : doc->levels(row)) inLevels += level.spans.size();
    QCOMPARE(inLevels, doc->lane(row).spans.size());
  }
}

void ModelsTest::visibleRangeMatchesBruteForce() {
  // Random nested spans on one lane, queried over random windows.
  traces::Timeline timeline;
  auto lane = timeline.addLane(0, "compute", traces::LaneKind::kCompute);
  std::mt19937 rng(7);
  int64_t t = 0;
  for (int i = 0; i < 2000; ++i) {
    int64_t dur = 1 + rng() % 1000;
    timeline.addSpan(lane, "outer", traces::Category::kBackward, Nanos(t), Nanos(dur));
    if (dur > 10)
      timeline.addSpan(lane, "inner", traces::Category::kCompute, Nanos(t + 1), Nanos(dur / 2));
    t += dur + static_cast<int64_t>(rng() % 50);
  }
  timeline.sortSpans();
  TraceDocumentPtr doc = TraceDocument::build(std::move(timeline), "random");
  QCOMPARE(doc->levelCount(0), 2);
  for (int q = 0; q < 300; ++q) {
    Nanos t0(static_cast<int64_t>(rng() % static_cast<uint32_t>(t)));
    Nanos t1 = t0 + Nanos(static_cast<int64_t>(rng() % 20000));
    for (int level = 0; level < 2; ++level) {
      const auto& ids = doc->levels(0)[static_cast<size_t>(level)].spans;
      auto [first, last] = doc->visibleRange(0, level, t0, t1);
      size_t expected = 0;
      for (size_t k = 0; k < ids.size(); ++k) {
        const auto& s = doc->lane(0).spans[static_cast<size_t>(ids[k])];
        bool visible = s.end() > t0 && s.start < t1;
        if (visible) {
          ++expected;
          QVERIFY(k >= first && k < last);
        }
      }
      QCOMPARE(last - first, expected);
    }
  }
}

void ModelsTest::timelineModelPassesTester() {
  TimelineModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setDocument(load("golden_small.json"));
  QCOMPARE(model.rowCount(), 2);
  QModelIndex rank0 = model.index(0, 0);
  QCOMPARE(model.rowCount(rank0), 3);
  QCOMPARE(rank0.data().toString(), QString("rank 0"));
  QCOMPARE(model.index(1, 0, rank0).data().toString(), QString("comm stream 0"));
  QCOMPARE(model.index(1, 0, rank0).data(kRowRole).toInt(), 1);
  QCOMPARE(model.index(0, TimelineModel::kSpansColumn, rank0).data().toLongLong(), 6);
  QCOMPARE(rank0.data(kSpanCountRole).toLongLong(), 9);
  QCOMPARE(model.index(1, 0).data(kRankIdRole).toInt(), 1);
  model.setDocument(load("kineto_ddp_small.json"));
  QCOMPARE(model.rowCount(), 1);
  model.setDocument(nullptr);
  QCOMPARE(model.rowCount(), 0);
}

void ModelsTest::searchModelPassesTesterAndFindsByName() {
  SearchModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setDocument(load("golden_small.json"));
  QCOMPARE(model.rowCount(), 0);
  model.setQuery("ALLREDUCE bucket");
  QCOMPARE(model.rowCount(), 4);  // 2 buckets × 2 ranks
  QCOMPARE(model.index(0, SearchModel::kNameColumn).data().toString(),
           QString("allreduce bucket 0"));
  QPoint ref = model.index(0, 0).data(kSpanRefRole).toPoint();
  QCOMPARE(ref.x(), 1);  // the comm row of rank 0
  QCOMPARE(model.index(0, SearchModel::kDurationColumn).data(kRawValueRole).toLongLong(), 300'000);
  model.setQuery("no such span");
  QCOMPARE(model.rowCount(), 0);
}

void ModelsTest::overlapModelPassesTesterAndShowsCoreNumbers() {
  OverlapModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  TraceDocumentPtr doc = load("golden_small.json");
  model.setDocument(doc);
  QCOMPARE(model.rowCount(), 4);  // 2 ranks × (1 iteration + "all")
  auto overlap = traces::computeOverlap(doc->timeline());
  const auto& it = overlap[0].iterations[0];
  QCOMPARE(model.index(0, OverlapModel::kIterationColumn).data().toString(), QString("1"));
  QCOMPARE(model.index(0, OverlapModel::kExposedColumn).data(kRawValueRole).toDouble(),
           it.stats.exposedComm.toMillis());
  QCOMPARE(model.index(0, OverlapModel::kPercentColumn).data(kRawValueRole).toDouble(),
           it.stats.overlapPercent);
  QCOMPARE(model.index(0, OverlapModel::kPercentColumn).data().toString(),
           QString::fromStdString(traces::formatPercent(it.stats)));
  QCOMPARE(model.index(1, OverlapModel::kIterationColumn).data().toString(), QString("all"));
  QCOMPARE(model.index(1, OverlapModel::kCommColumn).data(kRawValueRole).toDouble(),
           overlap[0].total.comm.toMillis());
  model.setDocument(nullptr);
  QCOMPARE(model.rowCount(), 0);
}

void ModelsTest::detailsShowBucketBytesAndBusbw() {
  TraceDocumentPtr doc = load("golden_small.json");
  SpanRef ref{1, 0};  // rank 0 comm: allreduce bucket 0, 25 MiB in 300 µs, world size 2
  QString text = QString::fromStdString(spanDetailsText(*doc, ref));
  QVERIFY2(text.startsWith("allreduce bucket 0"), qPrintable(text));
  QVERIFY(text.contains("bucket: 0"));
  QVERIFY(text.contains("bytes: 25.00 MiB"));
  QVERIFY(text.contains("duration: 300 µs"));
  // algbw = 26214400 B / 300000 ns = 87.38 GB/s; busbw = algbw · 2(n−1)/n = 87.38 for n = 2.
  auto busbw = spanBusBandwidthGBps(*doc, ref);
  QVERIFY(busbw.has_value());
  QVERIFY(std::fabs(*busbw - 26214400.0 / 300000.0) < 1e-9);
  QVERIFY(text.contains("busbw: 87.4 GB/s"));
  QVERIFY(!spanBusBandwidthGBps(*doc, SpanRef{0, 0}).has_value());  // compute span
}

void ModelsTest::loaderParsesOnAWorkerAndReportsProgress() {
  TraceLoader loader;
  QSignalSpy loaded(&loader, &TraceLoader::loaded);
  QSignalSpy progress(&loader, &TraceLoader::progress);
  loader.open(dataPath("golden_small.json"), 1);
  QVERIFY(loaded.wait(10000));
  QCOMPARE(loaded.first().at(0).toInt(), 1);
  auto doc = loaded.first().at(2).value<TraceDocumentPtr>();
  QVERIFY(doc);
  QCOMPARE(doc->spanCount(), size_t(18));
  QVERIFY(progress.count() >= 2);
  QCOMPARE(progress.last().at(1).toInt(), 100);
  QCOMPARE(loader.pending(), 0);
}

void ModelsTest::loaderReportsErrors() {
  TraceLoader loader;
  QSignalSpy failed(&loader, &TraceLoader::failed);
  loader.open(dataPath("malformed/truncated.json"));
  loader.open(dataPath("does_not_exist.json"));
  QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 10000);
  QStringList messages;
  for (const auto& args : failed) messages << args.at(2).toString();
  QVERIFY(messages.join("\n").contains("invalid JSON at byte 118"));
  QVERIFY(messages.join("\n").contains("cannot open"));
}

QTEST_GUILESS_MAIN(ModelsTest)
#include "models_test.moc"
