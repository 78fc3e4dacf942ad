// The main window: malformed files give an error (through the testable error hook) and leave
// the window usable; drag and drop, recent files, export and the --screenshot mode.
#include "gui/widgets/main_window.h"

#include <QChart>
#include <QChartView>
#include <QDropEvent>
#include <QFile>
#include <QLabel>
#include <QMimeData>
#include <QPointer>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextStream>
#include <QUrl>

#include "gui/widgets/app_main.h"
#include "gui/widgets/panels.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/tune_panel.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

QString tracePath(const QString& name) {
  return QString(DDPSCOPE_TEST_DATA_DIR) + "/traces/" + name;
}

struct ExpectedError {
  QString file;
  QString message;
};

std::vector<ExpectedError> expectedErrors() {
  std::vector<ExpectedError> out;
  QFile file(tracePath("malformed/expected_errors.txt"));
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read expected_errors.txt");
  QTextStream in(&file);
  in.setEncoding(QStringConverter::Utf8);
  while (!in.atEnd()) {
    QString line = in.readLine();
    if (line.isEmpty() || line.startsWith('#')) continue;
    QStringList parts = line.split('\t');
    if (parts.size() == 2) out.push_back({parts[0], parts[1]});
  }
  return out;
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
  void eachMalformedFileShowsAnErrorAndLeavesTheWindowUsable();
  void missingFileShowsAnError();
  void dropOpensRunsAAndB();
  void exportsPngAndSvg();
  void screenshotModeWritesAnImage();
  void screenshotModeFailsOnAMalformedFile();
  void overlapPanelDeletesTheChartItReplaces();
  void opensATuneReportInTheTuningTab();
  void aBadTuneReportShowsTheReadersError();
};

void MainWindowTest::eachMalformedFileShowsAnErrorAndLeavesTheWindowUsable() {
  auto cases = expectedErrors();
  QVERIFY(cases.size() >= 20);
  MainWindow window;
  QStringList dialogs;
  window.setErrorHandler([&](const QString&, const QString& message) { dialogs << message; });
  window.show();
  QSignalSpy errors(&window, &MainWindow::errorReported);
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  for (const ExpectedError& c : cases) {
    errors.clear();
    dialogs.clear();
    window.openFile(tracePath("malformed/" + c.file));
    QVERIFY2(errors.wait(10000), qPrintable(c.file));
    QString message = errors.first().at(0).toString();
    QVERIFY2(message.contains(c.message), qPrintable(c.file + ": " + message));
    QVERIFY2(message.contains(c.file), qPrintable(message));  // names the file
    QCOMPARE(dialogs.size(), 1);
    // Still usable: a good file loads afterwards.
    loaded.clear();
    window.openFile(tracePath("golden_small.json"));
    QVERIFY(loaded.wait(10000));
    QVERIFY(window.document());
    QCOMPARE(window.document()->rowCount(), 6);
  }
  QVERIFY(window.recentFiles().first().endsWith("golden_small.json"));
  QVERIFY(!window.grab().isNull());
}

void MainWindowTest::missingFileShowsAnError() {
  MainWindow window;
  window.setErrorHandler([](const QString&, const QString&) {});
  QSignalSpy errors(&window, &MainWindow::errorReported);
  QVERIFY(!window.openFileBlocking(tracePath("no_such_file.json")));
  QCOMPARE(errors.count(), 1);
  QVERIFY(errors.first().at(0).toString().contains("cannot open"));
  QVERIFY(!window.document());
}

// Exposes the drop handler (sending a synthetic QDropEvent through QApplication needs a
// drag in progress).
class DropTarget : public MainWindow {
 public:
  using MainWindow::dragEnterEvent;
  using MainWindow::dropEvent;
};

void MainWindowTest::dropOpensRunsAAndB() {
  DropTarget window;
  window.setErrorHandler([](const QString&, const QString&) {});
  window.show();
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  auto* mime = new QMimeData();
  mime->setUrls({QUrl::fromLocalFile(tracePath("golden_small.json")),
                 QUrl::fromLocalFile(tracePath("kineto_ddp_small.json"))});
  QDragEnterEvent enter(QPoint(100, 100), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  window.dragEnterEvent(&enter);
  QVERIFY(enter.isAccepted());
  QDropEvent drop(QPointF(100, 100), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  window.dropEvent(&drop);
  QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 10000);
  QVERIFY(window.document(0));
  QVERIFY(window.document(1));
  QCOMPARE(window.document(1)->timeline().rank(0).rank, 1);  // kineto: distributedInfo.rank
  delete mime;
}

void MainWindowTest::exportsPngAndSvg() {
  QTemporaryDir dir;
  MainWindow window;
  window.resize(1000, 700);
  window.show();
  QVERIFY(window.openFileBlocking(tracePath("golden_small.json")));
  QVERIFY(window.timelineView()->fitToIteration());
  QVERIFY(window.exportView(dir.filePath("view.png")));
  QVERIFY(window.exportView(dir.filePath("view.svg")));
  QFile svg(dir.filePath("view.svg"));
  QVERIFY(svg.open(QIODevice::ReadOnly));
  QByteArray text = svg.readAll();
  QVERIFY(text.contains("<svg"));
  QVERIFY(text.contains("rank 0"));  // text stays text: a vector export
  QImage png(dir.filePath("view.png"));
  QVERIFY(!png.isNull());
  QVERIFY(window.timelineView()->lastPaintedSpans() > 0);
}

void MainWindowTest::screenshotModeWritesAnImage() {
  QTemporaryDir dir;
  QString out = dir.filePath("shot.png");
  int rc = runGuiApp({"ddpscope-gui", "--screenshot", out, "--size", "1200x700",
                      tracePath("golden_small.json"), tracePath("golden_small.json"), "--compare"});
  QCOMPARE(rc, 0);
  QImage image(out);
  QCOMPARE(image.size(), QSize(1200, 700));
}

void MainWindowTest::screenshotModeFailsOnAMalformedFile() {
  QTemporaryDir dir;
  int rc = runGuiApp({"ddpscope-gui", "--screenshot", dir.filePath("bad.png"),
                      tracePath("malformed/not_json.json")});
  QCOMPARE(rc, 1);
  QCOMPARE(runGuiApp({"ddpscope-gui", "--bogus"}), 2);
}

// QChartView::setChart releases the chart it replaces without deleting it: the panel deletes it
// (LeakSanitizer found one chart leaked per setDocument, the empty-trace path included).
void MainWindowTest::overlapPanelDeletesTheChartItReplaces() {
  OverlapPanel panel;
  auto* view = panel.findChild<QChartView*>();
  QVERIFY(view != nullptr);
  for (int i = 0; i < 2; ++i) {
    QPointer<QChart> before = view->chart();
    QVERIFY(!before.isNull());
    panel.setDocument(nullptr);
    QVERIFY(before.isNull());
    QVERIFY(view->chart() != nullptr);
  }
}

// A report ddpscope.torch.tune wrote in a real 2-rank gloo job (tests/data/tune): opened like a
// trace (File ▸ Open, drop, command line) it goes to the Tuning tab, one row per candidate.
void MainWindowTest::opensATuneReportInTheTuningTab() {
  MainWindow window;
  QStringList dialogs;
  window.setErrorHandler([&](const QString&, const QString& message) { dialogs << message; });
  const QString path = QString(DDPSCOPE_TEST_DATA_DIR) + "/tune/poor-layout-report.json";
  QVERIFY(window.openPathsBlocking({path}));
  QVERIFY(dialogs.isEmpty());
  QCOMPARE(window.findChild<QTabWidget*>()->currentIndex(), int(MainWindow::kTuneTab));
  QTableWidget* table = window.tunePanel()->table();
  QCOMPARE(table->rowCount(), 4);
  QCOMPARE(table->item(0, 0)->text(), QString("current"));
  QCOMPARE(table->item(0, 1)->text(), QString("269"));
  QCOMPARE(table->item(0, 7)->text(), QString("current"));
  int chosen = -1;
  for (int row = 0; row < table->rowCount(); ++row) {
    if (table->item(row, 7)->text().contains("chosen")) chosen = row;
  }
  QVERIFY(chosen > 0);
  QCOMPARE(table->item(chosen, 5)->text(), QString("6 of 6"));
  QVERIFY(table->item(chosen, 0)->font().bold());
  // The chosen candidate is a uniform cap; its label is the keyword argument to paste.
  QVERIFY(window.tunePanel()->decision()->text().contains(
      "Next time: DistributedDataParallel(model, " + table->item(chosen, 0)->text() + ")"));
  QVERIFY(window.tunePanel()->header()->text().contains("Deep, world size 2, gloo on cpu"));
}

void MainWindowTest::aBadTuneReportShowsTheReadersError() {
  QTemporaryDir dir;
  const QString path = dir.filePath("broken.json");
  QFile in(QString(DDPSCOPE_TEST_DATA_DIR) + "/tune/poor-layout-report.json");
  QVERIFY(in.open(QIODevice::ReadOnly));
  QByteArray text = in.readAll();
  text.replace("\"measured_step_ms\"", "\"measured_step\"");
  QFile out(path);
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write(text);
  out.close();
  MainWindow window;
  QStringList dialogs;
  window.setErrorHandler([&](const QString&, const QString& message) { dialogs << message; });
  QVERIFY(!window.openTuneReport(path));
  QCOMPARE(dialogs.size(), 1);
  QVERIFY2(dialogs.first().contains("candidates[0].measured_step_ms"), qPrintable(dialogs.first()));
  QVERIFY2(dialogs.first().contains("broken.json"), qPrintable(dialogs.first()));
  QCOMPARE(window.tunePanel()->table()->rowCount(), 0);
}

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
