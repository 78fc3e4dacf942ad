#include "traces/overlap.h"

#include <algorithm>
#include <cstdio>

namespace ddpscope::traces {

namespace {

// Collectives that carry gradient buckets (DDP logger's "first bucket" communication).
bool isBucketCollective(Category category) {
  return isCommunication(category) && category != Category::kUsedMapAllreduce &&
         category != Category::kBroadcast;
}

}  // namespace

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
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
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
  std::vector<Interval> computeIntervals;
  std::vector<Interval> commIntervals;
  for (int rankIndex = 0; rankIndex < timeline.rankCount(); ++rankIndex) {
    const RankTrack& track = timeline.rank(rankIndex);
    computeIntervals.clear();
    commIntervals.clear();
    for (const Lane& lane : track.lanes) {
      if (lane.kind == LaneKind::kHost) continue;
      for (const Span& span : lane.spans) {
        if (isComputation(span.category)) {
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

}  // namespace ddpscope::traces
