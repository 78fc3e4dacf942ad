#include "traces/timeline.h"

#include <algorithm>
#include <array>

#include "base/strings.h"

namespace ddpscope::traces {

namespace {

constexpr std::array<const char*, kCategoryCount> kCategoryNames = {
    "forward",   "backward",           "optimizer", "compute",   "copy",
    "allreduce", "used_map_allreduce", "broadcast", "allgather", "reduce_scatter",
    "comm",      "iteration",          "other",
};

std::string describeSpan(const Span& span) {
  return "\"" + span.name + "\" [" + std::to_string(span.start.count()) + " ns, " +
         std::to_string(span.end().count()) + " ns)";
}

}  // namespace

const char* laneKindName(LaneKind kind) {
  switch (kind) {
    case LaneKind::kCompute:
      return "compute";
    case LaneKind::kComm:
      return "comm";
    case LaneKind::kHost:
      return "host";
  }
  return "host";
}

std::optional<LaneKind> parseLaneKind(std::string_view name) {
  if (name == "compute") return LaneKind::kCompute;
  if (name == "comm") return LaneKind::kComm;
  if (name == "host") return LaneKind::kHost;
  return std::nullopt;
}

const char* categoryName(Category category) {
  return kCategoryNames[static_cast<size_t>(category)];
}

std::optional<Category> parseCategory(std::string_view name) {
  // Called once per span by the Chrome reader: compare lengths before bytes.
  static constexpr auto kNames = [] {
    std::array<std::string_view, kCategoryCount> names{};
    for (size_t i = 0; i < names.size(); ++i) names[i] = kCategoryNames[i];
    return names;
  }();
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name.size() == kNames[i].size() && name == kNames[i]) return static_cast<Category>(i);
  }
  return std::nullopt;
}

const char* collectiveVerb(Category category) {
  switch (category) {
    case Category::kAllreduce:
    case Category::kUsedMapAllreduce:
      return "allreduce";
    case Category::kBroadcast:
      return "broadcast";
    case Category::kAllgather:
      return "allgather";
    case Category::kReduceScatter:
      return "reduce_scatter";
    default:
      return "collective";
  }
}

bool isBucketCollective(Category category) {
  return isCommunication(category) && category != Category::kUsedMapAllreduce &&
         category != Category::kBroadcast;
}

bool isCommunication(Category category) {
  switch (category) {
    case Category::kAllreduce:
    case Category::kUsedMapAllreduce:
    case Category::kBroadcast:
    case Category::kAllgather:
    case Category::kReduceScatter:
    case Category::kCommOther:
      return true;
    default:
      return false;
  }
}

bool isComputation(Category category) {
  switch (category) {
    case Category::kForward:
    case Category::kBackward:
    case Category::kOptimizer:
    case Category::kCompute:
      return true;
    default:
      return false;
  }
}

bool isMemory(Category category) {
  return category == Category::kCopy;
}

// ---- Args ----

void Args::set(std::string key, ArgValue value) {
  for (Item& item : m_items) {
    if (item.first == key) {
      item.second = std::move(value);
      return;
    }
  }
  m_items.emplace_back(std::move(key), std::move(value));
}

// Out of line on purpose: GCC 12 reports a false -Wmaybe-uninitialized when the variant
// move is inlined into callers.
void Args::append(std::string key, ArgValue value) {
  m_items.emplace_back(std::move(key), std::move(value));
}

const ArgValue* Args::find(std::string_view key) const {
  for (const Item& item : m_items) {
    if (item.first == key) return &item.second;
  }
  return nullptr;
}

std::optional<int64_t> Args::getInt(std::string_view key) const {
  const ArgValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(value)) return *i;
  return std::nullopt;
}

std::optional<double> Args::getDouble(std::string_view key) const {
  const ArgValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* d = std::get_if<double>(value)) return *d;
  if (const auto* i = std::get_if<int64_t>(value)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<std::string_view> Args::getString(std::string_view key) const {
  const ArgValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(value)) return std::string_view(*s);
  return std::nullopt;
}

// ---- Timeline ----

int Timeline::addRank(int rankId, std::string name) {
  if (std::optional<int> index = findRank(rankId)) {
    if (!name.empty()) m_ranks[static_cast<size_t>(*index)].name = std::move(name);
    return *index;
  }
  RankTrack track;
  track.rank = rankId;
  track.name = std::move(name);
  m_ranks.push_back(std::move(track));
  return static_cast<int>(m_ranks.size()) - 1;
}

std::optional<int> Timeline::findRank(int rankId) const {
  // Fast path: ranks added in id order 0, 1, 2, ...
  if (rankId >= 0 && static_cast<size_t>(rankId) < m_ranks.size() &&
      m_ranks[static_cast<size_t>(rankId)].rank == rankId) {
    return rankId;
  }
  for (size_t i = 0; i < m_ranks.size(); ++i) {
    if (m_ranks[i].rank == rankId) return static_cast<int>(i);
  }
  return std::nullopt;
}

LaneHandle Timeline::addLane(int rankId, std::string name, LaneKind kind) {
  int rankIndex = addRank(rankId);
  RankTrack& track = m_ranks[static_cast<size_t>(rankIndex)];
  Lane lane;
  lane.name = std::move(name);
  lane.kind = kind;
  track.lanes.push_back(std::move(lane));
  return LaneHandle{rankIndex, static_cast<int>(track.lanes.size()) - 1};
}

LaneHandle Timeline::findOrAddLane(int rankId, std::string_view name, LaneKind kind) {
  int rankIndex = addRank(rankId);
  const RankTrack& track = m_ranks[static_cast<size_t>(rankIndex)];
  for (size_t i = 0; i < track.lanes.size(); ++i) {
    if (track.lanes[i].name == name) return LaneHandle{rankIndex, static_cast<int>(i)};
  }
  return addLane(rankId, std::string(name), kind);
}

const Lane& Timeline::lane(LaneHandle handle) const {
  return m_ranks.at(static_cast<size_t>(handle.rankIndex))
      .lanes.at(static_cast<size_t>(handle.laneIndex));
}

Lane& Timeline::mutableLane(LaneHandle handle) {
  return m_ranks.at(static_cast<size_t>(handle.rankIndex))
      .lanes.at(static_cast<size_t>(handle.laneIndex));
}

void Timeline::reserveSpans(LaneHandle handle, size_t count) {
  mutableLane(handle).spans.reserve(count);
}

void Timeline::addSpan(LaneHandle handle, Span span) {
  mutableLane(handle).spans.push_back(std::move(span));
}

void Timeline::addSpan(LaneHandle handle, std::string name, Category category, Nanos start,
                       Nanos duration, Args args) {
  Span& span = mutableLane(handle).spans.emplace_back();
  span.name = std::move(name);
  span.category = category;
  span.start = start;
  span.duration = duration;
  span.args = std::move(args);
}

void Timeline::addIteration(int rankId, int64_t index, Nanos start, Nanos duration) {
  LaneHandle handle = findOrAddLane(rankId, kIterationLaneName, LaneKind::kHost);
  addSpan(handle, "ProfilerStep#" + std::to_string(index), Category::kIteration, start, duration,
          Args{{std::string(kArgIteration), ArgValue(index)}});
}

std::vector<Iteration> Timeline::iterations(int rankIndex) const {
  std::vector<Iteration> result;
  for (const Lane& lane : rank(rankIndex).lanes) {
    for (const Span& span : lane.spans) {
      if (span.category != Category::kIteration) continue;
      Iteration iteration;
      iteration.start = span.start;
      iteration.duration = span.duration;
      if (std::optional<int64_t> step = parseProfilerStep(span.name)) {
        iteration.index = *step;
      } else if (std::optional<int64_t> arg = span.args.getInt(kArgIteration)) {
        iteration.index = *arg;
      } else {
        iteration.index = -1;  // filled with the ordinal below
      }
      result.push_back(iteration);
    }
  }
  std::stable_sort(result.begin(), result.end(),
                   [](const Iteration& a, const Iteration& b) { return a.start < b.start; });
  for (size_t i = 0; i < result.size(); ++i) {
    if (result[i].index < 0) result[i].index = static_cast<int64_t>(i);
  }
  return result;
}

size_t Timeline::spanCount() const {
  size_t count = 0;
  for (const RankTrack& track : m_ranks) {
    for (const Lane& lane : track.lanes) count += lane.spans.size();
  }
  return count;
}

void Timeline::sortSpans() {
  for (RankTrack& track : m_ranks) {
    for (Lane& lane : track.lanes) {
      if (std::is_sorted(lane.spans.begin(), lane.spans.end(), spanPrecedes)) continue;
      std::stable_sort(lane.spans.begin(), lane.spans.end(), spanPrecedes);
    }
  }
}

Status Timeline::validateNesting() const {
  std::vector<const Span*> order;
  std::vector<const Span*> open;  // stack of enclosing spans
  for (const RankTrack& track : m_ranks) {
    for (const Lane& lane : track.lanes) {
      order.clear();
      order.reserve(lane.spans.size());
      for (const Span& span : lane.spans) {
        if (span.duration < Nanos(0)) {
          return failedPrecondition("rank " + std::to_string(track.rank) + " lane \"" + lane.name +
                                    "\": span " + describeSpan(span) + " has a negative duration");
        }
        order.push_back(&span);
      }
      std::stable_sort(order.begin(), order.end(),
                       [](const Span* a, const Span* b) { return spanPrecedes(*a, *b); });
      open.clear();
      for (const Span* span : order) {
        while (!open.empty() && open.back()->end() <= span->start) open.pop_back();
        if (!open.empty() && span->end() > open.back()->end()) {
          return failedPrecondition("rank " + std::to_string(track.rank) + " lane \"" + lane.name +
                                    "\": span " + describeSpan(*span) + " partially overlaps " +
                                    describeSpan(*open.back()));
        }
        open.push_back(span);
      }
    }
  }
  return Status::ok();
}

std::optional<int64_t> parseProfilerStep(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  return parseInt64(name.substr(kPrefix.size()));
}

}  // namespace ddpscope::traces
