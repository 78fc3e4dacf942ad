#include "traces/chrome_event_handler.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <utility>
#include <variant>

#include "base/strings.h"
#include "traces/chrome_reader.h"
#include "traces/classify.h"

namespace ddpscope::traces::chrome_detail {

namespace {

// tid of the per-process lane that holds process- and global-scope instants.
constexpr IdKey kInstantsTid{-1, true};

// Categories of GPU-side events in Kineto traces.
bool isGpuCat(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" ||
         cat == "gpu_user_annotation" || cat == "cuda_sync";
}

}  // namespace

// ---- field conversion ----

StatusOr<Nanos> ChromeEventHandler::timeField(const FieldValue& value,
                                              std::string_view field) const {
  constexpr int64_t kMaxMicros = INT64_MAX / 1000;
  switch (value.kind) {
    case FieldValue::Kind::kMissing:
      return fieldError(field, "missing (required for \"" + m_event->ph.text + "\" events)");
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

StatusOr<IdKey> ChromeEventHandler::idField(const FieldValue& value, std::string_view field) {
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

StatusOr<std::string> ChromeEventHandler::flowIdText(const FieldValue& value,
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

uint64_t ChromeEventHandler::flowNumericId(const std::string& idText) {
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

int ChromeEventHandler::processFor(const IdKey& pid) {
  auto [it, inserted] = m_processIndex.emplace(pid, static_cast<int>(m_trace.processes.size()));
  if (inserted) {
    RawProcess process;
    process.pid = pid;
    m_trace.processes.push_back(std::move(process));
  }
  return it->second;
}

int ChromeEventHandler::laneFor(const LaneKey& key) {
  if (m_lastLane >= 0 && key == m_lastLaneKey) return m_lastLane;
  auto [it, inserted] = m_laneIndex.emplace(key, static_cast<int>(m_trace.lanes.size()));
  if (inserted) {
    RawLane lane;
    lane.key = key;
    lane.process = processFor(key.pid);
    m_trace.processes[static_cast<size_t>(lane.process)].lanes.push_back(it->second);
    m_trace.lanes.push_back(std::move(lane));
  }
  m_lastLaneKey = key;
  m_lastLane = it->second;
  return it->second;
}

bool ChromeEventHandler::resolveCategory(Span& span, int lane) {
  std::string_view cat = m_event->cat.kind == FieldValue::Kind::kString
                             ? std::string_view(m_event->cat.text)
                             : std::string_view();
  if (std::optional<Category> ours = parseCategory(cat)) {
    span.category = *ours;
    return false;
  }
  if (!cat.empty()) span.args.append("cat", std::string(cat));
  if (isGpuCat(cat)) {
    m_trace.lanes[static_cast<size_t>(lane)].gpuEvents = true;
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

Status ChromeEventHandler::handle(RawEvent& event, int64_t eventIndex) {
  m_event = &event;
  m_eventIndex = eventIndex;
  const FieldValue& ph = m_event->ph;
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
      ASSIGN_OR_RETURN(IdKey pid, idField(m_event->pid, "pid"));
      IdKey tid{};
      bool processScope = (phase == 'i' || phase == 'I') &&
                          m_event->scope.kind == FieldValue::Kind::kString &&
                          (m_event->scope.text == "g" || m_event->scope.text == "p");
      if (processScope) {
        tid = kInstantsTid;
      } else {
        ASSIGN_OR_RETURN(tid, idField(m_event->tid, "tid"));
      }
      int lane = laneFor(LaneKey{pid, tid});
      if (processScope && m_trace.lanes[static_cast<size_t>(lane)].threadName.empty()) {
        m_trace.lanes[static_cast<size_t>(lane)].threadName = "instants";
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

Status ChromeEventHandler::handleComplete(int lane, bool instant) {
  ASSIGN_OR_RETURN(Nanos start, timeField(m_event->ts, "ts"));
  Nanos duration(0);
  if (!instant) {
    ASSIGN_OR_RETURN(duration, timeField(m_event->dur, "dur"));
    if (duration < Nanos(0)) {
      return fieldError("dur", "negative duration " + m_event->dur.repr() + " µs");
    }
  }
  RawLane& raw = m_trace.lanes[static_cast<size_t>(lane)];
  Span& span = raw.spans.emplace_back();
  if (m_event->name.kind == FieldValue::Kind::kString) span.name = std::move(m_event->name.text);
  span.start = start;
  span.duration = duration;
  span.args = std::move(m_event->args);
  if (resolveCategory(span, lane)) {
    raw.unresolved.push_back(static_cast<uint32_t>(raw.spans.size() - 1));
  }
  if (!instant) handleBoundFlows(lane, start);
  return Status::ok();
}

Status ChromeEventHandler::handleBegin(int lane) {
  ASSIGN_OR_RETURN(Nanos start, timeField(m_event->ts, "ts"));
  OpenSpan open;
  if (m_event->name.kind == FieldValue::Kind::kString)
    open.span.name = std::move(m_event->name.text);
  open.span.start = start;
  open.span.args = std::move(m_event->args);
  open.unresolved = resolveCategory(open.span, lane);
  open.eventIndex = m_eventIndex;
  m_trace.lanes[static_cast<size_t>(lane)].open.push_back(std::move(open));
  handleBoundFlows(lane, start);
  return Status::ok();
}

Status ChromeEventHandler::handleEnd(int lane) {
  ASSIGN_OR_RETURN(Nanos end, timeField(m_event->ts, "ts"));
  RawLane& raw = m_trace.lanes[static_cast<size_t>(lane)];
  if (raw.open.empty()) {
    warn(eventPath() + ": \"E\" without a matching \"B\" ignored");
    return Status::ok();
  }
  OpenSpan open = std::move(raw.open.back());
  raw.open.pop_back();
  if (end < open.span.start) {
    return fieldError("ts", "\"E\" at " + m_event->ts.repr() + " µs precedes its \"B\" (" +
                                m_diagnostics.eventPath(open.eventIndex) + ")");
  }
  open.span.duration = end - open.span.start;
  for (auto& [key, value] : m_event->args) open.span.args.set(key, value);
  raw.spans.push_back(std::move(open.span));
  if (open.unresolved) raw.unresolved.push_back(static_cast<uint32_t>(raw.spans.size() - 1));
  return Status::ok();
}

Status ChromeEventHandler::handleCounter() {
  ASSIGN_OR_RETURN(Nanos time, timeField(m_event->ts, "ts"));
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event->pid, "pid"));
  int process = processFor(pid);
  std::string name = m_event->name.kind == FieldValue::Kind::kString ? m_event->name.text : "";
  for (const auto& [key, value] : m_event->args) {
    double number;
    if (const auto* i = std::get_if<int64_t>(&value)) {
      number = static_cast<double>(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      number = *d;
    } else {
      continue;  // non-numeric series are not counters
    }
    m_trace.counters.push_back(
        RawCounter{process, key == "value" ? name : name + " " + key, time, number});
  }
  return Status::ok();
}

void ChromeEventHandler::handleBoundFlows(int lane, Nanos time) {
  if (!m_event->bindId.present()) return;
  StatusOr<std::string> idText = flowIdText(m_event->bindId, "bind_id");
  if (!idText.isOk()) return;
  std::string key = "\x1f\x1f" + *idText;
  auto truthy = [](const FieldValue& v) {
    return (v.kind == FieldValue::Kind::kBool && v.b) ||
           (v.kind == FieldValue::Kind::kInt && v.i != 0);
  };
  if (truthy(m_event->flowIn)) {
    auto it = m_trace.openFlows.find(key);
    if (it != m_trace.openFlows.end()) {
      m_trace.flows.push_back(
          RawFlow{flowNumericId(*idText), "", "", it->second, RawFlowPoint{lane, time}});
      m_trace.openFlows.erase(it);
    } else {
      warn(eventPath() + ": flow_in without a matching flow_out ignored");
    }
  }
  if (truthy(m_event->flowOut)) m_trace.openFlows[key] = RawFlowPoint{lane, time};
}

Status ChromeEventHandler::handleFlowPhase(char phase) {
  ASSIGN_OR_RETURN(Nanos time, timeField(m_event->ts, "ts"));
  ASSIGN_OR_RETURN(std::string idText, flowIdText(m_event->id, "id"));
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event->pid, "pid"));
  ASSIGN_OR_RETURN(IdKey tid, idField(m_event->tid, "tid"));
  int lane = laneFor(LaneKey{pid, tid});
  std::string name = m_event->name.kind == FieldValue::Kind::kString ? m_event->name.text : "";
  std::string cat = m_event->cat.kind == FieldValue::Kind::kString ? m_event->cat.text : "";
  std::string key = cat + '\x1f' + name + '\x1f' + idText;
  RawFlowPoint here{lane, time};
  if (phase == 's') {
    m_trace.openFlows[key] = here;
    return Status::ok();
  }
  auto it = m_trace.openFlows.find(key);
  if (it == m_trace.openFlows.end()) {
    warn(eventPath() + ": flow \"" + std::string(1, phase) + "\" without a matching \"s\" ignored");
    return Status::ok();
  }
  m_trace.flows.push_back(
      RawFlow{flowNumericId(idText), std::move(name), std::move(cat), it->second, here});
  if (phase == 't') {
    it->second = here;
  } else {
    m_trace.openFlows.erase(it);
  }
  return Status::ok();
}

Status ChromeEventHandler::handleMetadata() {
  std::string_view name = m_event->name.kind == FieldValue::Kind::kString
                              ? std::string_view(m_event->name.text)
                              : std::string_view();
  ASSIGN_OR_RETURN(IdKey pid, idField(m_event->pid, "pid"));
  if (name == "process_name" || name == "process_labels") {
    std::optional<std::string_view> value =
        m_event->args.getString(name == "process_name" ? "name" : "labels");
    if (!value) {
      warn(eventPath() + ": " + std::string(name) + " without a string arg ignored");
      return Status::ok();
    }
    RawProcess& process = m_trace.processes[static_cast<size_t>(processFor(pid))];
    (name == "process_name" ? process.name : process.labels) = std::string(*value);
  } else if (name == "thread_name") {
    ASSIGN_OR_RETURN(IdKey tid, idField(m_event->tid, "tid"));
    RawLane& lane = m_trace.lanes[static_cast<size_t>(laneFor(LaneKey{pid, tid}))];
    if (std::optional<std::string_view> value = m_event->args.getString("name")) {
      lane.threadName = std::string(*value);
    }
    if (std::optional<std::string_view> kind = m_event->args.getString("lane_kind")) {
      lane.declaredKind = parseLaneKind(*kind);
    }
  } else if (name == "thread_sort_index") {
    // Lanes keep their order of first appearance (our writer emits them in lane order).
    ASSIGN_OR_RETURN(IdKey tid, idField(m_event->tid, "tid"));
    laneFor(LaneKey{pid, tid});
  } else if (name == "process_sort_index") {
    processFor(pid);
  } else {
    warn(eventPath() + ": metadata \"" + std::string(name) + "\" ignored");
  }
  return Status::ok();
}

}  // namespace ddpscope::traces::chrome_detail
