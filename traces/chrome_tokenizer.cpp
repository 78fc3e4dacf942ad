#include "traces/chrome_tokenizer.h"

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/chrome_event_handler.h"
#include "traces/chrome_writer.h"

namespace ddpscope::traces::chrome_detail {

namespace {

using Json = nlohmann::json;

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

void addArgValue(Args& target, std::string key, const FieldValue& value) {
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

// ---- the SAX handler ----

class TraceSaxHandler {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  TraceSaxHandler(ChromeReadDiagnostics& diagnostics, RawTrace& trace, ChromeEventHandler& events)
      : m_diagnostics(diagnostics), m_trace(trace), m_events(events) {}

  // The error that stopped the parse (OK when the parser stopped on its own).
  Status status() const { return m_status; }

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
    m_status = invalidArgument(m_diagnostics.source + ": invalid JSON at byte " +
                               std::to_string(position) + ": " + what);
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
  std::string eventPath() const { return m_diagnostics.eventPath(m_eventIndex); }

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

  // event boundaries
  void beginEvent();
  bool finishEvent();

  ChromeReadDiagnostics& m_diagnostics;
  RawTrace& m_trace;
  ChromeEventHandler& m_events;
  Status m_status;

  std::vector<Ctx> m_stack;
  bool m_sawRoot = false;
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
    m_trace.metadata.set(std::move(m_captureKey), std::move(value));
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
      m_diagnostics.bareArray = true;
      m_trace.sawEvents = true;
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
          return fail(invalidArgument(m_diagnostics.source +
                                      ": traceEvents: expected an array, got an object"));
        }
        m_trace.sawEvents = true;
        m_stack.push_back(Ctx::kEvents);
      } else if (isObject && (m_key == "otherData" || m_key == "metadata")) {
        m_stack.push_back(Ctx::kMeta);
      } else if (isObject && m_key == "distributedInfo") {
        m_trace.singleRank = true;
        m_stack.push_back(Ctx::kDistInfo);
      } else {
        m_skipDepth = 1;
      }
      return true;
    case Ctx::kEvents:
      ++m_eventIndex;
      if (!isObject) {
        return fail(invalidArgument(m_diagnostics.source + ": " + eventPath() +
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

bool TraceSaxHandler::onScalar(FieldValue& value) {
  if (!m_sawRoot) {
    return fail(invalidArgument(m_diagnostics.source +
                                ": expected an array of events or an object with \"traceEvents\""));
  }
  if (m_stack.empty()) return true;
  switch (m_stack.back()) {
    case Ctx::kTop:
      if (m_key == "traceEvents") {
        return fail(invalidArgument(m_diagnostics.source +
                                    ": traceEvents: expected an array, got " + value.repr()));
      }
      if (m_key == "traceName") {
        if (value.kind == FieldValue::Kind::kString) m_trace.traceName = value.text;
        return true;
      }
      if (m_key == "displayTimeUnit") return true;  // display only (spec §3.1)
      if (m_key == "schemaVersion") m_trace.singleRank = true;
      if (m_trace.metadata.find(m_key) == nullptr) addArgValue(m_trace.metadata, m_key, value);
      return true;
    case Ctx::kEvents:
      ++m_eventIndex;
      return fail(invalidArgument(m_diagnostics.source + ": " + eventPath() +
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
      for (auto& [k, v] : single) m_trace.metadata.set(k, v);
      return true;
    }
    case Ctx::kDistInfo:
      if (m_key == "rank" && value.kind == FieldValue::Kind::kInt) {
        m_trace.distributedRank = value.i;
      } else if (m_key == "world_size" || m_key == "backend") {
        Args single;
        addArgValue(single, m_key, value);
        for (auto& [k, v] : single) m_trace.metadata.set(k, v);
      }
      return true;
  }
  return true;
}

void TraceSaxHandler::beginEvent() {
  m_event.reset();
  m_eventField = EventField::kNone;
  if (m_diagnostics.report != nullptr) ++m_diagnostics.report->eventCount;
}

bool TraceSaxHandler::finishEvent() {
  Status status = m_events.handle(m_event, m_eventIndex);
  if (!status.isOk()) return fail(std::move(status));
  return true;
}

}  // namespace

std::string FieldValue::repr() const {
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

Status tokenizeChromeTrace(std::string_view text, ChromeReadDiagnostics& diagnostics,
                           RawTrace& trace, ChromeEventHandler& events) {
  TraceSaxHandler handler(diagnostics, trace, events);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.data(), text.data() + text.size(), &handler);
  } catch (const std::exception& ex) {
    return invalidArgument(diagnostics.source + ": " + ex.what());
  }
  if (!ok) {
    Status status = handler.status();
    if (status.isOk()) status = invalidArgument(diagnostics.source + ": invalid JSON");
    return status;
  }
  return Status::ok();
}

}  // namespace ddpscope::traces::chrome_detail
