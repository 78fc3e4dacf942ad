#include "gui/model/trace_loader.h"

#include <QFile>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QMetaObject>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>
#include <string>

#include "traces/chrome_reader.h"

namespace ddpscope::gui {

StatusOr<TraceDocumentPtr> loadTraceDocument(const QString& path, const LoadProgress& progress) {
  auto report = [&](int percent, const char* stage) {
    if (progress) progress(percent, QString::fromUtf8(stage));
  };
  std::string name = path.toStdString();
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    return invalidArgument(name + ": cannot open: " + file.errorString().toStdString());
  }
  const qint64 total = file.size();
  std::string bytes;
  if (total > 0) bytes.reserve(static_cast<size_t>(total));
  constexpr qint64 kChunk = 4 << 20;
  std::string chunk(static_cast<size_t>(kChunk), '\0');
  report(0, "reading");
  while (true) {
    qint64 n = file.read(chunk.data(), kChunk);
    if (n < 0) return invalidArgument(name + ": read error: " + file.errorString().toStdString());
    if (n == 0) break;
    bytes.append(chunk.data(), static_cast<size_t>(n));
    if (total > 0)
      report(static_cast<int>(40 * static_cast<qint64>(bytes.size()) / total), "reading");
  }
  if (bytes.empty()) return invalidArgument(name + ": the file is empty");
  report(40, "parsing");
  StatusOr<traces::Timeline> timeline = traces::parseChromeTrace(bytes, name);
  if (!timeline.isOk()) return timeline.status();
  std::string().swap(bytes);
  report(85, "indexing");
  TraceDocumentPtr doc =
      TraceDocument::build(std::move(timeline).value(), QFileInfo(path).fileName().toStdString());
  report(100, "done");
  return doc;
}

TraceLoader::TraceLoader(QObject* parent) : QObject(parent) {
  qRegisterMetaType<TraceDocumentPtr>();
}

TraceLoader::~TraceLoader() = default;

void TraceLoader::open(const QString& path, int slot) {
  ++m_pending;
  QPointer<TraceLoader> self(this);
  auto* watcher = new QFutureWatcher<StatusOr<TraceDocumentPtr>>(this);
  connect(watcher, &QFutureWatcher<StatusOr<TraceDocumentPtr>>::finished, this,
          [this, watcher, path, slot]() {
            --m_pending;
            StatusOr<TraceDocumentPtr> result = watcher->result();
            watcher->deleteLater();
            if (result.isOk()) {
              emit loaded(slot, path, *result);
            } else {
              emit failed(slot, path, QString::fromStdString(result.status().message()));
            }
          });
  watcher->setFuture(QtConcurrent::run([self, path, slot]() {
    return loadTraceDocument(path, [self, slot](int percent, const QString& stage) {
      if (!self) return;
      QMetaObject::invokeMethod(
          self.data(),
          [self, slot, percent, stage]() {
            if (self) emit self->progress(slot, percent, stage);
          },
          Qt::QueuedConnection);
    });
  }));
}

}  // namespace ddpscope::gui
