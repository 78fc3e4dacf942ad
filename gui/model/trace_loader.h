// TraceLoader: opens trace files off the UI thread.
//
// open() reads the file in chunks on a worker (QtConcurrent's pool), reporting progress, then
// parses it (traces::parseChromeTrace: Chrome JSON, ddpscope and PyTorch profiler / Kineto
// traces, gzip) and builds the TraceDocument; the immutable document is handed to the UI
// thread through loaded(). Any failure — unreadable file, invalid JSON, a field of the wrong
// type — arrives as failed() with the reader's message; nothing throws into the UI.
//
// openPaths() opens what a user names on the command line, drops or picks in File ▸ Open: any
// mix of trace files and directories, as one or two runs (loadTraces: the rules are there). A
// PyTorch DDP job writes one profiler trace per rank; those open as one multi-rank run through
// traces::importKinetoTraces. Runs arrive through runLoaded() (slot, slot + 1), a failure
// through failed(); when several files are read, filesProgress() fires once per file.
//
// Several loads may be in flight; each carries the caller's `slot` tag (e.g. run A / run B).
// loadTraceDocument() and loadTraces() are the same work, synchronous (command-line
// screenshots, tests).
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <functional>
#include <vector>

#include "base/status.h"
#include "gui/model/trace_document.h"

namespace ddpscope::gui {

// Stage text and percent (0–100); called from the worker thread.
using LoadProgress = std::function<void(int percent, const QString& stage)>;
// One call per trace file read of a multi-file load: `filesDone` of `fileCount` files are
// read, `file` being the last; called from the worker thread.
using FilesProgress = std::function<void(int filesDone, int fileCount, const QString& file)>;

// Huge inputs: a trace opens in memory (the file's bytes, then the parsed timeline and its
// index, about kMemoryPerTraceByte bytes per byte of JSON at the peak), so files above
// maxTraceBytes() of JSON are refused before they are parsed, with a message that names the
// file, its size, the limit and the way out. A gzip file counts with its uncompressed size:
// its trailer's when that is exact, else counted by inflating up to the limit (io::
// gunzippedSize; a truncated or corrupt gzip file gives its gzip error here).
inline constexpr int64_t kDefaultMaxTraceBytes = 1'000'000'000;  // 1 GB of JSON
// Measured: a 1.05 GB simulated trace (scripts/make-large-trace) opened at 3.57 GB peak RSS.
inline constexpr int kMemoryPerTraceByte = 4;
inline constexpr const char* kMaxTraceMbVariable = "DDPSCOPE_GUI_MAX_TRACE_MB";
// The limit: $DDPSCOPE_GUI_MAX_TRACE_MB (decimal MB) when set to a positive integer, else
// kDefaultMaxTraceBytes.
int64_t maxTraceBytes();
// ok, or InvalidArgument when `path` holds more trace JSON than maxTraceBytes() (a directory:
// too; a missing file: ok, opening it reports that).
Status checkTraceSize(const QString& path);

StatusOr<TraceDocumentPtr> loadTraceDocument(const QString& path,
                                             const LoadProgress& progress = {});

// One run opened by loadTraces: a trace file, or per-rank PyTorch profiler traces imported as
// one multi-rank timeline.
struct LoadedRun {
  TraceDocumentPtr document;
  QString label;       // window title / Compare label: "a.json", "profiles (4 ranks)"
  QString recentPath;  // what Open recent reopens (the file or directory); empty for a list
  QStringList files;   // the trace files read (an import: one per rank, in rank order)
  QStringList notes;   // the importer's notes (float32 assumed for some collectives, ...)
};

// Documents a window holds: run A (slot 0) and run B (slot 1, comparison).
inline constexpr int kRunSlots = 2;

// The trace files a directory holds: *.json and *.json.gz (PyTorch's *.pt.trace.json(.gz)
// included), not recursive, sorted by name.
QStringList traceFilesInDirectory(const QString& directory);

// Opens `paths` as runs (at most `maxRuns`):
//   - a directory is one run of the trace files it holds; none is an error naming it;
//   - a single file opens as loadTraceDocument opens it (any trace the Chrome reader takes,
//     a single PyTorch profiler trace included);
//   - several files of one run (a directory's, or the files given besides directories) that
//     are all PyTorch profiler (Kineto) traces are imported by traces::importKinetoTraces: one
//     file per rank, ranks from distributedInfo, a missing rank is an error;
//   - given files that are not all PyTorch profiler traces are one run each, as
//     `ddpscope-gui A.json B.json` has always compared them; several PyTorch traces mixed with
//     others are an error ("mixed kinds") naming both, as is a directory holding other traces.
// Files are classified by reading them (the Chrome reader's rule: a schemaVersion or
// distributedInfo key makes a PyTorch profiler trace), one filesProgress call each; an
// imported run is then read again by the importer. Every error names the file.
// `maxRuns`: 2 from run A, 1 when opening run B; more runs is an error.
StatusOr<std::vector<LoadedRun>> loadTraces(const QStringList& paths, int maxRuns = kRunSlots,
                                            const LoadProgress& progress = {},
                                            const FilesProgress& filesProgress = {});
// How errors and status messages name `paths`: the path, or the first and how many more.
QString describePaths(const QStringList& paths);

class TraceLoader : public QObject {
  Q_OBJECT
 public:
  explicit TraceLoader(QObject* parent = nullptr);
  ~TraceLoader() override;

  void open(const QString& path, int slot = 0);
  // loadTraces(paths) on a worker; its runs go to slots `slot`, `slot` + 1 (slots 0 and 1).
  void openPaths(const QStringList& paths, int slot = 0);
  int pending() const { return m_pending; }

 signals:
  void progress(int slot, int percent, const QString& stage);
  void filesProgress(int slot, int filesDone, int fileCount, const QString& file);
  void loaded(int slot, const QString& path, ddpscope::gui::TraceDocumentPtr document);
  void runLoaded(int slot, const ddpscope::gui::LoadedRun& run);
  // `path`: the file, or describePaths() of the paths given.
  void failed(int slot, const QString& path, const QString& message);

 private:
  int m_pending = 0;
};

}  // namespace ddpscope::gui

Q_DECLARE_METATYPE(ddpscope::gui::TraceDocumentPtr)
Q_DECLARE_METATYPE(ddpscope::gui::LoadedRun)
