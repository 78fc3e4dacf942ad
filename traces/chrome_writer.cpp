#include "traces/chrome_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <ostream>
#include <sstream>
#include <vector>

#include "io/file_output.h"

namespace ddpscope::traces {

namespace {

constexpr size_t kFlushBytes = 64 * 1024;

void appendInt(std::string& out, int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

void appendUnsigned(std::string& out, uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

// Length of the valid UTF-8 sequence starting at text[i], or 0 when invalid.
size_t utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  size_t length;
  uint32_t min;
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  uint32_t code = c & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

void appendArgValue(std::string& out, const ArgValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    appendInt(out, *i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    appendJsonDouble(out, *d);
  } else {
    appendJsonString(out, std::get<std::string>(value));
  }
}

void appendArgsObject(std::string& out, const Args& args) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : args) {
    if (!first) out += ',';
    first = false;
    appendJsonString(out, key);
    out += ':';
    appendArgValue(out, value);
  }
  out += '}';
}

void appendPidTid(std::string& out, int pid, int tid) {
  out += ",\"pid\":";
  appendInt(out, pid);
  out += ",\"tid\":";
  appendInt(out, tid);
}

// The start of a metadata event, up to its args object:
//   {"ph":"M","name":"<name>","pid":P,"tid":T,"args":{
// The caller appends the args and "}}".
void appendMetadataHead(std::string& out, std::string_view name, int pid, int tid) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += name;
  out += '"';
  appendPidTid(out, pid, tid);
  out += ",\"args\":{";
}

// A whole process_sort_index / thread_sort_index event.
void appendSortIndexEvent(std::string& out, std::string_view name, int pid, int tid, int index) {
  appendMetadataHead(out, name, pid, tid);
  out += "\"sort_index\":";
  appendInt(out, index);
  out += "}}";
}

}  // namespace

void appendMicros(std::string& out, Nanos ns) {
  int64_t count = ns.count();
  uint64_t magnitude = count < 0 ? 0 - static_cast<uint64_t>(count) : static_cast<uint64_t>(count);
  if (count < 0) out += '-';
  appendUnsigned(out, magnitude / 1000);
  uint64_t fraction = magnitude % 1000;
  if (fraction == 0) return;
  char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                    static_cast<char>('0' + fraction / 10 % 10),
                    static_cast<char>('0' + fraction % 10)};
  size_t length = 4;
  while (digits[length - 1] == '0') --length;
  out.append(digits, length);
}

void appendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t runStart = 0;
  auto flushRun = [&](size_t i) { out.append(text.data() + runStart, i - runStart); };
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t length = utf8SequenceLength(text, i);
      if (length > 0) {
        i += length;
        continue;
      }
      flushRun(i);
      out += "\\ufffd";
      runStart = ++i;
      continue;
    }
    flushRun(i);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
    }
    runStart = ++i;
  }
  flushRun(i);
  out += '"';
}

void appendJsonDouble(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string_view text(buf, static_cast<size_t>(end - buf));
  out += text;
  // Keep the type on a round trip: a double always reads back as a JSON float.
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

// ---- ChromeTraceWriter ----

ChromeTraceWriter::ChromeTraceWriter(std::ostream& out) : m_out(&out) {
  m_buffer.reserve(kFlushBytes + 4096);
  m_buffer += "{\"traceEvents\":[\n";
}

ChromeTraceWriter::ChromeTraceWriter(std::unique_ptr<io::OutputFile> file)
    : m_file(std::move(file)), m_out(&m_file->stream()) {
  m_buffer.reserve(kFlushBytes + 4096);
  m_buffer += "{\"traceEvents\":[\n";
}

ChromeTraceWriter::~ChromeTraceWriter() = default;

StatusOr<std::unique_ptr<ChromeTraceWriter>> ChromeTraceWriter::open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<io::OutputFile> file, io::OutputFile::open(path));
  return std::unique_ptr<ChromeTraceWriter>(new ChromeTraceWriter(std::move(file)));
}

void ChromeTraceWriter::beginEvent() {
  if (m_eventCount > 0) m_buffer += ",\n";
  ++m_eventCount;
}

void ChromeTraceWriter::flushIfLarge() {
  if (m_buffer.size() >= kFlushBytes) flush();
}

void ChromeTraceWriter::flush() {
  m_out->write(m_buffer.data(), static_cast<std::streamsize>(m_buffer.size()));
  m_bytesWritten += static_cast<int64_t>(m_buffer.size());
  m_buffer.clear();
}

void ChromeTraceWriter::beginRank(int rank, std::string_view name) {
  beginEvent();
  appendMetadataHead(m_buffer, "process_name", rank, 0);
  m_buffer += "\"name\":";
  if (name.empty()) {
    appendJsonString(m_buffer, "rank " + std::to_string(rank));
  } else {
    appendJsonString(m_buffer, name);
  }
  m_buffer += "}}";
  beginEvent();
  appendSortIndexEvent(m_buffer, "process_sort_index", rank, 0, rank);
  flushIfLarge();
}

void ChromeTraceWriter::declareLane(int rank, int tid, std::string_view name, LaneKind kind,
                                    int sortIndex) {
  beginEvent();
  appendMetadataHead(m_buffer, "thread_name", rank, tid);
  m_buffer += "\"name\":";
  appendJsonString(m_buffer, name);
  m_buffer += ",\"lane_kind\":\"";
  m_buffer += laneKindName(kind);
  m_buffer += "\"}}";
  beginEvent();
  appendSortIndexEvent(m_buffer, "thread_sort_index", rank, tid, sortIndex);
  flushIfLarge();
}

void ChromeTraceWriter::addSpan(int rank, int tid, const Span& span) {
  beginEvent();
  m_buffer += "{\"ph\":\"X\",\"name\":";
  appendJsonString(m_buffer, span.name);
  m_buffer += ",\"cat\":\"";
  m_buffer += categoryName(span.category);
  m_buffer += '"';
  appendPidTid(m_buffer, rank, tid);
  m_buffer += ",\"ts\":";
  appendMicros(m_buffer, span.start);
  m_buffer += ",\"dur\":";
  appendMicros(m_buffer, span.duration);
  if (!span.args.empty()) {
    m_buffer += ",\"args\":";
    appendArgsObject(m_buffer, span.args);
  }
  m_buffer += '}';
  flushIfLarge();
}

void ChromeTraceWriter::addFlow(const Flow& flow) {
  auto appendHalf = [&](const char* phase, const FlowEndpoint& point, bool bindEnclosing) {
    beginEvent();
    m_buffer += "{\"ph\":\"";
    m_buffer += phase;
    m_buffer += "\",\"id\":";
    appendUnsigned(m_buffer, flow.id);
    m_buffer += ",\"name\":";
    appendJsonString(m_buffer, flow.name);
    m_buffer += ",\"cat\":";
    appendJsonString(m_buffer, flow.category);
    appendPidTid(m_buffer, point.rank, point.lane);
    m_buffer += ",\"ts\":";
    appendMicros(m_buffer, point.time);
    if (bindEnclosing) m_buffer += ",\"bp\":\"e\"";
    m_buffer += '}';
  };
  appendHalf("s", flow.from, false);
  appendHalf("f", flow.to, true);
  flushIfLarge();
}

void ChromeTraceWriter::addCounter(const Counter& counter) {
  beginEvent();
  m_buffer += "{\"ph\":\"C\",\"name\":";
  appendJsonString(m_buffer, counter.name);
  m_buffer += ",\"pid\":";
  appendInt(m_buffer, counter.rank);
  m_buffer += ",\"ts\":";
  appendMicros(m_buffer, counter.time);
  m_buffer += ",\"args\":{\"value\":";
  appendJsonDouble(m_buffer, counter.value);
  m_buffer += "}}";
  flushIfLarge();
}

Status ChromeTraceWriter::finish() {
  if (m_finished) return failedPrecondition("ChromeTraceWriter::finish() called twice");
  m_finished = true;
  m_buffer += "\n],\n\"displayTimeUnit\":\"ms\"";
  if (!m_traceName.empty()) {
    m_buffer += ",\n\"traceName\":";
    appendJsonString(m_buffer, m_traceName);
  }
  m_buffer += ",\n\"otherData\":";
  appendArgsObject(m_buffer, m_metadata);
  m_buffer += "\n}\n";
  flush();
  m_out->flush();
  // A file reports its own errors with the system's reason (and is renamed into place only
  // when every write succeeded); a caller's stream only says whether it failed.
  if (m_file) return m_file->close();
  if (!*m_out) return internalError("trace stream: write failed");
  return Status::ok();
}

// ---- whole-timeline helpers ----

namespace {

void writeTimeline(const Timeline& timeline, ChromeTraceWriter& writer) {
  writer.setTraceName(timeline.name());
  writer.setMetadata(timeline.metadata());
  for (const RankTrack& track : timeline.ranks()) {
    writer.beginRank(track.rank, track.name);
    for (size_t lane = 0; lane < track.lanes.size(); ++lane) {
      writer.declareLane(track.rank, static_cast<int>(lane), track.lanes[lane].name,
                         track.lanes[lane].kind, static_cast<int>(lane));
    }
  }
  std::vector<uint32_t> order;
  for (const RankTrack& track : timeline.ranks()) {
    for (size_t laneIndex = 0; laneIndex < track.lanes.size(); ++laneIndex) {
      const std::vector<Span>& spans = track.lanes[laneIndex].spans;
      int tid = static_cast<int>(laneIndex);
      if (std::is_sorted(spans.begin(), spans.end(), spanPrecedes)) {
        for (const Span& span : spans) writer.addSpan(track.rank, tid, span);
        continue;
      }
      order.resize(spans.size());
      std::iota(order.begin(), order.end(), 0U);
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return spanPrecedes(spans[a], spans[b]); });
      for (uint32_t index : order) writer.addSpan(track.rank, tid, spans[index]);
    }
  }
  for (const Flow& flow : timeline.flows()) writer.addFlow(flow);
  for (const Counter& counter : timeline.counters()) writer.addCounter(counter);
}

}  // namespace

Status writeChromeTrace(const Timeline& timeline, std::ostream& out) {
  ChromeTraceWriter writer(out);
  writeTimeline(timeline, writer);
  return writer.finish();
}

Status writeChromeTrace(const Timeline& timeline, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ChromeTraceWriter> writer, ChromeTraceWriter::open(path));
  writeTimeline(timeline, *writer);
  return writer->finish();
}

std::string chromeTraceToString(const Timeline& timeline) {
  std::ostringstream out;
  Status status = writeChromeTrace(timeline, out);
  DDPSCOPE_CHECK_MSG(status.isOk(), status.message().c_str());
  return out.str();
}

}  // namespace ddpscope::traces
