#include "traces/run_comparison.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "traces/kineto_import.h"
#include "traces/overlap.h"

namespace ddpscope::traces {

namespace {

// Collectives that carry gradient buckets (as in overlap.cpp's DDP logger metric).
int64_t spanBytes(const Span& span) {
  if (auto bytes = span.args.getInt(kArgBytes)) return *bytes;
  if (auto nelems = span.args.getInt("In msg nelems")) {
    return *nelems * kinetoDtypeBytes(span.args.getString("dtype").value_or("Float")).value_or(4);
  }
  return 0;
}

// Sorted merge of two key-ordered lists into matched pairs and the two leftovers.
template <typename Key, typename Value, typename Matched>
void mergeByKey(const std::vector<std::pair<Key, Value>>& a,
                const std::vector<std::pair<Key, Value>>& b, std::vector<Matched>& matched,
                std::vector<Key>& onlyA, std::vector<Key>& onlyB) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      onlyA.push_back(a[i++].first);
    } else if (i == a.size() || b[j].first < a[i].first) {
      onlyB.push_back(b[j++].first);
    } else {
      matched.push_back(Matched{a[i].first, a[i].second, b[j].second});
      ++i;
      ++j;
    }
  }
}

}  // namespace

const char* comparedMetricName(ComparedMetric metric) {
  switch (metric) {
    case ComparedMetric::kStepTime:
      return "step time";
    case ComparedMetric::kForward:
      return "forward";
    case ComparedMetric::kBackward:
      return "backward";
    case ComparedMetric::kComm:
      return "comm";
    case ComparedMetric::kExposedComm:
      return "exposed comm";
    case ComparedMetric::kOverlapPercent:
      return "overlap %";
  }
  return "?";
}

double metricValue(const IterationMetrics& m, ComparedMetric metric) {
  switch (metric) {
    case ComparedMetric::kStepTime:
      return m.stepTime.toMillis();
    case ComparedMetric::kForward:
      return m.forward.toMillis();
    case ComparedMetric::kBackward:
      return m.backward.toMillis();
    case ComparedMetric::kComm:
      return m.comm.toMillis();
    case ComparedMetric::kExposedComm:
      return m.exposedComm.toMillis();
    case ComparedMetric::kOverlapPercent:
      return m.overlapPercent;
  }
  return 0;
}

Delta makeDelta(double a, double b) {
  Delta d;
  d.a = a;
  d.b = b;
  d.delta = b - a;
  if (a != 0) d.deltaPercent = 100.0 * (b - a) / std::fabs(a);
  return d;
}

Delta RunComparison::meanDelta(ComparedMetric metric) const {
  if (iterations.empty()) return makeDelta(0, 0);
  double sumA = 0;
  double sumB = 0;
  for (const IterationComparison& item : iterations) {
    sumA += metricValue(item.a, metric);
    sumB += metricValue(item.b, metric);
  }
  double n = static_cast<double>(iterations.size());
  return makeDelta(sumA / n, sumB / n);
}

RunMetrics computeRunMetrics(const Timeline& timeline) {
  RunMetrics out;
  std::vector<RankOverlap> overlap = computeOverlap(timeline);
  for (int rankIndex = 0; rankIndex < timeline.rankCount(); ++rankIndex) {
    const RankTrack& track = timeline.rank(rankIndex);
    const RankOverlap& rankOverlap = overlap[static_cast<size_t>(rankIndex)];

    // Iteration windows; a pseudo-iteration 0 over the device spans when there are none.
    struct Window {
      int64_t index;
      Nanos start;
      Nanos end;
      OverlapStats stats;
    };
    std::vector<Window> windows;
    for (const IterationOverlap& it : rankOverlap.iterations) {
      windows.push_back(Window{it.index, it.start, it.start + it.stepTime, it.stats});
    }
    if (windows.empty()) {
      std::optional<Nanos> first;
      std::optional<Nanos> last;
      for (const Lane& lane : track.lanes) {
        if (lane.kind == LaneKind::kHost) continue;
        for (const Span& span : lane.spans) {
          if (!first || span.start < *first) first = span.start;
          if (!last || span.end() > *last) last = span.end();
        }
      }
      if (!first) continue;  // no device spans: nothing to compare on this rank
      windows.push_back(Window{0, *first, *last, rankOverlap.total});
    }

    struct Extent {
      std::optional<Nanos> start;
      std::optional<Nanos> end;
      void add(const Span& span) {
        if (!start || span.start < *start) start = span.start;
        if (!end || span.end() > *end) end = span.end();
      }
      Nanos length() const { return start ? *end - *start : Nanos(0); }
    };
    std::vector<Extent> forward(windows.size());
    std::vector<Extent> backward(windows.size());
    // Bucket collectives per window, in start order (for the launch-ordinal fallback).
    std::vector<std::vector<const Span*>> collectives(windows.size());
    for (const Lane& lane : track.lanes) {
      if (lane.kind == LaneKind::kHost) continue;
      for (const Span& span : lane.spans) {
        bool fwd = span.category == Category::kForward;
        bool bwd = span.category == Category::kBackward;
        bool bucket = isBucketCollective(span.category);
        if (!fwd && !bwd && !bucket) continue;
        auto it = std::upper_bound(windows.begin(), windows.end(), span.start,
                                   [](Nanos t, const Window& w) { return t < w.start; });
        if (it == windows.begin()) continue;
        --it;
        if (span.start >= it->end && !(it->start == it->end && span.start == it->start)) continue;
        size_t k = static_cast<size_t>(it - windows.begin());
        if (fwd) forward[k].add(span);
        if (bwd) backward[k].add(span);
        if (bucket) collectives[k].push_back(&span);
      }
    }

    for (size_t k = 0; k < windows.size(); ++k) {
      const Window& w = windows[k];
      IterationMetrics m;
      m.start = w.start;
      m.stepTime = w.end - w.start;
      m.forward = forward[k].length();
      m.backward = backward[k].length();
      m.comm = w.stats.comm;
      m.exposedComm = w.stats.exposedComm;
      m.overlapped = w.stats.overlapped;
      m.overlapPercent = w.stats.overlapPercent;
      m.hasCommunication = w.stats.hasCommunication;
      out.iterations.emplace_back(IterationKey{track.rank, w.index}, m);

      std::vector<const Span*>& spans = collectives[k];
      std::stable_sort(spans.begin(), spans.end(),
                       [](const Span* x, const Span* y) { return x->start < y->start; });
      std::map<int64_t, BucketMetrics> perBucket;
      int64_t ordinal = 0;
      for (const Span* span : spans) {
        int64_t bucketId = span->args.getInt(kArgBucket).value_or(ordinal);
        ++ordinal;
        BucketMetrics& b = perBucket[bucketId];
        b.duration += span->duration;
        b.bytes += spanBytes(*span);
        ++b.collectives;
      }
      for (const auto& [bucketId, metrics] : perBucket) {
        out.buckets.emplace_back(BucketKey{track.rank, w.index, bucketId}, metrics);
      }
    }
  }
  auto byKey = [](const auto& x, const auto& y) { return x.first < y.first; };
  std::stable_sort(out.iterations.begin(), out.iterations.end(), byKey);
  std::stable_sort(out.buckets.begin(), out.buckets.end(), byKey);
  // Duplicate keys (two markers with one index on a rank) keep the first occurrence.
  auto sameKey = [](const auto& x, const auto& y) { return x.first == y.first; };
  out.iterations.erase(std::unique(out.iterations.begin(), out.iterations.end(), sameKey),
                       out.iterations.end());
  out.buckets.erase(std::unique(out.buckets.begin(), out.buckets.end(), sameKey),
                    out.buckets.end());
  return out;
}

RunComparison compareRuns(const Timeline& a, const Timeline& b) {
  RunMetrics ma = computeRunMetrics(a);
  RunMetrics mb = computeRunMetrics(b);
  RunComparison out;
  mergeByKey(ma.iterations, mb.iterations, out.iterations, out.iterationsOnlyInA,
             out.iterationsOnlyInB);
  mergeByKey(ma.buckets, mb.buckets, out.buckets, out.bucketsOnlyInA, out.bucketsOnlyInB);
  if (!out.iterations.empty()) {
    out.alignA = out.iterations.front().a.start;
    out.alignB = out.iterations.front().b.start;
  }
  return out;
}

}  // namespace ddpscope::traces
