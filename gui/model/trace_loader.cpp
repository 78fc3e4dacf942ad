#include "gui/model/trace_loader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QMetaObject>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "io/file_input.h"
#include "traces/chrome_reader.h"
#include "traces/kineto_import.h"

namespace ddpscope::gui {

namespace {

std::string str(const QString& text) {
  return text.toStdString();
}

// The files of one run, before they are read: a directory's, or the files given besides
// directories (which may still turn out to be one run each).
struct RunSource {
  QStringList files;
  QString directory;  // empty: files given one by one
};

// A file of a several-file source after its classifying read.
struct ReadTrace {
  QString path;
  bool pytorch = false;                      // a PyTorch profiler (Kineto) trace
  std::optional<traces::Timeline> timeline;  // kept when it may open as a run of its own
};

StatusOr<ReadTrace> readTrace(const QString& path, bool keepTimeline) {
  RETURN_IF_ERROR(checkTraceSize(path));
  traces::ChromeReadReport report;
  // checkTraceSize admitted it: a .json.gz inflates under the GUI's limit, not the CLI's.
  traces::ChromeReadOptions options;
  options.maxGunzipBytes = maxTraceBytes();
  ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(str(path), options, &report));
  ReadTrace trace;
  trace.path = path;
  trace.pytorch = report.singleRankTrace;
  if (keepTimeline) trace.timeline = std::move(timeline);
  return trace;
}

Status tooManyRuns(const QStringList& paths, int maxRuns) {
  return invalidArgument(str(paths.join(", ")) + ": more than " +
                         (maxRuns == 1 ? "one run" : std::to_string(maxRuns) + " runs") +
                         "; several PyTorch profiler traces (one per rank) open as one run, "
                         "other traces one run each (run A and run B)");
}

Status mixedKinds(const RunSource& source, const QStringList& pytorch, const QStringList& others) {
  const std::string where = source.directory.isEmpty() ? "" : str(source.directory) + ": ";
  const std::string what = others.size() == 1 ? " is not" : " are not";
  if (pytorch.isEmpty()) {
    return invalidArgument(where + str(others.join(", ")) + what +
                           " PyTorch profiler traces: a directory opens as one run of per-rank "
                           "PyTorch profiler traces; open other traces one by one");
  }
  return invalidArgument(
      where + "mixed kinds: " + str(pytorch.join(", ")) +
      (pytorch.size() == 1 ? " is a PyTorch profiler trace, " : " are PyTorch profiler traces, ") +
      str(others.join(", ")) + what + ": a run is one PyTorch profiler trace per rank");
}

StatusOr<LoadedRun> openSingleFile(const QString& path, const QString& recentPath,
                                   const LoadProgress& progress) {
  LoadedRun run;
  ASSIGN_OR_RETURN(run.document, loadTraceDocument(path, progress));
  run.label = QFileInfo(path).fileName();
  run.recentPath = recentPath;
  run.files << path;
  return run;
}

LoadedRun runOfTimeline(ReadTrace trace) {
  LoadedRun run;
  run.label = QFileInfo(trace.path).fileName();
  run.document = TraceDocument::build(std::move(*trace.timeline), str(run.label));
  run.recentPath = trace.path;
  run.files << trace.path;
  return run;
}

StatusOr<LoadedRun> importRun(const RunSource& source) {
  std::vector<std::string> files;
  for (const QString& file : source.files) {
    RETURN_IF_ERROR(checkTraceSize(file));
    files.push_back(str(file));
  }
  traces::KinetoImportReport report;
  traces::KinetoImportOptions options;
  options.maxGunzipBytes = maxTraceBytes();
  // A trace recorded with record_shapes brings its model: its spans are named by layer, as
  // `ddpscope import-torch` without --model names them (the import's notes say when not).
  options.readModel = true;
  ASSIGN_OR_RETURN(traces::Timeline timeline, traces::importKinetoTraces(files, options, &report));
  LoadedRun run;
  const int ranks = timeline.rankCount();
  if (source.directory.isEmpty()) {
    run.label = QString("%1 and %2 more (%3 ranks)")
                    .arg(QFileInfo(source.files.first()).fileName())
                    .arg(source.files.size() - 1)
                    .arg(ranks);
  } else {
    run.label = QString("%1 (%2 ranks)")
                    .arg(QFileInfo(QDir(source.directory).absolutePath()).fileName())
                    .arg(ranks);
    run.recentPath = source.directory;
  }
  for (const std::string& file : report.files) run.files << QString::fromStdString(file);
  for (const std::string& note : report.notes) run.notes << QString::fromStdString(note);
  run.document = TraceDocument::build(std::move(timeline), str(run.label));
  return run;
}

// Queues calls to a TraceLoader on its thread from a worker (progress signals).
using Post = std::function<void(std::function<void(TraceLoader*)>)>;

// Runs `work(post)` on QtConcurrent's pool and hands its result to `done` on the loader's
// thread. `done` runs only while the loader lives (the watcher is its child).
template <typename Result, typename Work, typename Done>
void runOnWorker(TraceLoader* loader, Work work, Done done) {
  QPointer<TraceLoader> self(loader);
  Post post = [self](std::function<void(TraceLoader*)> call) {
    if (!self) return;
    QMetaObject::invokeMethod(
        self.data(),
        [self, call = std::move(call)]() {
          if (self) call(self.data());
        },
        Qt::QueuedConnection);
  };
  auto* watcher = new QFutureWatcher<Result>(loader);
  QObject::connect(watcher, &QFutureWatcher<Result>::finished, loader,
                   [watcher, done = std::move(done)]() {
                     Result result = watcher->result();
                     watcher->deleteLater();
                     done(std::move(result));
                   });
  watcher->setFuture(QtConcurrent::run([work = std::move(work), post]() { return work(post); }));
}

}  // namespace

int64_t maxTraceBytes() {
  bool ok = false;
  const qint64 mb = qEnvironmentVariableIntValue(kMaxTraceMbVariable, &ok);
  if (ok && mb > 0) return mb * 1'000'000;
  return kDefaultMaxTraceBytes;
}

Status checkTraceSize(const QString& path) {
  QFileInfo info(path);
  if (!info.exists()) return Status::ok();  // opening it gives the error
  const std::string name = str(path);
  if (info.isDir()) return invalidArgument(name + ": is a directory, not a trace file");
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    return invalidArgument(name + ": cannot open: " + str(file.errorString()));
  }
  const int64_t limit = maxTraceBytes();
  auto mb = [](int64_t bytes) { return std::to_string((bytes + 500'000) / 1'000'000) + " MB"; };
  const std::string advice =
      " is more than the GUI opens (" + mb(limit) + "; opening takes about " +
      std::to_string(kMemoryPerTraceByte) +
      " bytes of memory per byte of JSON). Cut the trace (fewer ranks or iterations, e.g. "
      "`ddpscope simulate --iterations`), or raise the limit with " +
      kMaxTraceMbVariable + "=MB if the machine has the memory.";
  unsigned char head[2] = {0, 0};
  const bool gzipped =
      file.read(reinterpret_cast<char*>(head), 2) == 2 && head[0] == 0x1f && head[1] == 0x8b;
  if (!gzipped) {
    if (file.size() <= limit) return Status::ok();
    return invalidArgument(name + ": " + mb(file.size()) + " of trace JSON" + advice);
  }
  // gzip: the trailer's size (of the last member, modulo 4 GiB) is the size when the file is a
  // single member too small to wrap (deflate inflates at most ~1032×); otherwise, or when the
  // trailer says too big, count by inflating (memory O(1), at most `limit` bytes of work).
  constexpr int64_t kNoWrapCompressedBytes = (int64_t{1} << 32) / 1032;
  unsigned char trailer[4] = {0, 0, 0, 0};
  if (file.size() >= 18 && file.size() <= kNoWrapCompressedBytes && file.seek(file.size() - 4) &&
      file.read(reinterpret_cast<char*>(trailer), 4) == 4) {
    const int64_t isize = int64_t{trailer[0]} | int64_t{trailer[1]} << 8 |
                          int64_t{trailer[2]} << 16 | int64_t{trailer[3]} << 24;
    if (isize <= limit) return Status::ok();
  }
  file.close();
  ASSIGN_OR_RETURN(const int64_t plainBytes, io::gunzippedSize(name, limit));
  if (plainBytes <= limit) return Status::ok();
  return invalidArgument(name + ": more than " + mb(limit) + " of trace JSON (uncompressed)" +
                         advice);
}

StatusOr<TraceDocumentPtr> loadTraceDocument(const QString& path, const LoadProgress& progress) {
  auto report = [&](int percent, const char* stage) {
    if (progress) progress(percent, QString::fromUtf8(stage));
  };
  std::string name = path.toStdString();
  RETURN_IF_ERROR(checkTraceSize(path));
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
  traces::ChromeReadOptions options;
  options.maxGunzipBytes = maxTraceBytes();  // checkTraceSize admitted it under this limit
  StatusOr<traces::Timeline> timeline = traces::parseChromeTrace(bytes, name, options);
  if (!timeline.isOk()) return timeline.status();
  std::string().swap(bytes);
  report(85, "indexing");
  TraceDocumentPtr doc =
      TraceDocument::build(std::move(timeline).value(), QFileInfo(path).fileName().toStdString());
  report(100, "done");
  return doc;
}

QStringList traceFilesInDirectory(const QString& directory) {
  QDir dir(directory);
  QStringList files;
  const QStringList names = dir.entryList({"*.json", "*.json.gz"}, QDir::Files, QDir::Name);
  for (const QString& name : names) files << dir.filePath(name);
  return files;
}

QString describePaths(const QStringList& paths) {
  if (paths.size() <= 1) return paths.value(0);
  return QObject::tr("%1 and %2 more").arg(paths.first()).arg(paths.size() - 1);
}

StatusOr<std::vector<LoadedRun>> loadTraces(const QStringList& paths, int maxRuns,
                                            const LoadProgress& progress,
                                            const FilesProgress& filesProgress) {
  if (paths.isEmpty()) return invalidArgument("no trace files given");
  // Each directory is one source; the files given are one source, at the first one's place.
  std::vector<RunSource> sources;
  std::optional<size_t> given;
  for (const QString& path : paths) {
    if (QFileInfo(path).isDir()) {
      QStringList files = traceFilesInDirectory(path);
      if (files.isEmpty()) {
        return invalidArgument(str(path) +
                               ": no trace files (*.json, *.json.gz) in this directory");
      }
      sources.push_back({std::move(files), path});
    } else {
      if (!given) {
        given = sources.size();
        sources.emplace_back();
      }
      sources[*given].files << path;
    }
  }
  if (std::ssize(sources) > maxRuns) return tooManyRuns(paths, maxRuns);

  int fileCount = 0;
  for (const RunSource& source : sources) {
    if (source.files.size() > 1) fileCount += static_cast<int>(source.files.size());
  }
  int filesDone = 0;
  std::vector<LoadedRun> runs;
  for (const RunSource& source : sources) {
    if (source.files.size() == 1) {
      const QString& file = source.files.first();
      ASSIGN_OR_RETURN(
          LoadedRun run,
          openSingleFile(file, source.directory.isEmpty() ? file : source.directory, progress));
      runs.push_back(std::move(run));
      continue;
    }
    // Given files may each be a run of their own: keep what was read when they can be.
    const bool keep = source.directory.isEmpty() && source.files.size() <= maxRuns;
    std::vector<ReadTrace> read;
    QStringList pytorch;
    QStringList others;
    for (const QString& file : source.files) {
      ASSIGN_OR_RETURN(ReadTrace trace, readTrace(file, keep));
      (trace.pytorch ? pytorch : others) << file;
      read.push_back(std::move(trace));
      ++filesDone;
      if (filesProgress) filesProgress(filesDone, fileCount, file);
    }
    if (others.isEmpty()) {
      read.clear();  // the importer reads the files again
      ASSIGN_OR_RETURN(LoadedRun run, importRun(source));
      runs.push_back(std::move(run));
      continue;
    }
    if (!source.directory.isEmpty() || pytorch.size() > 1) {
      return mixedKinds(source, pytorch, others);
    }
    if (!keep) return tooManyRuns(paths, maxRuns);
    for (ReadTrace& trace : read) runs.push_back(runOfTimeline(std::move(trace)));
  }
  if (std::ssize(runs) > maxRuns) return tooManyRuns(paths, maxRuns);
  return runs;
}

TraceLoader::TraceLoader(QObject* parent) : QObject(parent) {
  qRegisterMetaType<TraceDocumentPtr>();
  qRegisterMetaType<LoadedRun>();
}

TraceLoader::~TraceLoader() = default;

void TraceLoader::open(const QString& path, int slot) {
  ++m_pending;
  runOnWorker<StatusOr<TraceDocumentPtr>>(
      this,
      [path, slot](const Post& post) {
        return loadTraceDocument(path, [post, slot](int percent, const QString& stage) {
          post([slot, percent, stage](TraceLoader* self) {
            emit self->progress(slot, percent, stage);
          });
        });
      },
      [this, path, slot](StatusOr<TraceDocumentPtr> result) {
        --m_pending;
        if (result.isOk()) {
          emit loaded(slot, path, *result);
        } else {
          emit failed(slot, path, QString::fromStdString(result.status().message()));
        }
      });
}

void TraceLoader::openPaths(const QStringList& paths, int slot) {
  const QString name = describePaths(paths);
  ++m_pending;
  runOnWorker<StatusOr<std::vector<LoadedRun>>>(
      this,
      [paths, slot](const Post& post) {
        return loadTraces(
            paths, kRunSlots - slot,
            [post, slot](int percent, const QString& stage) {
              post([slot, percent, stage](TraceLoader* self) {
                emit self->progress(slot, percent, stage);
              });
            },
            [post, slot](int filesDone, int fileCount, const QString& file) {
              post([slot, filesDone, fileCount, file](TraceLoader* self) {
                emit self->filesProgress(slot, filesDone, fileCount, file);
              });
            });
      },
      [this, name, slot](StatusOr<std::vector<LoadedRun>> result) {
        --m_pending;
        if (!result.isOk()) {
          emit failed(slot, name, QString::fromStdString(result.status().message()));
          return;
        }
        for (size_t i = 0; i < result->size(); ++i) {
          emit runLoaded(slot + static_cast<int>(i), (*result)[i]);
        }
      });
}

}  // namespace ddpscope::gui
