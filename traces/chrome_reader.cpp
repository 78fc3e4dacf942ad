#include "traces/chrome_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "base/strings.h"
#include "io/file_input.h"
#include "traces/chrome_writer.h"
#include "traces/classify.h"

namespace ddpscope::traces {

namespace {

using Json = nlohmann::json;

// ---- pid / tid keys ----

// A pid or tid: an integer, or a string interned to an id.
struct IdKey {
  int64_t value = 0;
  bool isString = false;
  bool operator==(const IdKey&) const = default;
};

struct LaneKey {
  IdKey pid;
  IdKey tid;
  bool operator==(const LaneKey&) const = default;
};

struct LaneKeyHash {
  size_t operator()(const LaneKey& key) const {
    uint64_t h = static_cast<uint64_t>(key.pid.value) * 0x9E3779B97F4A7C15ULL;
    h ^= static_cast<uint64_t>(key.tid.value) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
    h ^= (key.pid.isString ? 1U : 0U) | (key.tid.isString ? 2U : 0U);
    return static_cast<size_t>(h);
  }
};

struct IdKeyHash {
  size_t operator()(const IdKey& key) const {
    return std::hash<int64_t>()(key.value) ^ (key.isString ? 0x5bd1e995U : 0U);
  }
};

// tid of the per-process lane that holds process- and global-scope instants.
constexpr IdKey kInstantsTid{-1, true};

// ---- one decoded field of the current event ----

struct FieldValue {
  enum class Kind : uint8_t {
    kMissing,
    kInt,
    kUnsigned,
    kFloat,
    kString,
    kBool,
    kNull,
    kObject,
    kArray
  };
  Kind kind = Kind::kMissing;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  std::string text;  // string value, or the raw text of a float

  void reset() {
    kind = Kind::kMissing;
    text.clear();
  }
  bool present() const { return kind != Kind::kMissing; }
  std::string repr() const {
    switch (kind) {
      case Kind::kMissing:
        return "nothing";
      case Kind::kInt:
        return std::to_string(i);
      case Kind::kUnsigned:
        return std::to_string(u);
      case Kind::kFloat:
        return text;
      case Kind::kString: {
        std::string out;
        appendJsonString(out, text.size() > 60 ? text.substr(0, 60) + "..." : text);
        return out;
      }
      case Kind::kBool:
        return b ? "true" : "false";
      case Kind::kNull:
        return "null";
      case Kind::kObject:
        return "an object";
      case Kind::kArray:
        return "an array";
    }
    return "?";
  }
};

enum class EventField : uint8_t {
  kNone,
  kPh,
  kName,
  kCat,
  kPid,
  kTid,
  kTs,
  kDur,
  kId,
  kBp,
  kScope,
  kBindId,
  kFlowIn,
  kFlowOut,
  kArgs,
};

EventField eventFieldFromKey(std::string_view key) {
  switch (key.size()) {
    case 1:
      if (key == "s") return EventField::kScope;
      break;
    case 2:
      if (key == "ph") return EventField::kPh;
      if (key == "ts") return EventField::kTs;
      if (key == "id") return EventField::kId;
      if (key == "bp") return EventField::kBp;
      break;
    case 3:
      if (key == "pid") return EventField::kPid;
      if (key == "tid") return EventField::kTid;
      if (key == "dur") return EventField::kDur;
      if (key == "cat") return EventField::kCat;
      break;
    case 4:
      if (key == "name") return EventField::kName;
      if (key == "args") return EventField::kArgs;
      break;
    case 7:
      if (key == "bind_id") return EventField::kBindId;
      if (key == "flow_in") return EventField::kFlowIn;
      break;
    case 8:
      if (key == "flow_out") return EventField::kFlowOut;
      break;
    default:
      break;
  }
  return EventField::kNone;
}

struct RawEvent {
  FieldValue ph, name, cat, pid, tid, ts, dur, id, bp, scope, bindId, flowIn, flowOut;
  Args args;

  void reset() {
    for (FieldValue* f :
         {&ph, &name, &cat, &pid, &tid, &ts, &dur, &id, &bp, &scope, &bindId, &flowIn, &flowOut}) {
      f->reset();
    }
    args.clear();
  }
  FieldValue* field(EventField which) {
    switch (which) {
      case EventField::kPh:
        return &ph;
      case EventField::kName:
        return &name;
      case EventField::kCat:
        return &cat;
      case EventField::kPid:
        return &pid;
      case EventField::kTid:
        return &tid;
      case EventField::kTs:
        return &ts;
      case EventField::kDur:
        return &dur;
      case EventField::kId:
        return &id;
      case EventField::kBp:
        return &bp;
      case EventField::kScope:
        return &scope;
      case EventField::kBindId:
        return &bindId;
      case EventField::kFlowIn:
        return &flowIn;
      case EventField::kFlowOut:
        return &flowOut;
      default:
        return nullptr;
    }
  }
};

// ---- accumulated trace, before ranks are assigned ----

struct OpenSpan {
  Span span;
  bool unresolved = false;
  int64_t eventIndex = 0;
};

struct RawLane {
  LaneKey key;
  int process = 0;  // index into Builder::processes
  std::string threadName;
  std::optional<LaneKind> declaredKind;
  bool gpuEvents = false;
  std::vector<Span> spans;
  std::vector<uint32_t> unresolved;  // spans whose category depends on the lane's kind
  std::vector<OpenSpan> open;        // B events waiting for their E
};

struct RawProcess {
  IdKey pid;
  std::string name;
  std::string labels;
  std::vector<int> lanes;
};

struct RawFlowPoint {
  int lane = 0;
  Nanos time;
};

struct RawFlow {
  uint64_t id = 0;
  std::string name;
  std::string category;
  RawFlowPoint from;
  RawFlowPoint to;
};

struct RawCounter {
  int process = 0;
  std::string name;
  Nanos time;
  double value = 0;
};

// Categories of GPU-side events in Kineto traces.
bool isGpuCat(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" ||
         cat == "gpu_user_annotation" || cat == "cuda_sync";
}

// ---- the SAX handler ----

class TraceSaxHandler {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  TraceSaxHandler(std::string source, const ChromeReadOptions& options, ChromeReadReport* report)
      : m_source(std::move(source)), m_options(options), m_report(report) {}

  Status status() const { return m_status; }
  StatusOr<Timeline> finish();

  // -- SAX callbacks --
  bool null() {
    if (skipping()) return true;
    if (capturing()) return captureRaw("null");
    FieldValue v;
    v.kind = FieldValue::Kind::kNull;
    return onScalar(v);
  }
  bool boolean(bool value) {
    if (skipping()) return true;
    if (capturing()) return captureRaw(value ? "true" : "false");
    m_scratch.reset();
    m_scratch.kind = FieldValue::Kind::kBool;
    m_scratch.b = value;
    return onScalar(m_scratch);
  }
  bool number_integer(number_integer_t value) {
    if (skipping()) return true;
    if (capturing()) return captureRaw(std::to_string(value));
    m_scratch.reset();
    m_scratch.kind = FieldValue::Kind::kInt;
    m_scratch.i = value;
    return onScalar(m_scratch);
  }
  bool number_unsigned(number_unsigned_t value) {
    if (skipping()) return true;
    if (capturing()) return captureRaw(std::to_string(value));
    m_scratch.reset();
    if (value <= static_cast<uint64_t>(INT64_MAX)) {
      m_scratch.kind = FieldValue::Kind::kInt;
      m_scratch.i = static_cast<int64_t>(value);
    } else {
      m_scratch.kind = FieldValue::Kind::kUnsigned;
      m_scratch.u = value;
    }
    return onScalar(m_scratch);
  }
  bool number_float(number_float_t value, const string_t& raw) {
    if (skipping()) return true;
    if (capturing()) return captureRaw(raw);
    m_scratch.reset();
    m_scratch.kind = FieldValue::Kind::kFloat;
    m_scratch.d = value;
    m_scratch.text = raw;
    return onScalar(m_scratch);
  }
  bool string(string_t& value) {
    if (skipping()) return true;
    if (capturing()) {
      captureValuePrefix();
      appendJsonString(m_capture, value);
      return true;
    }
    m_scratch.kind = FieldValue::Kind::kString;
    m_scratch.text = std::move(value);
    return onScalar(m_scratch);
  }
  bool binary(binary_t& /*value*/) { return true; }
  bool key(string_t& key);
  bool start_object(std::size_t /*elements*/) { return startContainer(true); }
  bool end_object() { return endContainer(); }
  bool start_array(std::size_t /*elements*/) { return startContainer(false); }
  bool end_array() { return endContainer(); }
  bool parse_error(std::size_t position, const std::string& /*lastToken*/,
                   const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 7: syntax error ..."
    if (size_t close = what.find("] ");
        what.starts_with("[json.exception.") && close != std::string::npos) {
      what = what.substr(close + 2);
    }
    m_status = invalidArgument(m_source + ": invalid JSON at byte " + std::to_string(position) +
                               ": " + what);
    return false;
  }

 private:
  enum class Ctx : uint8_t { kTop, kEvents, kEvent, kArgs, kMeta, kDistInfo };

  bool skipping() const { return m_skipDepth > 0; }
  bool capturing() const { return m_captureDepth > 0; }
  bool fail(Status status) {
    m_status = std::move(status);
    return false;
  }
  void warn(std::string message) {
    if (m_report == nullptr) return;
    ++m_report->ignoredEvents;
    if (m_report->warnings.size() < ChromeReadReport::kMaxWarnings) {
      m_report->warnings.push_back(m_source + ": " + std::move(message));
    }
  }

  std::string eventPath() const {
    return (m_bareArray ? "[" : "traceEvents[") + std::to_string(m_eventIndex) + "]";
  }
  Status fieldError(std::string_view field, const std::string& what) const {
    return invalidArgument(m_source + ": " + eventPath() + "." + std::string(field) + ": " + what);
  }

  bool onScalar(FieldValue& value);
  bool startContainer(bool isObject);
  bool endContainer();

  // capture of nested arg / metadata values as compact JSON text
  void beginCapture();
  void captureValuePrefix();
  bool captureRaw(std::string_view text) {
    captureValuePrefix();
    m_capture += text;
    return true;
  }
  void deliverCapture();
  void addArgValue(Args& target, std::string key, const FieldValue& value);

  // event decoding
  void beginEvent();
  bool finishEvent();
  Status handleEvent();
  Status handleComplete(int lane, bool instant);
  Status handleBegin(int lane);
  Status handleEnd(int lane);
  Status handleCounter();
  Status handleFlowPhase(char phase);
  Status handleMetadata();
  void handleBoundFlows(int lane, Nanos time);

  StatusOr<Nanos> timeField(const FieldValue& value, std::string_view field) const;
  StatusOr<IdKey> idField(const FieldValue& value, std::string_view field);
  StatusOr<std::string> flowIdText(const FieldValue& value, std::string_view field) const;
  std::optional<std::string_view> stringField(const FieldValue& value) const {
    if (value.kind == FieldValue::Kind::kString) return std::string_view(value.text);
    return std::nullopt;
  }
  int laneFor(const LaneKey& key);
  int processFor(const IdKey& pid);
  // Sets span.category from "cat" (ours, Kineto GPU cats) or marks it unresolved.
  bool resolveCategory(Span& span, int lane);
  uint64_t flowNumericId(const std::string& idText);

  std::string m_source;
  ChromeReadOptions m_options;
  ChromeReadReport* m_report;
  Status m_status;

  std::vector<Ctx> m_stack;
  bool m_sawRoot = false;
  bool m_bareArray = false;
  bool m_sawEvents = false;
  std::string m_key;  // last key at the current object level
  EventField m_eventField = EventField::kNone;
  int m_skipDepth = 0;
  int m_captureDepth = 0;
  std::string m_capture;
  std::vector<std::pair<bool, bool>> m_captureLevels;  // (isObject, first)
  Ctx m_captureTarget = Ctx::kArgs;
  std::string m_captureKey;

  FieldValue m_scratch;
  RawEvent m_event;
  int64_t m_eventIndex = -1;

  // accumulated content
  std::string m_traceName;
  Args m_metadata;
  std::optional<int64_t> m_distributedRank;
  bool m_singleRank = false;
  std::vector<RawProcess> m_processes;
  std::unordered_map<IdKey, int, IdKeyHash> m_processIndex;
  std::vector<RawLane> m_lanes;
  std::unordered_map<LaneKey, int, LaneKeyHash> m_laneIndex;
  LaneKey m_lastLaneKey;
  int m_lastLane = -1;
  std::unordered_map<std::string, int64_t> m_internedIds;
  std::vector<RawCounter> m_counters;
  std::vector<RawFlow> m_flows;
  // open flows: key "cat\x1fname\x1fid" → start point
  std::unordered_map<std::string, RawFlowPoint> m_openFlows;
  std::unordered_map<std::string, uint64_t> m_flowIds;
  uint64_t m_nextFlowId = 1ULL << 48;
};

bool TraceSaxHandler::key(string_t& key) {
  if (skipping()) return true;
  if (capturing()) {
    auto& [isObject, first] = m_captureLevels.back();
    (void)isObject;
    if (!first) m_capture += ',';
    first = false;
    appendJsonString(m_capture, key);
    m_capture += ':';
    return true;
  }
  if (!m_stack.empty() && m_stack.back() == Ctx::kEvent) {
    m_eventField = eventFieldFromKey(key);
  }
  m_key = std::move(key);
  return true;
}

void TraceSaxHandler::beginCapture() {
  m_captureTarget = m_stack.back();
  m_captureKey = m_key;
  m_capture.clear();
  m_captureLevels.clear();
  m_captureDepth = 0;
}

void TraceSaxHandler::captureValuePrefix() {
  if (m_captureLevels.empty()) return;
  auto& [isObject, first] = m_captureLevels.back();
  if (isObject) return;  // key() wrote the separator
  if (!first) m_capture += ',';
  first = false;
}

void TraceSaxHandler::deliverCapture() {
  ArgValue value(std::in_place_type<std::string>, std::move(m_capture));
  m_capture.clear();
  if (m_captureTarget == Ctx::kArgs) {
    m_event.args.append(std::move(m_captureKey), std::move(value));
  } else {
    m_metadata.set(std::move(m_captureKey), std::move(value));
  }
}

bool TraceSaxHandler::startContainer(bool isObject) {
  if (skipping()) {
    ++m_skipDepth;
    return true;
  }
  if (capturing()) {
    captureValuePrefix();
    m_capture += isObject ? '{' : '[';
    m_captureLevels.emplace_back(isObject, true);
    ++m_captureDepth;
    return true;
  }
  if (!m_sawRoot) {
    m_sawRoot = true;
    if (isObject) {
      m_stack.push_back(Ctx::kTop);
    } else {
      m_bareArray = true;
      m_sawEvents = true;
      m_stack.push_back(Ctx::kEvents);
    }
    return true;
  }
  if (m_stack.empty()) {  // cannot happen with a single root value
    m_skipDepth = 1;
    return true;
  }
  switch (m_stack.back()) {
    case Ctx::kTop:
      if (m_key == "traceEvents") {
        if (isObject) {
          return fail(
              invalidArgument(m_source + ": traceEvents: expected an array, got an object"));
        }
        m_sawEvents = true;
        m_stack.push_back(Ctx::kEvents);
      } else if (isObject && (m_key == "otherData" || m_key == "metadata")) {
        m_stack.push_back(Ctx::kMeta);
      } else if (isObject && m_key == "distributedInfo") {
        m_singleRank = true;
        m_stack.push_back(Ctx::kDistInfo);
      } else {
        m_skipDepth = 1;
      }
      return true;
    case Ctx::kEvents:
      ++m_eventIndex;
      if (!isObject) {
        return fail(invalidArgument(m_source + ": " + eventPath() +
                                    ": expected an event object, got an array"));
      }
      beginEvent();
      m_stack.push_back(Ctx::kEvent);
      return true;
    case Ctx::kEvent:
      if (m_eventField == EventField::kArgs && isObject) {
        m_stack.push_back(Ctx::kArgs);
        return true;
      }
      if (FieldValue* field = m_event.field(m_eventField)) {
        field->reset();
        field->kind = isObject ? FieldValue::Kind::kObject : FieldValue::Kind::kArray;
      }
      m_skipDepth = 1;
      return true;
    case Ctx::kArgs:
    case Ctx::kMeta:
      beginCapture();
      m_capture += isObject ? '{' : '[';
      m_captureLevels.emplace_back(isObject, true);
      m_captureDepth = 1;
      return true;
    case Ctx::kDistInfo:
      m_skipDepth = 1;
      return true;
  }
  return true;
}

bool TraceSaxHandler::endContainer() {
  if (skipping()) {
    --m_skipDepth;
    return true;
  }
  if (capturing()) {
    m_capture += m_captureLevels.back().first ? '}' : ']';
    m_captureLevels.pop_back();
    if (--m_captureDepth == 0) deliverCapture();
    return true;
  }
  if (m_stack.empty()) return true;
  Ctx top = m_stack.back();
  m_stack.pop_back();
  if (top == Ctx::kEvent) return finishEvent();
  return true;
}

void TraceSaxHandler::addArgValue(Args& target, std::string key, const FieldValue& value) {
  switch (value.kind) {
    case FieldValue::Kind::kInt:
      target.append(std::move(key), value.i);
      break;
    case FieldValue::Kind::kUnsigned:
      target.append(std::move(key), std::to_string(value.u));
      break;
    case FieldValue::Kind::kFloat:
      target.append(std::move(key), value.d);
      break;
    case FieldValue::Kind::kString:
      target.append(std::move(key), value.text);
      break;
    case FieldValue::Kind::kBool:
      target.append(std::move(key), int64_t{value.b ? 1 : 0});
      break;
    default:
      break;  // null: dropped
  }
}

bool TraceSaxHandler::onScalar(FieldValue& value) {
  if (!m_sawRoot) {
    return fail(invalidArgument(m_source +
                                ": expected an array of events or an object with \"traceEvents\""));
  }
  if (m_stack.empty()) return true;
  switch (m_stack.back()) {
    case Ctx::kTop:
      if (m_key == "traceEvents") {
        return fail(
            invalidArgument(m_source + ": traceEvents: expected an array, got " + value.repr()));
      }
      if (m_key == "traceName") {
        if (value.kind == FieldValue::Kind::kString) m_traceName = value.text;
        return true;
      }
      if (m_key == "displayTimeUnit") return true;  // display only (spec §3.1)
      if (m_key == "schemaVersion") m_singleRank = true;
      if (m_metadata.find(m_key) == nullptr) addArgValue(m_metadata, m_key, value);
      return true;
    case Ctx::kEvents:
      ++m_eventIndex;
      return fail(invalidArgument(m_source + ": " + eventPath() +
                                  ": expected an event object, got " + value.repr()));
    case Ctx::kEvent:
      if (FieldValue* field = m_event.field(m_eventField)) std::swap(*field, value);
      return true;
    case Ctx::kArgs:
      addArgValue(m_event.args, m_key, value);
      return true;
    case Ctx::kMeta: {
      Args single;
      addArgValue(single, m_key, value);
      for (auto& [k, v] : single) m_metadata.set(k, v);
      return true;
    }
    case Ctx::kDistInfo:
      if (m_key == "rank" && value.kind == FieldValue::Kind::kInt) {
        m_distributedRank = value.i;
      } else if (m_key == "world_size" || m_key == "backend") {
        Args single;
        addArgValue(single, m_key, value);
        for (auto& [k, v] : single) m_metadata.set(k, v);
      }
      return true;
  }
  return true;
}

void TraceSaxHandler::beginEvent() {
  m_event.reset();
  m_eventField = EventField::kNone;
  if (m_report != nullptr) ++m_report->eventCount;
}

bool TraceSaxHandler::finishEvent() {
  Status status = handleEvent();
  if (!status.isOk()) return fail(std::move(status));
  return true;
}

// ---- field conversion ----

StatusOr<Nanos> TraceSaxHandler::timeField(const FieldValue& value, std::string_view field) const {
  constexpr int64_t kMaxMicros = INT64_MAX / 1000;
  switch (value.kind) {
    case FieldValue::Kind::kMissing:
      return fieldError(field, "missing (required for \"" + m_event.ph.text + "\" events)");
    case FieldValue::Kind::kInt:
      if (value.i > kMaxMicros || value.i < -kMaxMicros) break;
      return Nanos(value.i * 1000);
    case FieldValue::Kind::kFloat:
    case FieldValue::Kind::kString:
      if (std::optional<Nanos> ns = parseMicrosText(value.text)) return *ns;
      if (value.kind == FieldValue::Kind::kFloat) break;
      return fieldError(field, "expected a number, got " + value.repr());
    default:
      return fieldError(field, "expected a number, got " + value.repr());
  }
  return fieldError(field, "time " + value.repr() + " µs does not fit in int64 nanoseconds");
}

StatusOr<IdKey> TraceSaxHandler::idField(const FieldValue& value, std::string_view field) {
  switch (value.kind) {
    case FieldValue::Kind::kMissing:
      return IdKey{0, false};
    case FieldValue::Kind::kInt:
      return IdKey{value.i, false};
    case FieldValue::Kind::kFloat:
      if (std::isfinite(value.d) && value.d == std::floor(value.d) && std::fabs(value.d) < 9e15) {
        return IdKey{static_cast<int64_t>(value.d), false};
      }
      break;
    case FieldValue::Kind::kUnsigned:
    case FieldValue::Kind::kString: {
      std::string text =
          value.kind == FieldValue::Kind::kString ? value.text : std::to_string(value.u);
      if (std::optional<int64_t> number = parseInt64(text)) return IdKey{*number, false};
      auto [it, inserted] =
          m_internedIds.emplace(std::move(text), static_cast<int64_t>(m_internedIds.size()));
      return IdKey{it->second, true};
    }
    default:
      break;
  }
  return fieldError(field, "expected an integer or a string, got " + value.repr());
}

StatusOr<std::string> TraceSaxHandler::flowIdText(const FieldValue& value,
                                                  std::string_view field) const {
  switch (value.kind) {
    case FieldValue::Kind::kInt:
      return std::to_string(value.i);
    case FieldValue::Kind::kUnsigned:
      return std::to_string(value.u);
    case FieldValue::Kind::kString:
      return value.text;
    case FieldValue::Kind::kFloat:
      return value.text;
    case FieldValue::Kind::kMissing:
      return fieldError(field, "missing (required for flow events)");
    default:
      return fieldError(field, "expected an integer or a string, got " + value.repr());
  }
}

uint64_t TraceSaxHandler::flowNumericId(const std::string& idText) {
  std::optional<int64_t> number = parseInt64(idText);
  if (number && *number >= 0) return static_cast<uint64_t>(*number);
  if (idText.size() > 2 && idText[0] == '0' && (idText[1] == 'x' || idText[1] == 'X')) {
    uint64_t hex = 0;
    auto [ptr, ec] = std::from_chars(idText.data() + 2, idText.data() + idText.size(), hex, 16);
    if (ec == std::errc() && ptr == idText.data() + idText.size()) return hex;
  }
  auto [it, inserted] = m_flowIds.emplace(idText, m_nextFlowId);
  if (inserted) ++m_nextFlowId;
  return it->second;
}

int TraceSaxHandler::processFor(const IdKey& pid) {
  auto [it, inserted] = m_processIndex.emplace(pid, static_cast<int>(m_processes.size()));
  if (inserted) {
    RawProcess process;
    process.pid = pid;
    m_processes.push_back(std::move(process));
  }
  return it->second;
}

int TraceSaxHandler::laneFor(const LaneKey& key) {
  if (m_lastLane >= 0 && key == m_lastLaneKey) return m_lastLane;
  auto [it, inserted] = m_laneIndex.emplace(key, static_cast<int>(m_lanes.size()));
  if (inserted) {
    RawLane lane;
    lane.key = key;
    lane.process = processFor(key.pid);
    m_processes[static_cast<size_t>(lane.process)].lanes.push_back(it->second);
    m_lanes.push_back(std::move(lane));
  }
  m_lastLaneKey = key;
  m_lastLane = it->second;
  return it->second;
}

bool TraceSaxHandler::resolveCategory(Span& span, int lane) {
  std::string_view cat = m_event.cat.kind == FieldValue::Kind::kString
                             ? std::string_view(m_event.cat.text)
                             : std::string_view();
  if (std::optional<Category> ours = parseCategory(cat)) {
    span.category = *ours;
    return false;
  }
  if (!cat.empty()) span.args.append("cat", std::string(cat));
  if (isGpuCat(cat)) {
    m_lanes[static_cast<size_t>(lane)].gpuEvents = true;
    if (cat == "kernel" || cat == "cuda_sync") {
      span.category = classifyGpuKernel(span.name);
    } else if (cat == "gpu_memcpy" || cat == "gpu_memset") {
      span.category = Category::kCopy;
    } else {
      span.category = Category::kOther;
    }
    return false;
  }
  span.category = Category::kOther;
  return true;  // decided once the lane's kind is known
}

// ---- events ----

Status TraceSaxHandler::handleEvent() {
  const FieldValue& ph = m_event.ph;
  if (ph.kind == FieldValue::Kind::kMissing) return fieldError("ph", "missing");
  if (ph.kind != FieldValue::Kind::kString) {
    return fieldError("ph", "expected a string, got " + ph.repr());
  }
  if (ph.text.size() != 1) {
    warn(eventPath() + ": unknown phase " + ph.repr() + " ignored");
    return Status::ok();
  }
  char phase = ph.text[0];
  switch (phase) {
    case 'X':
    case 'B':
    case 'E':
    case 'i':
    case 'I': {
      ASSIGN_OR_RETURN(IdKey pid, idField(m_event.pid, "pid"));
      IdKey tid{};
      bool processScope = (phase == 'i' || phase == 'I') &&
                          m_event.scope.kind == FieldValue::Kind::kString &&
                          (m_event.scope.text == "g" || m_event.scope.text == "p");
      if (processScope) {
        tid = kInstantsTid;
      } else {
        ASSIGN_OR_RETURN(tid, idField(m_event.tid, "tid"));
      }
      int lane = laneFor(LaneKey{pid, tid});
      if (processScope && m_lanes[static_cast<size_t>(lane)].threadName.empty()) {
        m_lanes[static_cast<size_t>(lane)].threadName = "instants";
      }
      if (phase == 'X') return handleComplete(lane, false);
      if (phase == 'B') return handleBegin(lane);
      if (phase == 'E') return handleEnd(lane);
      return handleComplete(lane, true);
    }
    case 'C':
      return handleCounter();
    case 's':
    case 't':
    case 'f':
      return handleFlowPhase(phase);
    case 'M':
      return handleMetadata();
    default:
      warn(eventPath() + ": phase " + ph.repr() + " ignored");
      return Status::ok();
  }
}

Status TraceSaxHandler::handleComplete(int lane, bool instant) {
  ASSIGN_OR_RETURN(Nanos start, timeField(m_event.ts, "ts"));
  Nanos duration(0);
  if (!instant) {
    ASSIGN_OR_RETURN(duration, timeField(m_event.dur, "dur"));
    if (duration < Nanos(0)) {
      return fieldError("dur", "negative duration " + m_event.dur.repr() + " µs");
    }
  }
  RawLane& raw = m_lanes[static_cast<size_t>(lane)];
  Span& span = raw.spans.emplace_back();
  if (m_event.name.kind == FieldValue::Kind::kString) span.name = std::move(m_event.name.text);
  span.start = start;
  span.duration = duration;
  span.args = std::move(m_event.args);
  if (resolveCategory(span, lane)) {
    raw.unresolved.push_back(static_cast<uint32_t>(raw.spans.size() - 1));
  }
  if (!instant) handleBoundFlows(lane, start);
  return Status::ok();
}

Status TraceSaxHandler::handleBegin(int lane) {
  ASSIGN_OR_RETURN(Nanos start, timeField(m_event.ts, "ts"));
  OpenSpan open;
  if (m_event.name.kind == FieldValue::Kind::kString) open.span.name = std::move(m_event.name.text);
  open.span.start = start;
  open.span.args = std::move(m_event.args);
  open.unresolved = resolveCategory(open.span, lane);
  open.eventIndex = m_eventIndex;
  m_lanes[static_cast<size_t>(lane)].open.push_back(std::move(open));
  handleBoundFlows(lane, start);
  return Status::ok();
}

Status TraceSaxHandler::handleEnd(int lane) {
  ASSIGN_OR_RETURN(Nanos end, timeField(m_event.ts, "ts"));
  RawLane& raw = m_lanes[static_cast<size_t>(lane)];
  if (raw.open.empty()) {
    warn(eventPath() + ": \"E\" without a matching \"B\" ignored");
    return Status::ok();
  }
  OpenSpan open = std::move(raw.open.back());
  raw.open.pop_back();
  if (end < open.span.start) {
    return fieldError("ts", "\"E\" at " + m_event.ts.repr() + " µs precedes its \"B\" (" +
                                (m_bareArray ? "[" : "traceEvents[") +
                                std::to_string(open.eventIndex) + "])");
  }
  open.span.duration = end - open.span.start;
  for (auto& [key, value] : m_event.args) open.span.args.set(key, value);
  raw.spans.push_back(std::move(open.span));
  if (open.unresolved) raw.unresolved.push_back(static_cast<uint32_t>(raw.spans.size() - 1));
  return Status::ok();
}

Status TraceSaxHandler::handleCounter() {
  ASSIGN_OR_RETURN(Nanos time, timeField(m_event.ts, "ts"));
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event.pid, "pid"));
  int process = processFor(pid);
  std::string name = m_event.name.kind == FieldValue::Kind::kString ? m_event.name.text : "";
  for (const auto& [key, value] : m_event.args) {
    double number;
    if (const auto* i = std::get_if<int64_t>(&value)) {
      number = static_cast<double>(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      number = *d;
    } else {
      continue;  // non-numeric series are not counters
    }
    m_counters.push_back(
        RawCounter{process, key == "value" ? name : name + " " + key, time, number});
  }
  return Status::ok();
}

void TraceSaxHandler::handleBoundFlows(int lane, Nanos time) {
  if (!m_event.bindId.present()) return;
  StatusOr<std::string> idText = flowIdText(m_event.bindId, "bind_id");
  if (!idText.isOk()) return;
  std::string key = "\x1f\x1f" + *idText;
  auto truthy = [](const FieldValue& v) {
    return (v.kind == FieldValue::Kind::kBool && v.b) ||
           (v.kind == FieldValue::Kind::kInt && v.i != 0);
  };
  if (truthy(m_event.flowIn)) {
    auto it = m_openFlows.find(key);
    if (it != m_openFlows.end()) {
      m_flows.push_back(
          RawFlow{flowNumericId(*idText), "", "", it->second, RawFlowPoint{lane, time}});
      m_openFlows.erase(it);
    } else {
      warn(eventPath() + ": flow_in without a matching flow_out ignored");
    }
  }
  if (truthy(m_event.flowOut)) m_openFlows[key] = RawFlowPoint{lane, time};
}

Status TraceSaxHandler::handleFlowPhase(char phase) {
  ASSIGN_OR_RETURN(Nanos time, timeField(m_event.ts, "ts"));
  ASSIGN_OR_RETURN(std::string idText, flowIdText(m_event.id, "id"));
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event.pid, "pid"));
  ASSIGN_OR_RETURN(IdKey tid, idField(m_event.tid, "tid"));
  int lane = laneFor(LaneKey{pid, tid});
  std::string name = m_event.name.kind == FieldValue::Kind::kString ? m_event.name.text : "";
  std::string cat = m_event.cat.kind == FieldValue::Kind::kString ? m_event.cat.text : "";
  std::string key = cat + '\x1f' + name + '\x1f' + idText;
  RawFlowPoint here{lane, time};
  if (phase == 's') {
    m_openFlows[key] = here;
    return Status::ok();
  }
  auto it = m_openFlows.find(key);
  if (it == m_openFlows.end()) {
    warn(eventPath() + ": flow \"" + std::string(1, phase) + "\" without a matching \"s\" ignored");
    return Status::ok();
  }
  m_flows.push_back(
      RawFlow{flowNumericId(idText), std::move(name), std::move(cat), it->second, here});
  if (phase == 't') {
    it->second = here;
  } else {
    m_openFlows.erase(it);
  }
  return Status::ok();
}

Status TraceSaxHandler::handleMetadata() {
  std::string_view name = m_event.name.kind == FieldValue::Kind::kString
                              ? std::string_view(m_event.name.text)
                              : std::string_view();
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event.pid, "pid"));
  if (name == "process_name" || name == "process_labels") {
    std::optional<std::string_view> value =
        m_event.args.getString(name == "process_name" ? "name" : "labels");
    if (!value) {
      warn(eventPath() + ": " + std::string(name) + " without a string arg ignored");
      return Status::ok();
    }
    RawProcess& process = m_processes[static_cast<size_t>(processFor(pid))];
    (name == "process_name" ? process.name : process.labels) = std::string(*value);
  } else if (name == "thread_name") {
    ASSIGN_OR_RETURN(IdKey tid, idField(m_event.tid, "tid"));
    RawLane& lane = m_lanes[static_cast<size_t>(laneFor(LaneKey{pid, tid}))];
    if (std::optional<std::string_view> value = m_event.args.getString("name")) {
      lane.threadName = std::string(*value);
    }
    if (std::optional<std::string_view> kind = m_event.args.getString("lane_kind")) {
      lane.declaredKind = parseLaneKind(*kind);
    }
  } else if (name == "thread_sort_index") {
    // Lanes keep their order of first appearance (our writer emits them in lane order).
    ASSIGN_OR_RETURN(IdKey tid, idField(m_event.tid, "tid"));
    laneFor(LaneKey{pid, tid});
  } else if (name == "process_sort_index") {
    processFor(pid);
  } else {
    warn(eventPath() + ": metadata \"" + std::string(name) + "\" ignored");
  }
  return Status::ok();
}

// ---- assembling the Timeline ----

StatusOr<Timeline> TraceSaxHandler::finish() {
  if (!m_sawEvents) {
    return invalidArgument(m_source +
                           ": no \"traceEvents\" array (expected an array of events or "
                           "an object with \"traceEvents\")");
  }
  bool singleRank = m_singleRank || m_options.rank.has_value();
  if (m_report != nullptr) m_report->singleRankTrace = singleRank;

  Timeline timeline;
  timeline.setName(m_traceName);
  timeline.mutableMetadata() = std::move(m_metadata);

  // rank id per process
  std::vector<int> processRank(m_processes.size(), 0);
  if (singleRank) {
    int rank = static_cast<int>(m_options.rank.value_or(m_distributedRank.value_or(0)));
    std::fill(processRank.begin(), processRank.end(), rank);
    timeline.addRank(rank);
  } else {
    int nextFree = 0;
    for (const RawProcess& process : m_processes) {
      if (!process.pid.isString && process.pid.value >= 0 && process.pid.value < INT32_MAX) {
        nextFree = std::max(nextFree, static_cast<int>(process.pid.value) + 1);
      }
    }
    for (size_t p = 0; p < m_processes.size(); ++p) {
      const RawProcess& process = m_processes[p];
      bool fits =
          !process.pid.isString && process.pid.value >= INT32_MIN && process.pid.value <= INT32_MAX;
      processRank[p] = fits ? static_cast<int>(process.pid.value) : nextFree++;
      std::string name = process.name;
      if (name == "rank " + std::to_string(processRank[p])) name.clear();
      timeline.addRank(processRank[p], std::move(name));
    }
  }

  // lanes, in process order then first appearance
  std::vector<FlowEndpoint> laneEndpoint(m_lanes.size());
  for (size_t p = 0; p < m_processes.size(); ++p) {
    const RawProcess& process = m_processes[p];
    for (int laneIndex : process.lanes) {
      RawLane& raw = m_lanes[static_cast<size_t>(laneIndex)];
      for (const OpenSpan& open : raw.open) {
        warn((m_bareArray ? "[" : "traceEvents[") + std::to_string(open.eventIndex) +
             "]: \"B\" without a matching \"E\" ignored");
      }
      std::string name = raw.threadName;
      if (name.empty()) {
        name = raw.key.tid.isString ? "thread" : "thread " + std::to_string(raw.key.tid.value);
      }
      if (singleRank && m_processes.size() > 1) {
        std::string processName = !process.labels.empty() ? process.labels
                                  : !process.name.empty()
                                      ? process.name
                                      : "pid " + std::to_string(process.pid.value);
        name = processName + ": " + name;
      }
      bool gpuLane = raw.gpuEvents || raw.threadName.starts_with("stream ");
      for (uint32_t index : raw.unresolved) {
        Span& span = raw.spans[index];
        span.category = gpuLane ? classifyGpuKernel(span.name) : classifyHostEvent(span.name);
      }
      LaneKind kind = LaneKind::kHost;
      if (raw.declaredKind) {
        kind = *raw.declaredKind;
      } else if (gpuLane) {
        bool anyComm = false;
        bool anyCompute = false;
        for (const Span& span : raw.spans) {
          anyComm = anyComm || isCommunication(span.category);
          anyCompute = anyCompute || isComputation(span.category);
        }
        kind = anyComm && !anyCompute ? LaneKind::kComm : LaneKind::kCompute;
      }
      LaneHandle handle = timeline.addLane(processRank[p], std::move(name), kind);
      timeline.mutableLane(handle).spans = std::move(raw.spans);
      laneEndpoint[static_cast<size_t>(laneIndex)] =
          FlowEndpoint{processRank[p], handle.laneIndex, Nanos(0)};
    }
  }
  timeline.sortSpans();

  for (RawFlow& raw : m_flows) {
    Flow flow;
    flow.id = raw.id;
    flow.name = std::move(raw.name);
    flow.category = std::move(raw.category);
    flow.from = laneEndpoint[static_cast<size_t>(raw.from.lane)];
    flow.from.time = raw.from.time;
    flow.to = laneEndpoint[static_cast<size_t>(raw.to.lane)];
    flow.to.time = raw.to.time;
    timeline.addFlow(std::move(flow));
  }
  for (const auto& [key, point] : m_openFlows) {
    (void)point;
    warn("flow " + key.substr(key.rfind('\x1f') + 1) + " never finished; ignored");
  }
  for (RawCounter& raw : m_counters) {
    timeline.addCounter(Counter{processRank[static_cast<size_t>(raw.process)], std::move(raw.name),
                                raw.time, raw.value});
  }
  return timeline;
}

}  // namespace

// ---- public functions ----

std::optional<Nanos> parseMicrosText(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t pos = 0;
  bool negative = false;
  if (text[pos] == '-' || text[pos] == '+') {
    negative = text[pos] == '-';
    ++pos;
  }
  if (text.find_first_of("eE") != std::string_view::npos) {
    double value = 0;
    auto [ptr, ec] =
        std::from_chars(text.data() + (text[0] == '+' ? 1 : 0), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value) ||
        std::fabs(value) >= 9.2e15) {
      return std::nullopt;
    }
    return Nanos::fromMicrosDouble(value);
  }
  constexpr uint64_t kMaxMicros = static_cast<uint64_t>(INT64_MAX / 1000) - 1;
  uint64_t micros = 0;
  size_t integerDigits = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    micros = micros * 10 + static_cast<uint64_t>(text[pos] - '0');
    if (micros > kMaxMicros) return std::nullopt;
    ++pos;
    ++integerDigits;
  }
  uint64_t fractionNs = 0;
  size_t fractionDigits = 0;
  bool roundUp = false;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      int digit = text[pos] - '0';
      if (fractionDigits < 3) {
        fractionNs = fractionNs * 10 + static_cast<uint64_t>(digit);
      } else if (fractionDigits == 3) {
        roundUp = digit >= 5;  // half away from zero
      }
      ++pos;
      ++fractionDigits;
    }
  }
  if (pos != text.size() || (integerDigits == 0 && fractionDigits == 0)) return std::nullopt;
  for (size_t d = fractionDigits; d < 3; ++d) fractionNs *= 10;
  int64_t ns = static_cast<int64_t>(micros * 1000 + fractionNs + (roundUp ? 1 : 0));
  return Nanos(negative ? -ns : ns);
}

bool looksGzipped(std::string_view bytes) {
  return io::looksGzipped(bytes);
}

StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName) {
  return io::gunzipBytes(bytes, sourceName);
}

StatusOr<Timeline> parseChromeTrace(std::string_view bytes, const std::string& sourceName,
                                    const ChromeReadOptions& options, ChromeReadReport* report) {
  if (io::looksGzipped(bytes)) {
    ASSIGN_OR_RETURN(std::string plain, io::gunzipBytes(bytes, sourceName));
    return parseChromeTrace(plain, sourceName, options, report);
  }
  if (report != nullptr) *report = ChromeReadReport{};
  TraceSaxHandler handler(sourceName, options, report);
  bool ok = false;
  try {
    ok = Json::sax_parse(bytes.data(), bytes.data() + bytes.size(), &handler);
  } catch (const std::exception& ex) {
    return invalidArgument(sourceName + ": " + ex.what());
  }
  if (!ok) {
    Status status = handler.status();
    if (status.isOk()) status = invalidArgument(sourceName + ": invalid JSON");
    return status;
  }
  return handler.finish();
}

StatusOr<Timeline> readChromeTrace(const std::string& path, const ChromeReadOptions& options,
                                   ChromeReadReport* report) {
  // Inflated here when gzip; parseChromeTrace checks the text for gzip magic again, as it
  // does for any bytes it is given.
  ASSIGN_OR_RETURN(std::string text, io::readMaybeGzippedFile(path));
  return parseChromeTrace(text, path, options, report);
}

}  // namespace ddpscope::traces
