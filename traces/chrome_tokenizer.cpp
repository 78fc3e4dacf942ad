#include "traces/chrome_tokenizer.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// Equal to a literal of N − 1 characters, for a key of that size: a fixed-size memcmp compiles
// to integer compares (this runs for every key of every event).
template <size_t N>
bool keyIs(std::string_view key, const char (&word)[N]) {
  return std::memcmp(key.data(), word, N - 1) == 0;
}

EventField eventFieldFromKey(std::string_view key) {
  switch (key.size()) {
    case 1:
      if (key[0] == 's') return EventField::kScope;
      break;
    case 2:
      if (keyIs(key, "ph")) return EventField::kPh;
      if (keyIs(key, "ts")) return EventField::kTs;
      if (keyIs(key, "id")) return EventField::kId;
      if (keyIs(key, "bp")) return EventField::kBp;
      break;
    case 3:
      if (keyIs(key, "pid")) return EventField::kPid;
      if (keyIs(key, "tid")) return EventField::kTid;
      if (keyIs(key, "dur")) return EventField::kDur;
      if (keyIs(key, "cat")) return EventField::kCat;
      break;
    case 4:
      if (keyIs(key, "name")) return EventField::kName;
      if (keyIs(key, "args")) return EventField::kArgs;
      break;
    case 7:
      if (keyIs(key, "bind_id")) return EventField::kBindId;
      if (keyIs(key, "flow_in")) return EventField::kFlowIn;
      break;
    case 8:
      if (keyIs(key, "flow_out")) return EventField::kFlowOut;
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
    m_scratch.text.swap(value);
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
    // An event's keys are read through m_eventField only (its args object pushes kArgs).
    m_eventField = eventFieldFromKey(key);
    return true;
  }
  m_key.swap(key);
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
      } else if (!isObject && m_key == "deviceProperties") {
        // Kineto's GPUs (name, SM count, compute capability, memory): kept as JSON text in the
        // metadata, for the import to say which GPU the kernels ran on.
        beginCapture();
        m_capture += '[';
        m_captureLevels.emplace_back(false, true);
        m_captureDepth = 1;
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
      // Display only (docs/spec/trace-formats.md §3.1).
      if (m_key == "displayTimeUnit") return true;
      if (m_key == "schemaVersion") m_trace.singleRank = true;
      if (m_trace.metadata.find(m_key) == nullptr) addArgValue(m_trace.metadata, m_key, value);
      return true;
    case Ctx::kEvents:
      ++m_eventIndex;
      return fail(invalidArgument(m_diagnostics.source + ": " + eventPath() +
                                  ": expected an event object, got " + value.repr()));
    case Ctx::kEvent:
      if (FieldValue* field = m_event.field(m_eventField)) field->take(value);
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

// ---- the fast scanner ----

// Drives a SAX handler over JSON text with nlohmann's callback sequence and values, or
// declines (see chrome_tokenizer.h). One pass, an explicit container stack (no recursion),
// one reused buffer for string tokens and one for number text.
// Bytes a string token copies as they are: printable ASCII but '"' and '\\'.
constexpr auto kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

template <typename Sax>
class FastJsonScanner {
 public:
  enum class Outcome : uint8_t { kDone, kStopped, kDeclined };

  FastJsonScanner(std::string_view text, Sax& sax)
      : m_p(text.data()), m_end(text.data() + text.size()), m_sax(sax) {}

  Outcome run();

 private:
  static constexpr std::size_t kUnknownSize = static_cast<std::size_t>(-1);

  void skipSpace() {
    while (m_p < m_end && (*m_p == ' ' || *m_p == '\n' || *m_p == '\r' || *m_p == '\t')) ++m_p;
  }
  // After the opening quote; leaves m_p after the closing quote. False: decline.
  bool scanString();
  bool scanEscape();
  bool scanUtf8();
  bool scanHex4(uint32_t& codepoint);
  // A number token → its SAX callback. Declined: *declined.
  bool scanNumber(bool* declined);
  bool scanLiteral(std::string_view word) {
    if (static_cast<size_t>(m_end - m_p) < word.size() ||
        std::string_view(m_p, word.size()) != word) {
      return false;
    }
    m_p += word.size();
    return true;
  }

  const char* m_p;
  const char* m_end;
  Sax& m_sax;
  std::string m_string;
  std::string m_number;
  std::vector<uint8_t> m_inObject;  // the open containers, innermost last: 1 object, 0 array
};

template <typename Sax>
typename FastJsonScanner<Sax>::Outcome FastJsonScanner<Sax>::run() {
  skipSpace();
  if (m_p == m_end || (*m_p != '{' && *m_p != '[')) return Outcome::kDeclined;
  enum class Next : uint8_t { kValue, kKey, kAfterValue };
  Next next = Next::kValue;
  while (true) {
    switch (next) {
      case Next::kValue: {
        skipSpace();
        if (m_p == m_end) return Outcome::kDeclined;
        const char c = *m_p;
        if (c == '{' || c == '[') {
          ++m_p;
          const bool object = c == '{';
          if (!(object ? m_sax.start_object(kUnknownSize) : m_sax.start_array(kUnknownSize))) {
            return Outcome::kStopped;
          }
          skipSpace();
          if (m_p < m_end && *m_p == (object ? '}' : ']')) {
            ++m_p;
            if (!(object ? m_sax.end_object() : m_sax.end_array())) return Outcome::kStopped;
            next = Next::kAfterValue;
          } else {
            m_inObject.push_back(object ? 1 : 0);
            next = object ? Next::kKey : Next::kValue;
          }
          continue;
        }
        if (c == '"') {
          ++m_p;
          if (!scanString()) return Outcome::kDeclined;
          if (!m_sax.string(m_string)) return Outcome::kStopped;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
          bool declined = false;
          const bool ok = scanNumber(&declined);
          if (declined) return Outcome::kDeclined;
          if (!ok) return Outcome::kStopped;
        } else if (c == 't' || c == 'f') {
          const bool value = c == 't';
          if (!scanLiteral(value ? "true" : "false")) return Outcome::kDeclined;
          if (!m_sax.boolean(value)) return Outcome::kStopped;
        } else if (c == 'n') {
          if (!scanLiteral("null")) return Outcome::kDeclined;
          if (!m_sax.null()) return Outcome::kStopped;
        } else {
          return Outcome::kDeclined;
        }
        next = Next::kAfterValue;
        continue;
      }
      case Next::kKey:
        skipSpace();
        if (m_p == m_end || *m_p != '"') return Outcome::kDeclined;
        ++m_p;
        if (!scanString()) return Outcome::kDeclined;
        if (!m_sax.key(m_string)) return Outcome::kStopped;
        skipSpace();
        if (m_p == m_end || *m_p != ':') return Outcome::kDeclined;
        ++m_p;
        next = Next::kValue;
        continue;
      case Next::kAfterValue: {
        skipSpace();
        if (m_inObject.empty()) return m_p == m_end ? Outcome::kDone : Outcome::kDeclined;
        if (m_p == m_end) return Outcome::kDeclined;
        const bool object = m_inObject.back() != 0;
        if (*m_p == ',') {
          ++m_p;
          next = object ? Next::kKey : Next::kValue;
        } else if (*m_p == (object ? '}' : ']')) {
          ++m_p;
          m_inObject.pop_back();
          if (!(object ? m_sax.end_object() : m_sax.end_array())) return Outcome::kStopped;
        } else {
          return Outcome::kDeclined;
        }
        continue;
      }
    }
  }
}

template <typename Sax>
bool FastJsonScanner<Sax>::scanString() {
  m_string.clear();
  while (true) {
    const char* run = m_p;
    while (m_p < m_end && kPlainStringByte[static_cast<unsigned char>(*m_p)]) ++m_p;
    m_string.append(run, static_cast<size_t>(m_p - run));
    if (m_p == m_end) return false;
    const auto u = static_cast<unsigned char>(*m_p);
    if (u == '"') {
      ++m_p;
      return true;
    }
    if (u == '\\') {
      if (!scanEscape()) return false;
    } else if (u >= 0x80) {
      if (!scanUtf8()) return false;
    } else {
      return false;  // a control character must be escaped
    }
  }
}

template <typename Sax>
bool FastJsonScanner<Sax>::scanHex4(uint32_t& codepoint) {
  if (m_end - m_p < 4) return false;
  codepoint = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = *m_p++;
    uint32_t digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    codepoint = codepoint * 16 + digit;
  }
  return true;
}

// At a backslash: appends what the escape stands for (UTF-8 for \u, surrogate pairs joined).
template <typename Sax>
bool FastJsonScanner<Sax>::scanEscape() {
  ++m_p;
  if (m_p == m_end) return false;
  const char c = *m_p++;
  switch (c) {
    case '"':
    case '\\':
    case '/':
      m_string += c;
      return true;
    case 'b':
      m_string += '\b';
      return true;
    case 'f':
      m_string += '\f';
      return true;
    case 'n':
      m_string += '\n';
      return true;
    case 'r':
      m_string += '\r';
      return true;
    case 't':
      m_string += '\t';
      return true;
    case 'u':
      break;
    default:
      return false;
  }
  uint32_t codepoint = 0;
  if (!scanHex4(codepoint)) return false;
  if (codepoint >= 0xDC00 && codepoint <= 0xDFFF) return false;  // a lone low surrogate
  if (codepoint >= 0xD800 && codepoint <= 0xDBFF) {
    uint32_t low = 0;
    if (m_end - m_p < 2 || m_p[0] != '\\' || m_p[1] != 'u') return false;
    m_p += 2;
    if (!scanHex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
    codepoint = 0x10000 + ((codepoint - 0xD800) << 10) + (low - 0xDC00);
  }
  auto byte = [this](uint32_t b) { m_string += static_cast<char>(b); };
  if (codepoint < 0x80) {
    byte(codepoint);
  } else if (codepoint < 0x800) {
    byte(0xC0 | (codepoint >> 6));
    byte(0x80 | (codepoint & 0x3F));
  } else if (codepoint < 0x10000) {
    byte(0xE0 | (codepoint >> 12));
    byte(0x80 | ((codepoint >> 6) & 0x3F));
    byte(0x80 | (codepoint & 0x3F));
  } else {
    byte(0xF0 | (codepoint >> 18));
    byte(0x80 | ((codepoint >> 12) & 0x3F));
    byte(0x80 | ((codepoint >> 6) & 0x3F));
    byte(0x80 | (codepoint & 0x3F));
  }
  return true;
}

// At a byte ≥ 0x80: one well-formed UTF-8 sequence (RFC 3629, the ranges nlohmann checks),
// appended as is.
template <typename Sax>
bool FastJsonScanner<Sax>::scanUtf8() {
  const auto lead = static_cast<unsigned char>(*m_p);
  int continuation = 0;
  unsigned char secondLow = 0x80;
  unsigned char secondHigh = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    continuation = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    continuation = 2;
    if (lead == 0xE0) secondLow = 0xA0;
    if (lead == 0xED) secondHigh = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    continuation = 3;
    if (lead == 0xF0) secondLow = 0x90;
    if (lead == 0xF4) secondHigh = 0x8F;
  } else {
    return false;
  }
  if (m_end - m_p <= continuation) return false;
  for (int i = 1; i <= continuation; ++i) {
    const auto b = static_cast<unsigned char>(m_p[i]);
    const unsigned char low = i == 1 ? secondLow : 0x80;
    const unsigned char high = i == 1 ? secondHigh : 0xBF;
    if (b < low || b > high) return false;
  }
  m_string.append(m_p, static_cast<size_t>(continuation + 1));
  m_p += continuation + 1;
  return true;
}

// JSON's number grammar; nlohmann's classes: no fraction or exponent → int64 when negative,
// uint64 otherwise, when the value fits (else a double); with them → a double. Doubles are
// correctly rounded (as strtod); out of range declines (nlohmann errors or reads underflow
// as strtod does: left to it).
template <typename Sax>
bool FastJsonScanner<Sax>::scanNumber(bool* declined) {
  const char* start = m_p;
  const bool negative = *m_p == '-';
  if (negative) ++m_p;
  auto digit = [this]() { return m_p < m_end && *m_p >= '0' && *m_p <= '9'; };
  if (!digit()) {
    *declined = true;
    return false;
  }
  uint64_t magnitude = 0;
  bool overflow = false;
  if (*m_p == '0') {
    ++m_p;
  } else {
    while (digit()) {
      const auto d = static_cast<uint64_t>(*m_p - '0');
      if (magnitude > (UINT64_MAX - d) / 10) overflow = true;
      magnitude = magnitude * 10 + d;
      ++m_p;
    }
  }
  bool isFloat = false;
  if (m_p < m_end && *m_p == '.') {
    ++m_p;
    if (!digit()) {
      *declined = true;
      return false;
    }
    while (digit()) ++m_p;
    isFloat = true;
  }
  if (m_p < m_end && (*m_p == 'e' || *m_p == 'E')) {
    ++m_p;
    if (m_p < m_end && (*m_p == '+' || *m_p == '-')) ++m_p;
    if (!digit()) {
      *declined = true;
      return false;
    }
    while (digit()) ++m_p;
    isFloat = true;
  }
  if (!isFloat && !overflow) {
    if (!negative) return m_sax.number_unsigned(magnitude);
    if (magnitude <= static_cast<uint64_t>(INT64_MAX) + 1) {
      return m_sax.number_integer(static_cast<int64_t>(0 - magnitude));
    }
  }
  double value = 0;
  const auto [ptr, ec] = std::from_chars(start, m_p, value);
  if (ec != std::errc() || ptr != m_p || !std::isfinite(value)) {
    *declined = true;
    return false;
  }
  m_number.assign(start, m_p);
  return m_sax.number_float(value, m_number);
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

Status tokenizeChromeTraceFast(std::string_view text, ChromeReadDiagnostics& diagnostics,
                               RawTrace& trace, ChromeEventHandler& events, bool* declined) {
  TraceSaxHandler handler(diagnostics, trace, events);
  *declined = false;
  using Scanner = FastJsonScanner<TraceSaxHandler>;
  Scanner::Outcome outcome = Scanner::Outcome::kDone;
  try {
    outcome = Scanner(text, handler).run();
  } catch (const std::exception& ex) {
    return invalidArgument(diagnostics.source + ": " + ex.what());
  }
  if (outcome == Scanner::Outcome::kDeclined) {
    *declined = true;
    return Status::ok();
  }
  if (outcome == Scanner::Outcome::kStopped) {
    Status status = handler.status();
    if (status.isOk()) status = invalidArgument(diagnostics.source + ": invalid JSON");
    return status;
  }
  return Status::ok();
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
