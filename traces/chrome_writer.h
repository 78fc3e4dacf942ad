// Chrome Trace Event JSON writer (opens in Perfetto and chrome://tracing).
//
// Output shape (docs/spec/trace-formats.md §3, §6):
//   {"traceEvents":[
//   {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}},
//   {"ph":"X","name":"fwd","cat":"forward","pid":0,"tid":0,"ts":1234.567,"dur":2,"args":{...}},
//   ...
//   ],
//   "displayTimeUnit":"ms","traceName":"...","otherData":{metadata}}
//
// - pid = rank id; tid = lane index within the rank; one process_name ("rank N" unless the
//   rank has a name) and one thread_name (the lane name, plus "lane_kind") per lane, with
//   process_sort_index / thread_sort_index.
// - X events only (no B/E): per lane in (ts asc, dur desc, insertion) order, so at equal ts a
//   parent precedes its child.
// - ts/dur are µs printed exactly from the int64 ns (integer division and modulo, trailing
//   zeros trimmed: 1234567 ns → 1234.567, 2000 ns → 2); no double round-trip.
// - flows: an "s" and an "f" (bp:"e") with the same id, cat and name; counters: "C" events
//   with args {"value": v}.
// - "displayTimeUnit" is "ms": Perfetto reads ts as ns when it is "ns" (spec §4.1, §6).
// - The event array is streamed: no JSON DOM is built; each event is formatted into a reused
//   buffer and flushed in 64 KiB blocks. A path ending in ".gz" is gzip-compressed (zlib).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

#include "base/nanos.h"
#include "base/status.h"
#include "traces/timeline.h"

namespace ddpscope::io {
class OutputFile;
}  // namespace ddpscope::io

namespace ddpscope::traces {

// Streaming writer, usable incrementally (the runtime writes as it records):
//   ChromeTraceWriter w(out); w.beginRank(0); w.declareLane(0, 0, "compute", kCompute);
//   w.addSpan(0, 0, span); ...; RETURN_IF_ERROR(w.finish());
// Events are written in call order; the caller keeps each lane in (ts, dur desc) order.
// Not thread-safe.
class ChromeTraceWriter {
 public:
  // Writes to `out`, which must outlive the writer.
  explicit ChromeTraceWriter(std::ostream& out);
  // Opens `path` for writing (gzip when it ends in ".gz"). The error names the path. The
  // trace appears at `path` only when finish() succeeds (io/file_output.h: temporary file +
  // rename); a writer destroyed before that leaves the path untouched.
  static StatusOr<std::unique_ptr<ChromeTraceWriter>> open(const std::string& path);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void setTraceName(std::string name) { m_traceName = std::move(name); }
  void setMetadata(Args metadata) { m_metadata = std::move(metadata); }

  // process_name (`name`, or "rank N" when empty) and process_sort_index (= rank id).
  void beginRank(int rank, std::string_view name = {});
  // thread_name (with "lane_kind") and thread_sort_index for lane `tid` of `rank`.
  void declareLane(int rank, int tid, std::string_view name, LaneKind kind, int sortIndex);
  void addSpan(int rank, int tid, const Span& span);
  void addFlow(const Flow& flow);
  void addCounter(const Counter& counter);

  // Closes the array, writes the trailer and flushes. Error when the stream failed.
  Status finish();
  int64_t eventCount() const { return m_eventCount; }
  int64_t bytesWritten() const { return m_bytesWritten; }

 private:
  explicit ChromeTraceWriter(std::unique_ptr<io::OutputFile> file);
  void beginEvent();
  void flushIfLarge();
  void flush();

  std::unique_ptr<io::OutputFile> m_file;  // only for open(); names the path in errors
  std::ostream* m_out;
  std::string m_buffer;
  std::string m_traceName;
  Args m_metadata;
  int64_t m_eventCount = 0;
  int64_t m_bytesWritten = 0;
  bool m_finished = false;
};

// Writes a whole timeline: metadata events for every rank and lane, then every lane's spans
// in order, then flows, then counters.
Status writeChromeTrace(const Timeline& timeline, std::ostream& out);
// As above, to a file (gzip when the path ends in ".gz"). The error names the path.
Status writeChromeTrace(const Timeline& timeline, const std::string& path);
std::string chromeTraceToString(const Timeline& timeline);

// Formatting helpers, exposed for tests and for other writers.
// Appends `ns` as exact microseconds: 1234567 → "1234.567", -1500 → "-1.5", 2000 → "2".
void appendMicros(std::string& out, Nanos ns);
// Appends a JSON string literal (quotes included); invalid UTF-8 becomes U+FFFD.
void appendJsonString(std::string& out, std::string_view text);
// Appends a double in shortest round-trip form; NaN/inf become null.
void appendJsonDouble(std::string& out, double value);

}  // namespace ddpscope::traces
