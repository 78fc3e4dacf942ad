// Truncated, corrupt and huge inputs to the GUI: each gives an error dialog that names the file
// and says what is wrong, never a crash or a hang, and the window stays usable. The dialog is
// the real one (QMessageBox, offscreen) unless a test installs the error hook. Huge files are
// refused before anything is read (gui/model/trace_loader.h, checkTraceSize), so memory stays
// bounded; the limit comes from DDPSCOPE_GUI_MAX_TRACE_MB.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMessageBox>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <random>
#include <string>

#include "gui/model/trace_loader.h"
#include "gui/widgets/main_window.h"
#include "io/file_input.h"
#include "io/file_output.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

QString dataPath(const QString& name) {
  return QString(DDPSCOPE_TEST_DATA_DIR) + "/" + name;
}

QByteArray readAll(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
  return file.readAll();
}

QString writeFile(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  const QString path = dir.filePath(name);
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size()) {
    qFatal("cannot write %s", qPrintable(path));
  }
  return path;
}

constexpr int kBigEvents = 40000;  // traceOfEvents(kBigEvents): ~2.6 MB

// A valid trace of `events` X events on one lane (~80 bytes each).
QByteArray traceOfEvents(int events) {
  std::string text = "{\"traceEvents\":[";
  for (int i = 0; i < events; ++i) {
    if (i) text += ',';
    text += "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"name\":\"k" + std::to_string(i) +
            "\",\"ts\":" + std::to_string(i * 10) + ",\"dur\":5}";
  }
  text += "]}";
  return QByteArray::fromStdString(text);
}

// The message box the window shows (window-modal, non-blocking), or null.
QMessageBox* shownMessageBox(MainWindow& window) {
  for (QMessageBox* box : window.findChildren<QMessageBox*>()) {
    if (box->isVisible()) return box;
  }
  return nullptr;
}

}  // namespace

class BadInputTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
  void cleanup() { qunsetenv(kMaxTraceMbVariable); }
  void corruptInputsShowAnErrorDialog();
  void hugeTraceIsRefusedBeforeReading();
  void hugeGzipTraceIsRefusedByItsUncompressedSize();
  void traceUnderTheLimitOpens();
};

void BadInputTest::corruptInputsShowAnErrorDialog() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QByteArray gz = readAll(dataPath("torch/ddp_gloo_rank0.json.gz"));
  QByteArray garbage(64 * 1024, '\0');
  std::mt19937 rng(14);
  for (char& c : garbage) c = static_cast<char>(rng());
  QByteArray corruptGz = gz;
  for (qsizetype i = 40; i < corruptGz.size() - 8; i += 7) corruptGz[i] = static_cast<char>(i);
  QByteArray deep(200000, '[');  // deeply nested arrays: no recursion limit to overflow
  const QByteArray good = traceOfEvents(50);
  struct Case {
    QString file;
    QByteArray bytes;
    QString expected;  // substring of the message
  };
  // A NUL inside a string: the length comes from the array (a hand-counted 58 read 2 bytes past
  // the 57-byte literal; found by ASan).
  static constexpr char kNulInString[] =
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\0b\",\"ts\":1,\"dur\":1}]}";
  const std::vector<Case> cases = {
      {"empty.json", QByteArray(), "the file is empty"},
      {"garbage.json", garbage, "invalid JSON at byte"},
      {"truncated.json.gz", gz.left(gz.size() / 2), "gzip"},
      {"corrupt.json.gz", corruptGz, "gzip"},
      {"cut_mid_event.json", good.left(good.size() * 2 / 3), "invalid JSON at byte"},
      {"deep.json", deep, "[0]: expected an event object, got an array"},
      {"nul_in_string.json", QByteArray(kNulInString, sizeof(kNulInString) - 1),
       "invalid JSON at byte"},
  };
  MainWindow window;  // the real error dialog: no error hook
  window.show();
  QSignalSpy errors(&window, &MainWindow::errorReported);
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  for (const Case& c : cases) {
    const QString path = writeFile(dir, c.file, c.bytes);
    errors.clear();
    window.openFile(path);
    QVERIFY2(errors.wait(20000), qPrintable(c.file + ": no error within 20 s"));
    const QString message = errors.first().at(0).toString();
    QVERIFY2(message.contains(c.file), qPrintable(message));  // names the file
    QVERIFY2(message.contains(c.expected, Qt::CaseInsensitive), qPrintable(message));
    QMessageBox* box = shownMessageBox(window);
    QVERIFY2(box, qPrintable(c.file + ": no dialog"));
    QCOMPARE(box->icon(), QMessageBox::Critical);
    QCOMPARE(box->text(), message);
    QVERIFY(box->windowTitle().contains(c.file));
    box->close();
    QTRY_VERIFY(!shownMessageBox(window));
    // The model returns the same error without a window.
    StatusOr<TraceDocumentPtr> doc = loadTraceDocument(path);
    QVERIFY(!doc.isOk());
    QCOMPARE(QString::fromStdString(doc.status().message()), message);
  }
  // Still usable: a good file opens afterwards.
  loaded.clear();
  window.openFile(writeFile(dir, "good.json", good));
  QVERIFY(loaded.wait(20000));
  QVERIFY(window.document());
}

void BadInputTest::hugeTraceIsRefusedBeforeReading() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QByteArray big = traceOfEvents(kBigEvents);  // ~2.6 MB
  QVERIFY(big.size() > 2'000'000);
  const QString path = writeFile(dir, "big.json", big);
  qputenv(kMaxTraceMbVariable, "1");
  QCOMPARE(maxTraceBytes(), int64_t{1'000'000});
  const QString expected = QString("big.json: %1 MB of trace JSON is more than the GUI opens (1 MB")
                               .arg((big.size() + 500'000) / 1'000'000);
  StatusOr<TraceDocumentPtr> doc = loadTraceDocument(path);
  QVERIFY(!doc.isOk());
  const QString message = QString::fromStdString(doc.status().message());
  QVERIFY2(message.contains(expected), qPrintable(message));
  QVERIFY2(message.contains(kMaxTraceMbVariable), qPrintable(message));

  MainWindow window;
  window.show();
  QSignalSpy errors(&window, &MainWindow::errorReported);
  window.openFile(path);
  QVERIFY(errors.wait(20000));
  QCOMPARE(errors.first().at(0).toString(), message);
  QMessageBox* box = shownMessageBox(window);
  QVERIFY(box);
  QCOMPARE(box->text(), message);
  box->close();
  // A directory of such files (a multi-file run) is refused the same way.
  writeFile(dir, "big2.json", big);
  errors.clear();
  window.openFile(dir.path());
  QVERIFY(errors.wait(20000));
  QVERIFY2(errors.first().at(0).toString().contains("is more than the GUI opens"),
           qPrintable(errors.first().at(0).toString()));
  // Raising the limit opens it.
  qputenv(kMaxTraceMbVariable, "10");
  doc = loadTraceDocument(path);
  QVERIFY2(doc.isOk(), doc.status().message().c_str());
  QCOMPARE((*doc)->spanCount(), size_t{kBigEvents});
}

void BadInputTest::hugeGzipTraceIsRefusedByItsUncompressedSize() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  // ~2.6 MB of JSON compressed to a few KB: refused by its uncompressed size.
  const QString path = dir.filePath("big.json.gz");
  {
    auto out = io::OutputFile::open(path.toStdString());
    QVERIFY(out.isOk());
    const QByteArray big = traceOfEvents(kBigEvents);
    (*out)->stream().write(big.constData(), big.size());
    QVERIFY((*out)->close().isOk());
  }
  QVERIFY(QFileInfo(path).size() < 1'000'000);
  qputenv(kMaxTraceMbVariable, "1");
  StatusOr<TraceDocumentPtr> doc = loadTraceDocument(path);
  QVERIFY(!doc.isOk());
  QString message = QString::fromStdString(doc.status().message());
  QVERIFY2(message.contains(
               "big.json.gz: more than 1 MB of trace JSON (uncompressed) is more than the GUI "
               "opens (1 MB"),
           qPrintable(message));
  // A forged trailer claiming 3.5 GB: counted by inflating instead, which finds the forgery.
  QByteArray gz = readAll(dataPath("torch/ddp_gloo_rank0.json.gz"));
  const uint32_t claimed = 3'500'000'000u;
  for (int i = 0; i < 4; ++i)
    gz[gz.size() - 4 + i] = static_cast<char>((claimed >> (8 * i)) & 0xff);
  const QString forged = writeFile(dir, "forged.json.gz", gz);
  qunsetenv(kMaxTraceMbVariable);
  const Status forgedStatus = checkTraceSize(forged);
  QVERIFY(!forgedStatus.isOk());
  QVERIFY2(forgedStatus.message().find("forged.json.gz: gzip: incorrect length check") !=
               std::string::npos,
           forgedStatus.message().c_str());
  // Counting stops just past the limit; without one it gives the exact size.
  StatusOr<int64_t> counted = io::gunzippedSize(path.toStdString(), 1000);
  QVERIFY(counted.isOk());
  QCOMPARE(*counted, int64_t{1001});
  counted = io::gunzippedSize(path.toStdString(), int64_t{1} << 40);
  QVERIFY(counted.isOk());
  QCOMPARE(*counted, int64_t{traceOfEvents(kBigEvents).size()});
}

void BadInputTest::traceUnderTheLimitOpens() {
  // The gzip fixture's real trailer is small: it opens (the check reads the trailer right).
  StatusOr<TraceDocumentPtr> doc = loadTraceDocument(dataPath("torch/ddp_gloo_rank0.json.gz"));
  QVERIFY2(doc.isOk(), doc.status().message().c_str());
  QVERIFY((*doc)->spanCount() > 0);
  QVERIFY(checkTraceSize(dataPath("torch/ddp_gloo_rank0.json.gz")).isOk());
  QVERIFY(!checkTraceSize(QString(DDPSCOPE_TEST_DATA_DIR)).isOk());  // a directory
  // A .json.gz inflates under the GUI's limit, not the CLI's DDPSCOPE_MAX_GUNZIP_MB: a user who
  // raises DDPSCOPE_GUI_MAX_TRACE_MB needs nothing else (here the CLI would refuse its setting).
  qputenv(io::kMaxGunzipMbVariable, "not a number");
  StatusOr<TraceDocumentPtr> gz = loadTraceDocument(dataPath("torch/ddp_gloo_rank0.json.gz"));
  qunsetenv(io::kMaxGunzipMbVariable);
  QVERIFY2(gz.isOk(), gz.status().message().c_str());
  QCOMPARE((*gz)->spanCount(), (*doc)->spanCount());
}

QTEST_MAIN(BadInputTest)
#include "bad_input_test.moc"
