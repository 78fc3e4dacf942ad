// TraceLoader: opens trace files off the UI thread.
//
// open() reads the file in chunks on a worker (QtConcurrent's pool), reporting progress, then
// parses it (traces::parseChromeTrace: Chrome JSON, ddpscope and PyTorch profiler / Kineto
// traces, gzip) and builds the TraceDocument; the immutable document is handed to the UI
// thread through loaded(). Any failure — unreadable file, invalid JSON, a field of the wrong
// type — arrives as failed() with the reader's message; nothing throws into the UI.
//
// Several loads may be in flight; each carries the caller's `slot` tag (e.g. run A / run B).
// loadTraceDocument() is the same work, synchronous (command-line screenshots, tests).
#pragma once

#include <QObject>
#include <QString>
#include <functional>

#include "base/status.h"
#include "gui/model/trace_document.h"

namespace ddpscope::gui {

// Stage text and percent (0–100); called from the worker thread.
using LoadProgress = std::function<void(int percent, const QString& stage)>;

StatusOr<TraceDocumentPtr> loadTraceDocument(const QString& path,
                                             const LoadProgress& progress = {});

class TraceLoader : public QObject {
  Q_OBJECT
 public:
  explicit TraceLoader(QObject* parent = nullptr);
  ~TraceLoader() override;

  void open(const QString& path, int slot = 0);
  int pending() const { return m_pending; }

 signals:
  void progress(int slot, int percent, const QString& stage);
  void loaded(int slot, const QString& path, ddpscope::gui::TraceDocumentPtr document);
  void failed(int slot, const QString& path, const QString& message);

 private:
  int m_pending = 0;
};

}  // namespace ddpscope::gui

Q_DECLARE_METATYPE(ddpscope::gui::TraceDocumentPtr)
