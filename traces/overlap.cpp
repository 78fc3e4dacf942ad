#include "traces/overlap.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <variant>

namespace ddpscope::traces {

namespace {

// Collectives that carry gradient buckets (DDP logger's "first bucket" communication).
// ---- HTA 0.5.0's preprocessing of Kineto traces (see overlap.h) ----

bool isKinetoDeviceCat(std::optional<std::string_view> cat) {
  return cat &&
         (*cat == "kernel" || *cat == "gpu_memcpy" || *cat == "gpu_memset" || *cat == "cuda_sync");
}

// An arg as HTA's int() conversion sees it; nullopt where HTA falls back to its default (-1).
std::optional<int64_t> integerArg(const Args& args, std::string_view key) {
  const ArgValue* value = args.find(key);
  if (value == nullptr) return std::nullopt;
  if (const int64_t* i = std::get_if<int64_t>(value)) return *i;
  if (const double* d = std::get_if<double>(value)) {
    if (std::isfinite(*d) && std::fabs(*d) < 9e18) return static_cast<int64_t>(*d);
    return std::nullopt;
  }
  const std::string& text = std::get<std::string>(*value);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return out;
}

int64_t ceilMicros(Nanos t) {
  int64_t ns = t.count();
  int64_t q = ns / 1000;
  return (ns % 1000 > 0) ? q + 1 : q;
}

int64_t floorMicros(Nanos t) {
  int64_t ns = t.count();
  int64_t q = ns / 1000;
  return (ns % 1000 < 0) ? q - 1 : q;
}

struct MicroInterval {
  int64_t start = 0;
  int64_t end = 0;  // may be < start after HTA's rounding
};

// HTA's merge_kernel_intervals: sort by start; a row opens a new group when its start is
// after the largest end seen so far; a group is [min start, max end].
std::vector<MicroInterval> htaMerge(std::vector<MicroInterval> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const MicroInterval& a, const MicroInterval& b) {
    return a.start < b.start;
  });
  std::vector<MicroInterval> groups;
  int64_t maxEnd = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 0 || rows[i].start > maxEnd) {
      groups.push_back(rows[i]);
    } else {
      groups.back().end = std::max(groups.back().end, rows[i].end);
    }
    maxEnd = i == 0 ? rows[i].end : std::max(maxEnd, rows[i].end);
  }
  return groups;
}

// HTA's sweep: +1/-1 at comm group edges, +2/-2 at compute group edges; the time the running
// sum is 3 (after all edges at one instant) is the overlap.
int64_t htaOverlapMicros(const std::vector<MicroInterval>& comm,
                         const std::vector<MicroInterval>& comp) {
  std::vector<std::pair<int64_t, int>> edges;
  edges.reserve(2 * (comm.size() + comp.size()));
  for (const MicroInterval& g : comm) {
    edges.emplace_back(g.start, 1);
    edges.emplace_back(g.end, -1);
  }
  for (const MicroInterval& g : comp) {
    edges.emplace_back(g.start, 2);
    edges.emplace_back(g.end, -2);
  }
  std::sort(edges.begin(), edges.end());
  int64_t total = 0;
  int running = 0;
  for (size_t i = 0; i < edges.size();) {
    int64_t time = edges[i].first;
    while (i < edges.size() && edges[i].first == time) running += edges[i++].second;
    if (running == 3 && i < edges.size()) total += edges[i].first - time;
  }
  return total;
}

bool isHtaSyncName(std::string_view name) {
  return name == "Event Sync" || name == "Context Sync";
}

bool isKinetoRank(const RankTrack& track) {
  for (const Lane& lane : track.lanes) {
    for (const Span& span : lane.spans) {
      if (isKinetoDeviceCat(span.args.getString("cat"))) return true;
    }
  }
  return false;
}

// A device row in HTA's sense: stream >= 0 and correlation >= 0.
bool isHtaDeviceRow(const Span& span) {
  std::optional<int64_t> stream = integerArg(span.args, "stream");
  std::optional<int64_t> correlation = integerArg(span.args, "correlation");
  return stream && *stream >= 0 && correlation && *correlation >= 0;
}

OverlapStats htaTotal(const RankTrack& track, bool filterSteps, bool& droppedLastStep) {
  droppedLastStep = false;
  bool keepAll = !filterSteps;
  std::unordered_set<int64_t> launchedBeforeLastStep;
  if (filterSteps) {
    std::optional<int64_t> lastStepStart;
    for (const Lane& lane : track.lanes) {
      for (const Span& span : lane.spans) {
        if (isHtaDeviceRow(span) || isHtaSyncName(span.name)) continue;
        if (span.name.find("ProfilerStep") == std::string::npos) continue;
        int64_t start = ceilMicros(span.start);
        if (!lastStepStart || start > *lastStepStart) lastStepStart = start;
      }
    }
    if (lastStepStart) {
      droppedLastStep = true;
      for (const Lane& lane : track.lanes) {
        for (const Span& span : lane.spans) {
          if (isHtaDeviceRow(span) || isHtaSyncName(span.name)) continue;
          if (ceilMicros(span.start) >= *lastStepStart) continue;
          if (std::optional<int64_t> c = integerArg(span.args, "correlation")) {
            launchedBeforeLastStep.insert(*c);
          }
        }
      }
    }
  }
  std::vector<MicroInterval> comp;
  std::vector<MicroInterval> comm;
  for (const Lane& lane : track.lanes) {
    for (const Span& span : lane.spans) {
      if (!isHtaDeviceRow(span)) continue;
      if (!keepAll && !launchedBeforeLastStep.contains(*integerArg(span.args, "correlation"))) {
        continue;
      }
      HtaKernelClass kind = htaKernelClass(span.name);
      MicroInterval row{ceilMicros(span.start), floorMicros(span.end())};
      if (kind == HtaKernelClass::kComputation) comp.push_back(row);
      if (kind == HtaKernelClass::kCommunication) comm.push_back(row);
    }
  }
  std::vector<MicroInterval> compGroups = htaMerge(std::move(comp));
  std::vector<MicroInterval> commGroups = htaMerge(std::move(comm));
  int64_t computeUs = 0;
  for (const MicroInterval& g : compGroups) computeUs += std::max<int64_t>(0, g.end - g.start);
  int64_t commUs = 0;
  for (const MicroInterval& g : commGroups) commUs += g.end - g.start;
  int64_t overlapUs = htaOverlapMicros(commGroups, compGroups);
  return makeOverlapStats(Nanos(computeUs * 1000), Nanos(commUs * 1000), Nanos(overlapUs * 1000));
}

}  // namespace

HtaKernelClass htaKernelClass(std::string_view name) {
  if (name.starts_with("nccl")) return HtaKernelClass::kCommunication;
  if (name.starts_with("Memcpy") || name.starts_with("hipMemcpy") || name.starts_with("Memset") ||
      name.starts_with("hipMemset") || name.starts_with("dma")) {
    return HtaKernelClass::kMemory;
  }
  bool launch = name.starts_with("cuda") && name.find("LaunchKernel", 4) != std::string_view::npos;
  bool excluded =
      name.starts_with("runFunction") || launch || name.find("Memcpy") != std::string_view::npos ||
      name.find("Memset") != std::string_view::npos || name.find("dma") != std::string_view::npos ||
      name.find("Sync") != std::string_view::npos;
  return excluded ? HtaKernelClass::kOther : HtaKernelClass::kComputation;
}

// ---- IntervalSet ----

IntervalSet::IntervalSet(std::vector<Interval> disjoint) : m_intervals(std::move(disjoint)) {
  m_prefixNs.reserve(m_intervals.size());
  int64_t sumNs = 0;
  for (const Interval& interval : m_intervals) {
    sumNs += (interval.end - interval.start).count();
    m_prefixNs.push_back(sumNs);
  }
}

IntervalSet IntervalSet::unionOf(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end <= i.start; });
  auto byStart = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  // Callers often pass one stream's spans, already in order: O(n) then.
  if (!std::is_sorted(intervals.begin(), intervals.end(), byStart)) {
    std::sort(intervals.begin(), intervals.end(), byStart);
  }
  std::vector<Interval> merged;
  merged.reserve(intervals.size());
  for (const Interval& interval : intervals) {
    if (!merged.empty() && interval.start <= merged.back().end) {
      merged.back().end = maxNanos(merged.back().end, interval.end);
    } else {
      merged.push_back(interval);
    }
  }
  return IntervalSet(std::move(merged));
}

IntervalSet IntervalSet::intersectionOf(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> out;
  size_t i = 0;
  size_t j = 0;
  const std::vector<Interval>& x = a.m_intervals;
  const std::vector<Interval>& y = b.m_intervals;
  while (i < x.size() && j < y.size()) {
    Nanos start = maxNanos(x[i].start, y[j].start);
    Nanos end = minNanos(x[i].end, y[j].end);
    if (start < end) out.push_back(Interval{start, end});
    if (x[i].end < y[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return IntervalSet(std::move(out));
}

Nanos IntervalSet::lengthWithin(Nanos start, Nanos end) const {
  if (end <= start || m_intervals.empty()) return Nanos(0);
  // first interval ending after start; last interval starting before end
  auto first = std::upper_bound(m_intervals.begin(), m_intervals.end(), start,
                                [](Nanos t, const Interval& i) { return t < i.end; });
  auto last = std::lower_bound(m_intervals.begin(), m_intervals.end(), end,
                               [](const Interval& i, Nanos t) { return i.start < t; });
  if (first >= last) return Nanos(0);
  size_t firstIndex = static_cast<size_t>(first - m_intervals.begin());
  size_t lastIndex = static_cast<size_t>(last - m_intervals.begin()) - 1;
  int64_t totalNs = m_prefixNs[lastIndex] - (firstIndex == 0 ? 0 : m_prefixNs[firstIndex - 1]);
  // clip the two ends
  if (first->start < start) totalNs -= (start - first->start).count();
  const Interval& lastInterval = m_intervals[lastIndex];
  if (lastInterval.end > end) totalNs -= (lastInterval.end - end).count();
  return Nanos(totalNs);
}

// ---- metrics ----

OverlapStats makeOverlapStats(Nanos compute, Nanos comm, Nanos overlapped) {
  OverlapStats stats;
  stats.compute = compute;
  stats.comm = comm;
  stats.overlapped = overlapped;
  stats.exposedComm = comm - overlapped;
  stats.hasCommunication = comm > Nanos(0);
  stats.overlapPercent = stats.hasCommunication ? 100.0 * static_cast<double>(overlapped.count()) /
                                                      static_cast<double>(comm.count())
                                                : 0.0;
  return stats;
}

std::string formatPercent(const OverlapStats& stats) {
  if (!stats.hasCommunication) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", stats.overlapPercent);
  return buf;
}

std::vector<RankOverlap> computeOverlap(const Timeline& timeline) {
  std::vector<RankOverlap> result;
  result.reserve(static_cast<size_t>(timeline.rankCount()));
  // HTA counts the distinct ProfilerStep names of the whole trace (its symbol table).
  std::unordered_set<std::string_view> stepNames;
  for (int rankIndex = 0; rankIndex < timeline.rankCount(); ++rankIndex) {
    for (const Lane& lane : timeline.rank(rankIndex).lanes) {
      for (const Span& span : lane.spans) {
        if (span.name.find("ProfilerStep") != std::string::npos) stepNames.insert(span.name);
      }
    }
  }
  std::vector<Interval> computeIntervals;
  std::vector<Interval> commIntervals;
  for (int rankIndex = 0; rankIndex < timeline.rankCount(); ++rankIndex) {
    const RankTrack& track = timeline.rank(rankIndex);
    computeIntervals.clear();
    commIntervals.clear();
    for (const Lane& lane : track.lanes) {
      if (lane.kind == LaneKind::kHost) continue;
      for (const Span& span : lane.spans) {
        if (isDeviceCompute(span)) {
          computeIntervals.push_back(Interval{span.start, span.end()});
        } else if (isCommunication(span.category)) {
          commIntervals.push_back(Interval{span.start, span.end()});
        }
      }
    }
    IntervalSet compute = IntervalSet::unionOf(computeIntervals);
    IntervalSet comm = IntervalSet::unionOf(commIntervals);
    IntervalSet both = IntervalSet::intersectionOf(compute, comm);

    RankOverlap rank;
    rank.rank = track.rank;
    rank.total = makeOverlapStats(compute.length(), comm.length(), both.length());
    if (isKinetoRank(track)) {
      rank.kineto = true;
      rank.total = htaTotal(track, stepNames.size() >= 2, rank.htaDroppedLastStep);
    }

    std::vector<Iteration> iterations = timeline.iterations(rankIndex);
    // DDP logger window per iteration, in one pass: each span belongs to the last iteration
    // starting at or before it (if it starts before that iteration ends). O(n log k).
    std::vector<std::optional<Nanos>> firstCommStart(iterations.size());
    std::vector<std::optional<Nanos>> backwardEnd(iterations.size());
    if (!iterations.empty()) {
      for (const Lane& lane : track.lanes) {
        if (lane.kind == LaneKind::kHost) continue;
        for (const Span& span : lane.spans) {
          bool bucketComm = isBucketCollective(span.category) && span.duration > Nanos(0);
          bool backward = span.category == Category::kBackward;
          if (!bucketComm && !backward) continue;
          auto it = std::upper_bound(iterations.begin(), iterations.end(), span.start,
                                     [](Nanos t, const Iteration& i) { return t < i.start; });
          if (it == iterations.begin()) continue;
          --it;
          if (span.start >= it->end()) continue;
          size_t k = static_cast<size_t>(it - iterations.begin());
          if (bucketComm && (!firstCommStart[k] || span.start < *firstCommStart[k])) {
            firstCommStart[k] = span.start;
          }
          if (backward && (!backwardEnd[k] || span.end() > *backwardEnd[k])) {
            backwardEnd[k] = span.end();
          }
        }
      }
    }
    for (size_t k = 0; k < iterations.size(); ++k) {
      const Iteration& iteration = iterations[k];
      IterationOverlap item;
      item.index = iteration.index;
      item.start = iteration.start;
      item.stepTime = iteration.duration;
      Nanos end = iteration.end();
      item.stats = makeOverlapStats(compute.lengthWithin(iteration.start, end),
                                    comm.lengthWithin(iteration.start, end),
                                    both.lengthWithin(iteration.start, end));
      if (firstCommStart[k] && backwardEnd[k]) {
        item.ddpLoggerOverlap = maxNanos(Nanos(0), *backwardEnd[k] - *firstCommStart[k]);
      }
      rank.iterations.push_back(item);
    }
    result.push_back(std::move(rank));
  }
  return result;
}

namespace {

double round2(double v) {
  return static_cast<double>(static_cast<int64_t>(v * 100.0 + (v >= 0 ? 0.5 : -0.5))) / 100.0;
}

nlohmann::json statsJson(const traces::OverlapStats& s) {
  return {{"compute_ns", s.compute.count()},
          {"comm_ns", s.comm.count()},
          {"overlapped_ns", s.overlapped.count()},
          {"exposed_comm_ns", s.exposedComm.count()},
          {"overlap_percent", round2(s.overlapPercent)},
          {"has_communication", s.hasCommunication}};
}

}  // namespace

nlohmann::json overlapJson(const std::string& tracePath, const std::vector<RankOverlap>& ranks) {
  nlohmann::json out;
  out["trace"] = tracePath;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : ranks) {
    nlohmann::json row = statsJson(r.total);
    row["rank"] = r.rank;
    if (r.kineto) row["hta_last_step_dropped"] = r.htaDroppedLastStep;
    nlohmann::json its = nlohmann::json::array();
    for (const auto& it : r.iterations) {
      nlohmann::json itRow = statsJson(it.stats);
      itRow["iteration"] = it.index;
      itRow["start_ns"] = it.start.count();
      itRow["step_ns"] = it.stepTime.count();
      if (it.ddpLoggerOverlap) itRow["ddp_logger_overlap_ns"] = it.ddpLoggerOverlap->count();
      its.push_back(std::move(itRow));
    }
    row["iterations"] = std::move(its);
    list.push_back(std::move(row));
  }
  out["ranks"] = std::move(list);
  return out;
}

}  // namespace ddpscope::traces
