// Per-rank PyTorch profiler traces open as one multi-rank run: a directory of them, several
// files, a drop, the command line; the run equals what traces::importKinetoTraces gives on the
// same files, loads on a worker with one progress signal per file, and compares against a
// simulated what-if. The traces are the committed real-schema fixtures of a 2-rank gloo DDP
// job (tests/data/torch/), copied into temporary directories.
#include <QAction>
#include <QDir>
#include <QDropEvent>
#include <QFile>
#include <QImage>
#include <QMimeData>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>
#include <nlohmann/json.hpp>
#include <optional>

#include "gui/model/trace_loader.h"
#include "gui/model/whatif.h"
#include "gui/widgets/app_main.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/panels.h"
#include "gui/widgets/timeline_view.h"
#include "traces/kineto_import.h"
#include "traces/run_comparison.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

const QString kTorchDir = QString(DDPSCOPE_TEST_DATA_DIR) + "/torch/";
const QStringList kRankFiles = {"ddp_gloo_rank0.json.gz", "ddp_gloo_rank1.json.gz"};

// Copies the per-rank fixtures into `dir`; returns their paths there (rank order).
QStringList copyRanks(const QTemporaryDir& dir) {
  QStringList paths;
  for (const QString& name : kRankFiles) {
    const QString to = QDir(dir.path()).filePath(name);
    if (!QFile::copy(kTorchDir + name, to)) qFatal("cannot copy %s", qPrintable(name));
    paths << to;
  }
  return paths;
}

void writeFile(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size()) {
    qFatal("cannot write %s", qPrintable(path));
  }
}

traces::Timeline importDirectly(const QStringList& paths, traces::KinetoImportReport* report) {
  std::vector<std::string> files;
  for (const QString& p : paths) files.push_back(p.toStdString());
  traces::KinetoImportOptions options;
  options.readModel = true;  // as the GUI imports
  auto timeline = traces::importKinetoTraces(files, options, report);
  if (!timeline.isOk()) qFatal("%s", timeline.status().message().c_str());
  return std::move(timeline).value();
}

std::vector<std::optional<int64_t>> truthBucketBytes() {
  QFile file(kTorchDir + "ddp_gloo_truth.json");
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read ddp_gloo_truth.json");
  std::vector<std::optional<int64_t>> bytes;
  const nlohmann::json truth = nlohmann::json::parse(file.readAll().toStdString());
  for (const auto& b : truth["bucket_bytes"]) {
    bytes.push_back(b.get<int64_t>());
  }
  return bytes;
}

// The document of an imported run holds exactly the importer's timeline: every rank, the
// importer's lanes, its bucket bytes and iterations.
void checkImportedRun(const TraceDocument& doc, const QStringList& rankPaths) {
  traces::KinetoImportReport report;
  const traces::Timeline expected = importDirectly(rankPaths, &report);
  QVERIFY(report.ranks == (std::vector<int>{0, 1}));
  QVERIFY(doc.timeline() == expected);
  QCOMPARE(doc.timeline().rankCount(), 2);
  QCOMPARE(doc.worldSize(), 2);
  QCOMPARE(doc.rowCount(), TraceDocument::build(expected, "expected")->rowCount());
  int lanes = 0;
  for (const auto& rank : expected.ranks()) {
    for (const auto& lane : rank.lanes) lanes += lane.spans.empty() ? 0 : 1;
  }
  QCOMPARE(doc.rowCount(), lanes);
  // The traces were recorded with record_shapes: the model read off them names the compute
  // spans by layer (the first Linear's forward and backward), as `import-torch` does.
  bool named = false;
  bool namedBackward = false;
  for (const auto& lane : doc.timeline().rank(0).lanes) {
    if (lane.kind != traces::LaneKind::kCompute) continue;
    for (const auto& span : lane.spans) {
      named = named || span.name == "linear.0";
      namedBackward = namedBackward || span.name == "linear.0 (backward)";
    }
  }
  QVERIFY(named);
  QVERIFY(namedBackward);
  const traces::KinetoImportSummary shown = traces::summarizeImport(doc.timeline());
  const traces::KinetoImportSummary direct = traces::summarizeImport(expected);
  QCOMPARE(shown.rankCount, 2);
  QCOMPARE(shown.iterationCount, direct.iterationCount);
  QVERIFY(shown.iterationCount > 1);
  QVERIFY(shown.bucketBytes == direct.bucketBytes);
  QVERIFY(shown.bucketBytes == truthBucketBytes());  // what DDP itself reported
  QCOMPARE(static_cast<int>(doc.iterations(1).size()),
           static_cast<int>(expected.iterations(1).size()));
}

// Exposes the drop handler (as main_window_test does).
class DropTarget : public MainWindow {
 public:
  using MainWindow::dropEvent;
};

void drop(DropTarget& window, const QStringList& paths) {
  QMimeData mime;
  QList<QUrl> urls;
  for (const QString& p : paths) urls << QUrl::fromLocalFile(p);
  mime.setUrls(urls);
  QDropEvent event(QPointF(100, 100), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  window.dropEvent(&event);
}

}  // namespace

class TorchImportTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
  void directoryOfPerRankTracesOpensAsOneRun();
  void severalFilesOpenAsTheSameRun();
  void droppedFolderOrRankFilesOpenAsOneRun();
  void brokenFileIsNamedAndTheWindowStaysUsable();
  void mixedKindsAndEmptyDirectoriesAreErrors();
  void workerReportsEachFileAndEqualsTheSynchronousLoad();
  void commandLineOpensADirectoryAndRendersIt();
  void importedRunComparesWithASimulatedWhatIf();
};

void TorchImportTest::directoryOfPerRankTracesOpensAsOneRun() {
  QTemporaryDir dir;
  const QStringList ranks = copyRanks(dir);
  MainWindow window;
  window.setErrorHandler([](const QString& title, const QString& message) {
    QFAIL(qPrintable(title + ": " + message));
  });
  window.show();
  // File ▸ Open folder… (what it runs after its dialog: openPaths on the folder).
  QVERIFY(window.findChild<QAction*>("openFolderAction"));
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  window.openPaths({dir.path()});
  QVERIFY(loaded.wait(20000));
  QCOMPARE(loaded.count(), 1);
  QCOMPARE(loaded.first().at(0).toInt(), 0);
  QVERIFY(window.document(0));
  QVERIFY(!window.document(1));
  checkImportedRun(*window.document(0), ranks);
  QVERIFY(window.windowTitle().contains("(2 ranks)"));
  QCOMPARE(window.recentFiles().first(), QFileInfo(dir.path()).absoluteFilePath());
  // Every rank's lanes are rows of the timeline view, and it paints them.
  QCOMPARE(window.timelineView()->document(), window.document(0));
  QVERIFY(window.timelineView()->fitToIteration());
  QVERIFY(!window.grab().isNull());
  QVERIFY(window.timelineView()->lastPaintedSpans() > 0);
}

void TorchImportTest::severalFilesOpenAsTheSameRun() {
  QTemporaryDir dir;
  const QStringList ranks = copyRanks(dir);
  auto fromDirectory = loadTraces({dir.path()});
  QVERIFY2(fromDirectory.isOk(), fromDirectory.status().message().c_str());
  auto fromFiles = loadTraces({ranks[1], ranks[0]});  // any order
  QVERIFY2(fromFiles.isOk(), fromFiles.status().message().c_str());
  QCOMPARE(fromDirectory->size(), size_t{1});
  QCOMPARE(fromFiles->size(), size_t{1});
  const LoadedRun& a = fromDirectory->front();
  const LoadedRun& b = fromFiles->front();
  QVERIFY(a.document->timeline() == b.document->timeline());
  QCOMPARE(a.files, ranks);  // rank order
  QCOMPARE(b.files, ranks);
  QCOMPARE(a.recentPath, dir.path());
  QVERIFY(b.recentPath.isEmpty());  // a list of files is not one path to reopen
  QCOMPARE(b.label, QString("ddp_gloo_rank1.json.gz and 1 more (2 ranks)"));
  QVERIFY(!a.notes.isEmpty());  // the fixture's collectives have no dtype: float32 assumed
  checkImportedRun(*b.document, ranks);

  // The window: a multi-selection (File ▸ Open) or several command-line files.
  MainWindow window;
  window.setErrorHandler(
      [](const QString&, const QString& message) { QFAIL(qPrintable(message)); });
  QVERIFY(window.openPathsBlocking(ranks));
  QVERIFY(window.document(0)->timeline() == a.document->timeline());
  QVERIFY(!window.document(1));
}

void TorchImportTest::droppedFolderOrRankFilesOpenAsOneRun() {
  QTemporaryDir dir;
  const QStringList ranks = copyRanks(dir);
  for (const QStringList& dropped : {QStringList{dir.path()}, ranks}) {
    DropTarget window;
    window.setErrorHandler(
        [](const QString&, const QString& message) { QFAIL(qPrintable(message)); });
    window.show();
    QSignalSpy loaded(&window, &MainWindow::documentLoaded);
    drop(window, dropped);
    QVERIFY(loaded.wait(20000));
    QTest::qWait(50);
    QCOMPARE(loaded.count(), 1);  // one run, not runs A and B
    QVERIFY(window.document(0));
    QVERIFY(!window.document(1));
    QCOMPARE(window.document(0)->timeline().rankCount(), 2);
    checkImportedRun(*window.document(0), ranks);
  }
}

void TorchImportTest::brokenFileIsNamedAndTheWindowStaysUsable() {
  QTemporaryDir dir;
  copyRanks(dir);
  const QString broken = QDir(dir.path()).filePath("ddp_gloo_rank2.json");
  writeFile(broken, "{\"schemaVersion\": 1, \"traceEvents\": [");
  MainWindow window;
  QStringList dialogs;
  window.setErrorHandler([&](const QString&, const QString& message) { dialogs << message; });
  window.show();
  QSignalSpy errors(&window, &MainWindow::errorReported);
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  window.openPaths({dir.path()});
  QVERIFY(errors.wait(20000));
  const QString message = errors.first().at(0).toString();
  QVERIFY2(message.contains("ddp_gloo_rank2.json"), qPrintable(message));
  QCOMPARE(dialogs.size(), 1);
  QCOMPARE(loaded.count(), 0);
  QVERIFY(!window.document());
  // Still usable: without the broken file the run opens.
  QVERIFY(QFile::remove(broken));
  window.openPaths({dir.path()});
  QVERIFY(loaded.wait(20000));
  QCOMPARE(window.document()->timeline().rankCount(), 2);
  QCOMPARE(dialogs.size(), 1);
  QVERIFY(!window.grab().isNull());
}

void TorchImportTest::mixedKindsAndEmptyDirectoriesAreErrors() {
  QTemporaryDir dir;
  const QStringList ranks = copyRanks(dir);
  const QString golden = QString(DDPSCOPE_TEST_DATA_DIR) + "/traces/golden_small.json";

  // A ddpscope trace among per-rank PyTorch traces: named, with the kind of each.
  auto mixedFiles = loadTraces({ranks[0], ranks[1], golden});
  QVERIFY(!mixedFiles.isOk());
  QString message = QString::fromStdString(mixedFiles.status().message());
  QVERIFY2(message.contains("mixed kinds") && message.contains("golden_small.json"),
           qPrintable(message));
  QVERIFY2(message.contains("ddp_gloo_rank0.json.gz"), qPrintable(message));

  QVERIFY(QFile::copy(golden, QDir(dir.path()).filePath("golden_small.json")));
  auto mixedDirectory = loadTraces({dir.path()});
  QVERIFY(!mixedDirectory.isOk());
  message = QString::fromStdString(mixedDirectory.status().message());
  QVERIFY2(message.contains("mixed kinds") && message.contains("golden_small.json"),
           qPrintable(message));

  QTemporaryDir empty;
  writeFile(QDir(empty.path()).filePath("notes.txt"), "not a trace");
  auto none = loadTraces({empty.path()});
  QVERIFY(!none.isOk());
  message = QString::fromStdString(none.status().message());
  QVERIFY2(message.contains(empty.path()) && message.contains("no trace files"),
           qPrintable(message));

  // Two files of one rank: the importer's error, naming them.
  QTemporaryDir half;
  QVERIFY(QFile::copy(ranks[1], QDir(half.path()).filePath("a.json.gz")));
  QVERIFY(QFile::copy(ranks[1], QDir(half.path()).filePath("b.json.gz")));
  auto twice = loadTraces({half.path()});
  QVERIFY(!twice.isOk());
  message = QString::fromStdString(twice.status().message());
  QVERIFY2(message.contains("rank 1") && message.contains("a.json.gz"), qPrintable(message));

  // Two traces that are not both PyTorch's still open as runs A and B; a single PyTorch trace
  // still opens as it always did (no import).
  auto pair = loadTraces({golden, ranks[1]});
  QVERIFY2(pair.isOk(), pair.status().message().c_str());
  QCOMPARE(pair->size(), size_t{2});
  QCOMPARE((*pair)[1].document->timeline().rank(0).rank, 1);
  auto single = loadTraces({ranks[1]});
  QVERIFY(single.isOk());
  auto plain = loadTraceDocument(ranks[1]);
  QVERIFY(plain.isOk());
  QVERIFY(single->front().document->timeline() == (*plain)->timeline());
  // Opening run B leaves room for one run only.
  auto tooMany = loadTraces({golden, golden}, 1);
  QVERIFY(!tooMany.isOk());
}

void TorchImportTest::workerReportsEachFileAndEqualsTheSynchronousLoad() {
  QTemporaryDir dir;
  const QStringList ranks = copyRanks(dir);
  TraceLoader loader;
  QSignalSpy files(&loader, &TraceLoader::filesProgress);
  QSignalSpy runs(&loader, &TraceLoader::runLoaded);
  QSignalSpy failed(&loader, &TraceLoader::failed);
  loader.openPaths({dir.path()}, 0);
  QCOMPARE(loader.pending(), 1);
  QVERIFY(runs.wait(20000));
  QCOMPARE(failed.count(), 0);
  QCOMPARE(loader.pending(), 0);
  QCOMPARE(files.count(), static_cast<int>(ranks.size()));  // one progress signal per file
  for (int i = 0; i < files.count(); ++i) {
    QCOMPARE(files.at(i).at(0).toInt(), 0);  // slot
    QCOMPARE(files.at(i).at(1).toInt(), i + 1);
    QCOMPARE(files.at(i).at(2).toInt(), static_cast<int>(ranks.size()));
    QCOMPARE(files.at(i).at(3).toString(), ranks[i]);
  }
  QCOMPARE(runs.count(), 1);
  QCOMPARE(runs.first().at(0).toInt(), 0);
  const LoadedRun run = runs.first().at(1).value<LoadedRun>();
  auto sync = loadTraces({dir.path()});
  QVERIFY(sync.isOk());
  const LoadedRun& expected = sync->front();
  QVERIFY(run.document->timeline() == expected.document->timeline());
  QCOMPARE(run.document->rowCount(), expected.document->rowCount());
  QCOMPARE(run.document->spanCount(), expected.document->spanCount());
  QCOMPARE(run.label, expected.label);
  QCOMPARE(run.files, expected.files);
  QCOMPARE(run.notes, expected.notes);

  // A failure arrives as failed(), naming what was asked for.
  loader.openPaths({dir.filePath("no_such_dir"), dir.path()}, 1);
  QVERIFY(failed.wait(20000));
  QVERIFY(failed.first().at(1).toString().contains("no_such_dir"));
}

void TorchImportTest::commandLineOpensADirectoryAndRendersIt() {
  QTemporaryDir dir;
  QTemporaryDir traces;
  copyRanks(traces);
  const QString out = dir.filePath("run.png");
  QCOMPARE(runGuiApp({"ddpscope-gui", "--screenshot", out, "--size", "1200x700", "--iteration", "3",
                      traces.path()}),
           0);
  QImage image(out);
  QCOMPARE(image.size(), QSize(1200, 700));
  // Several rank files on the command line, as one run.
  QCOMPARE(runGuiApp({"ddpscope-gui", "--screenshot", dir.filePath("files.png"),
                      QDir(traces.path()).filePath(kRankFiles[0]),
                      QDir(traces.path()).filePath(kRankFiles[1])}),
           0);
  QVERIFY(!QImage(dir.filePath("files.png")).isNull());
  // An empty directory fails the screenshot (exit 1), as a malformed file does.
  QTemporaryDir empty;
  QCOMPARE(runGuiApp({"ddpscope-gui", "--screenshot", dir.filePath("none.png"), empty.path()}), 1);
}

void TorchImportTest::importedRunComparesWithASimulatedWhatIf() {
  QTemporaryDir dir;
  copyRanks(dir);
  MainWindow window;
  window.setErrorHandler(
      [](const QString&, const QString& message) { QFAIL(qPrintable(message)); });
  window.resize(1400, 900);
  window.show();
  QVERIFY(window.openPathsBlocking({dir.path()}));
  const TraceDocumentPtr imported = window.document(0);

  // The same job simulated: its model, 2 ranks, its bucket cap.
  WhatIfSettings settings;
  settings.model = (kTorchDir + "ddp_gloo_model.json").toStdString();
  settings.cluster = "dgx-a100";  // what if the job ran on A100s
  settings.worldSize = 2;
  settings.ddp.setBucketCapMb(0.05);
  auto simulated = runWhatIf(settings, true);
  QVERIFY2(simulated.isOk(), simulated.status().message().c_str());
  window.setDocument(1, simulated->document, "what-if");

  ComparePanel* compare = window.comparePanel();
  QCOMPARE(compare->runA(), imported);
  QCOMPARE(compare->runB(), simulated->document);
  const traces::RunComparison expected =
      traces::compareRuns(imported->timeline(), simulated->document->timeline());
  const traces::RunComparison& shown = compare->model()->comparison();
  QVERIFY(!shown.iterations.empty());  // matched by (rank, iteration)
  QVERIFY(!shown.buckets.empty());     // matched by (rank, iteration, bucket)
  QCOMPARE(shown.iterations.size(), expected.iterations.size());
  QCOMPARE(shown.buckets.size(), expected.buckets.size());
  QCOMPARE(shown.alignA, expected.alignA);
  QCOMPARE(shown.alignB, expected.alignB);
  for (size_t i = 0; i < shown.iterations.size(); ++i) {
    QCOMPARE(shown.iterations[i].key.rank, expected.iterations[i].key.rank);
    QCOMPARE(shown.iterations[i].a.stepTime, expected.iterations[i].a.stepTime);
    QCOMPARE(shown.iterations[i].b.stepTime, expected.iterations[i].b.stepTime);
  }
  QVERIFY(compare->model()->rowCount() > 0);
  window.showTab(MainWindow::kCompareTab);
  QVERIFY(!window.grab().isNull());
}

QTEST_MAIN(TorchImportTest)
#include "torch_import_test.moc"
