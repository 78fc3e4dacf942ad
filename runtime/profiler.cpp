#include "runtime/profiler.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/median.h"
#include "traces/args_json.h"
#include "traces/overlap.h"

namespace ddpscope::runtime {

using traces::Args;
using traces::Category;
using traces::LaneKind;
using traces::RankTrack;
using traces::Span;

Profiler::Profiler(int rank, std::vector<std::string> layerNames, std::function<Nanos()> clock)
    : m_rank(rank), m_layerNames(std::move(layerNames)), m_clock(std::move(clock)) {
  m_track.rank = rank;
  m_track.lanes = {
      {"compute", LaneKind::kCompute, {}},
      {"comm", LaneKind::kComm, {}},
      {"ddp", LaneKind::kHost, {}},
      {std::string(traces::kIterationLaneName), LaneKind::kHost, {}},
  };
  m_spans.resize(m_track.lanes.size());
}

void Profiler::setRetainedIterations(int64_t iterations) {
  std::lock_guard lock(m_mutex);
  m_retainedIterations = std::max<int64_t>(0, iterations);
  dropOldIterations();
}

int64_t Profiler::retainedIterations() const {
  std::lock_guard lock(m_mutex);
  return m_retainedIterations;
}

int64_t Profiler::droppedIterations() const {
  std::lock_guard lock(m_mutex);
  return m_droppedIterations;
}

size_t Profiler::spanCount() const {
  std::lock_guard lock(m_mutex);
  size_t count = 0;
  for (const auto& lane : m_spans) count += lane.size();
  return count;
}

void Profiler::dropOldIterations() {
  if (m_retainedIterations == 0) return;
  bool dropped = false;
  while (static_cast<int64_t>(m_iterationStarts.size()) > m_retainedIterations) {
    m_iterationStarts.pop_front();
    ++m_droppedIterations;
    dropped = true;
  }
  if (!dropped) return;
  m_retainedFrom = m_iterationStarts.front();
  // Insertion order is start order up to nesting (a window is added after the spans inside
  // it), so popping from the front while the front is old drops nearly all; snapshot()
  // filters the rest, and they go when the span ahead of them does.
  for (auto& lane : m_spans) {
    while (!lane.empty() && lane.front().start < m_retainedFrom) lane.pop_front();
  }
}

void Profiler::setEnabled(bool enabled) {
  std::lock_guard lock(m_mutex);
  m_enabled = enabled;
}

const std::string& Profiler::layerName(int layerIndex) const {
  static const std::string kFallback = "layer";
  return layerIndex >= 0 && layerIndex < static_cast<int>(m_layerNames.size())
             ? m_layerNames[static_cast<size_t>(layerIndex)]
             : kFallback;
}

void Profiler::onForwardBegin(int /*layerIndex*/) {
  m_forwardStart = m_clock();
}
void Profiler::onForwardEnd(int layerIndex) {
  onLayerSpan(layerIndex, /*backward=*/false, m_forwardStart, m_clock());
}
void Profiler::onBackwardBegin(int /*layerIndex*/) {
  m_backwardStart = m_clock();
}
void Profiler::onBackwardEnd(int layerIndex) {
  onLayerSpan(layerIndex, /*backward=*/true, m_backwardStart, m_clock());
}

void Profiler::onLayerSpan(int layerIndex, bool backward, Nanos start, Nanos end) {
  const std::string& name = layerName(layerIndex);
  addSpan(ProfLane::kCompute, backward ? name + " (backward)" : name,
          backward ? Category::kBackward : Category::kForward, start, end,
          Args{{"layer", int64_t{layerIndex}}});
}

void Profiler::onDeviceSpan(const std::string& name, Nanos start, Nanos end) {
  Category category = Category::kCompute;
  if (name.starts_with("optimizer")) {
    category = Category::kOptimizer;
  } else if (name.ends_with("(backward)")) {
    category = Category::kBackward;
  } else if (name == traces::kLossHeadSpan || name == traces::kLossHeadBackwardSpan) {
    category = Category::kForward;
  }
  addSpan(ProfLane::kCompute, name, category, start, end);
}

void Profiler::onCollective(const CommTag& tag, int64_t bytes, Nanos start, Nanos end) {
  Args args;
  if (tag.bucket >= 0) args.append(std::string(traces::kArgBucket), int64_t{tag.bucket});
  args.append(std::string(traces::kArgBytes), bytes);
  if (tag.iteration > 0) args.append(std::string(traces::kArgIteration), tag.iteration);
  std::string name = tag.name;
  if (tag.bucket >= 0) name += " bucket " + std::to_string(tag.bucket);
  addSpan(ProfLane::kComm, std::move(name), tag.category, start, end, std::move(args));
}

void Profiler::addSpan(ProfLane lane, std::string name, Category category, Nanos start, Nanos end,
                       Args args) {
  std::lock_guard lock(m_mutex);
  if (!m_enabled) return;
  m_spans[static_cast<size_t>(lane)].push_back(
      Span{std::move(name), category, start, end - start, std::move(args)});
}

void Profiler::addIteration(int64_t index, Nanos start, Nanos end) {
  addSpan(ProfLane::kIterations, "ProfilerStep#" + std::to_string(index), Category::kIteration,
          start, end, Args{{std::string(traces::kArgIteration), index}});
  std::lock_guard lock(m_mutex);
  if (!m_enabled) return;
  m_iterationStarts.push_back(start);
  dropOldIterations();
}

RankTrack Profiler::snapshot() const {
  RankTrack track;
  {
    std::lock_guard lock(m_mutex);
    track = m_track;
    for (size_t lane = 0; lane < m_spans.size(); ++lane) {
      std::vector<Span>& spans = track.lanes[lane].spans;
      spans.reserve(m_spans[lane].size());
      for (const Span& span : m_spans[lane]) {
        if (span.start >= m_retainedFrom) spans.push_back(span);
      }
    }
  }
  for (auto& lane : track.lanes) {
    for (auto& span : lane.spans) span.start += m_clockOffset;
  }
  return track;
}

// ---- encoding ----------------------------------------------------------------------------

namespace {

constexpr uint32_t kProfileMagic = 0x31505344;  // "DSP1"

class Writer {
 public:
  template <typename T>
  void pod(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    m_out.insert(m_out.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint32_t>(static_cast<uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    m_out.insert(m_out.end(), p, p + s.size());
  }
  std::vector<std::byte> take() { return std::move(m_out); }

 private:
  std::vector<std::byte> m_out;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : m_in(in) {}
  template <typename T>
  bool pod(T* value) {
    if (m_pos + sizeof(T) > m_in.size()) return false;
    std::memcpy(value, m_in.data() + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return true;
  }
  bool str(std::string* s) {
    uint32_t n = 0;
    if (!pod(&n) || m_pos + n > m_in.size()) return false;
    s->assign(reinterpret_cast<const char*>(m_in.data() + m_pos), n);
    m_pos += n;
    return true;
  }
  size_t pos() const { return m_pos; }
  bool atEnd() const { return m_pos == m_in.size(); }

 private:
  std::span<const std::byte> m_in;
  size_t m_pos = 0;
};

}  // namespace

std::vector<std::byte> encodeRankTrack(const RankTrack& track) {
  Writer w;
  w.pod<uint32_t>(kProfileMagic);
  w.pod<int32_t>(track.rank);
  w.str(track.name);
  w.pod<uint32_t>(static_cast<uint32_t>(track.lanes.size()));
  for (const auto& lane : track.lanes) {
    w.str(lane.name);
    w.pod<uint8_t>(static_cast<uint8_t>(lane.kind));
    w.pod<uint64_t>(lane.spans.size());
    for (const auto& span : lane.spans) {
      w.str(span.name);
      w.pod<uint8_t>(static_cast<uint8_t>(span.category));
      w.pod<int64_t>(span.start.count());
      w.pod<int64_t>(span.duration.count());
      w.pod<uint16_t>(static_cast<uint16_t>(span.args.size()));
      for (const auto& [key, value] : span.args) {
        w.str(key);
        w.pod<uint8_t>(static_cast<uint8_t>(value.index()));
        if (const auto* i = std::get_if<int64_t>(&value)) {
          w.pod<int64_t>(*i);
        } else if (const auto* d = std::get_if<double>(&value)) {
          w.pod<double>(*d);
        } else {
          w.str(std::get<std::string>(value));
        }
      }
    }
  }
  return w.take();
}

StatusOr<RankTrack> decodeRankTrack(std::span<const std::byte> blob) {
  Reader r(blob);
  auto truncated = [&r](const char* what) {
    return invalidArgument("rank track encoding: truncated or corrupt at byte " +
                           std::to_string(r.pos()) + " (" + what + ")");
  };
  uint32_t magic = 0;
  if (!r.pod(&magic) || magic != kProfileMagic) return truncated("bad magic");
  RankTrack track;
  uint32_t laneCount = 0;
  if (!r.pod(&track.rank) || !r.str(&track.name) || !r.pod(&laneCount)) return truncated("header");
  for (uint32_t l = 0; l < laneCount; ++l) {
    traces::Lane lane;
    uint8_t kind = 0;
    uint64_t spanCount = 0;
    if (!r.str(&lane.name) || !r.pod(&kind) || !r.pod(&spanCount)) return truncated("lane");
    if (kind > static_cast<uint8_t>(LaneKind::kHost)) return truncated("lane kind");
    lane.kind = static_cast<LaneKind>(kind);
    if (spanCount > blob.size()) return truncated("span count");
    lane.spans.reserve(spanCount);
    for (uint64_t s = 0; s < spanCount; ++s) {
      Span span;
      uint8_t category = 0;
      int64_t start = 0;
      int64_t duration = 0;
      uint16_t argCount = 0;
      if (!r.str(&span.name) || !r.pod(&category) || !r.pod(&start) || !r.pod(&duration) ||
          !r.pod(&argCount)) {
        return truncated("span");
      }
      if (category >= traces::kCategoryCount) return truncated("category");
      span.category = static_cast<Category>(category);
      span.start = Nanos(start);
      span.duration = Nanos(duration);
      for (uint16_t a = 0; a < argCount; ++a) {
        std::string key;
        uint8_t type = 0;
        if (!r.str(&key) || !r.pod(&type)) return truncated("arg");
        if (type == 0) {
          int64_t v = 0;
          if (!r.pod(&v)) return truncated("int arg");
          span.args.append(std::move(key), v);
        } else if (type == 1) {
          double v = 0;
          if (!r.pod(&v)) return truncated("double arg");
          span.args.append(std::move(key), v);
        } else if (type == 2) {
          std::string v;
          if (!r.str(&v)) return truncated("string arg");
          span.args.append(std::move(key), std::move(v));
        } else {
          return truncated("arg type");
        }
      }
      lane.spans.push_back(std::move(span));
    }
    track.lanes.push_back(std::move(lane));
  }
  if (!r.atEnd()) return truncated("trailing bytes");
  return track;
}

traces::Timeline mergeRankTracks(std::vector<RankTrack> tracks, Args metadata) {
  std::sort(tracks.begin(), tracks.end(),
            [](const RankTrack& a, const RankTrack& b) { return a.rank < b.rank; });
  Nanos origin = Nanos::max();
  for (const auto& track : tracks) {
    for (const auto& lane : track.lanes) {
      for (const auto& span : lane.spans) origin = minNanos(origin, span.start);
    }
  }
  if (origin == Nanos::max()) origin = Nanos(0);
  traces::Timeline timeline;
  timeline.mutableMetadata() = std::move(metadata);
  for (auto& track : tracks) {
    const int index = timeline.addRank(track.rank, track.name);
    for (auto& lane : track.lanes) {
      for (auto& span : lane.spans) span.start -= origin;
    }
    timeline.mutableRank(index).lanes = std::move(track.lanes);
  }
  timeline.sortSpans();
  return timeline;
}

StatusOr<Nanos> measureClockOffset(Communicator& comm, int rounds) {
  std::vector<int64_t> offsets;
  const int world = comm.worldSize();
  for (int round = 0; round < rounds; ++round) {
    RETURN_IF_ERROR(
        comm.barrier(CommTag{"clock_sync_barrier", Category::kCommOther, -1, 0, false}));
    int64_t mine = comm.now().count();
    std::vector<int64_t> all(static_cast<size_t>(world));
    RETURN_IF_ERROR(comm.allgather(std::as_bytes(std::span<const int64_t>(&mine, 1)),
                                   std::as_writable_bytes(std::span<int64_t>(all)),
                                   CommTag{"clock_sync", Category::kCommOther, -1, 0, false}));
    offsets.push_back(all[0] - mine);
  }
  std::sort(offsets.begin(), offsets.end());
  return Nanos(offsets[offsets.size() / 2]);
}

StatusOr<traces::Timeline> gatherTimeline(Communicator& comm, const Profiler& profiler,
                                          Args metadata) {
  const std::vector<std::byte> blob = encodeRankTrack(profiler.snapshot());
  std::vector<std::vector<std::byte>> blobs;
  RETURN_IF_ERROR(
      comm.gatherv(blob, 0, &blobs, CommTag{"trace_gather", Category::kCommOther, -1, 0, false}));
  if (comm.rank() != 0) return traces::Timeline{};
  std::vector<RankTrack> tracks;
  for (size_t r = 0; r < blobs.size(); ++r) {
    StatusOr<RankTrack> track = decodeRankTrack(blobs[r]);
    if (!track.isOk()) return track.status().withContext("trace of rank " + std::to_string(r));
    tracks.push_back(std::move(track).value());
  }
  return mergeRankTracks(std::move(tracks), std::move(metadata));
}

// ---- summary -----------------------------------------------------------------------------

namespace {

// Total length of `lane` spans of `category` inside [start, end) (host-lane windows do not nest
// within one category, so a plain sum is exact).
Nanos categoryTime(const RankTrack& track, Category category, Nanos start, Nanos end) {
  Nanos total;
  for (const auto& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const auto& span : lane.spans) {
      if (span.category != category) continue;
      const Nanos s = maxNanos(span.start, start);
      const Nanos e = minNanos(span.end(), end);
      if (s < e) total += e - s;
    }
  }
  return total;
}

}  // namespace

RunSummary summarize(const traces::Timeline& timeline, int64_t warmup) {
  RunSummary summary;
  const std::vector<traces::RankOverlap> overlap = traces::computeOverlap(timeline);
  std::map<int64_t, IterationSummary> byIndex;
  int64_t totalComm = 0;
  int64_t totalOverlapped = 0;
  for (size_t ri = 0; ri < overlap.size(); ++ri) {
    const traces::RankOverlap& rank = overlap[ri];
    const RankTrack& track = timeline.rank(static_cast<int>(ri));
    RunSummary::Rank rankSummary;
    rankSummary.rank = rank.rank;
    int64_t rankComm = 0;
    int64_t rankOverlapped = 0;
    int64_t rankExposed = 0;
    for (const auto& it : rank.iterations) {
      IterationSummary& entry = byIndex[it.index];
      entry.index = it.index;
      entry.step = maxNanos(entry.step, it.stepTime);
      const Nanos end = it.start + it.stepTime;
      entry.forward =
          maxNanos(entry.forward, categoryTime(track, Category::kForward, it.start, end));
      entry.backward =
          maxNanos(entry.backward, categoryTime(track, Category::kBackward, it.start, end));
      if (ri == 0) {
        entry.comm = it.stats.comm;
        entry.exposedComm = it.stats.exposedComm;
        entry.overlapPercent = it.stats.overlapPercent;
      }
      if (it.index > warmup) {
        rankComm += it.stats.comm.count();
        rankOverlapped += it.stats.overlapped.count();
        rankExposed += it.stats.exposedComm.count();
      }
    }
    rankSummary.comm = Nanos(rankComm);
    rankSummary.exposedComm = Nanos(rankExposed);
    rankSummary.overlapPercent =
        rankComm ? 100.0 * static_cast<double>(rankOverlapped) / static_cast<double>(rankComm)
                 : 0.0;
    totalComm += rankComm;
    totalOverlapped += rankOverlapped;
    summary.ranks.push_back(rankSummary);
  }
  std::vector<IterationSummary> measured;
  for (auto& [index, entry] : byIndex) {
    if (index > warmup) measured.push_back(entry);
  }
  if (measured.empty()) {
    for (auto& [index, entry] : byIndex) measured.push_back(entry);
  }
  std::vector<Nanos> step, fwd, bwd, comm, exposed;
  for (const auto& e : measured) {
    step.push_back(e.step);
    fwd.push_back(e.forward);
    bwd.push_back(e.backward);
    comm.push_back(e.comm);
    exposed.push_back(e.exposedComm);
  }
  summary.iterations = std::move(measured);
  summary.medianStep = median(step);
  summary.medianForward = median(fwd);
  summary.medianBackward = median(bwd);
  summary.medianComm = median(comm);
  summary.medianExposedComm = median(exposed);
  summary.overlapPercent =
      totalComm ? 100.0 * static_cast<double>(totalOverlapped) / static_cast<double>(totalComm)
                : 0.0;
  return summary;
}

std::string summaryToJson(const RunSummary& summary, const Args& extra) {
  nlohmann::json out = traces::argsToJson(extra);
  out["median_step_ms"] = summary.medianStep.toMillis();
  out["median_forward_ms"] = summary.medianForward.toMillis();
  out["median_backward_ms"] = summary.medianBackward.toMillis();
  out["median_comm_ms"] = summary.medianComm.toMillis();
  out["median_exposed_comm_ms"] = summary.medianExposedComm.toMillis();
  out["overlap_percent"] = summary.overlapPercent;
  nlohmann::json iterations = nlohmann::json::array();
  for (const auto& it : summary.iterations) {
    iterations.push_back({{"iteration", it.index},
                          {"step_ms", it.step.toMillis()},
                          {"forward_ms", it.forward.toMillis()},
                          {"backward_ms", it.backward.toMillis()},
                          {"comm_ms", it.comm.toMillis()},
                          {"exposed_comm_ms", it.exposedComm.toMillis()},
                          {"overlap_percent", it.overlapPercent}});
  }
  out["iterations"] = std::move(iterations);
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : summary.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"overlap_percent", r.overlapPercent},
                     {"comm_ms", r.comm.toMillis()},
                     {"exposed_comm_ms", r.exposedComm.toMillis()}});
  }
  out["ranks"] = std::move(ranks);
  return out.dump(2);
}

}  // namespace ddpscope::runtime
