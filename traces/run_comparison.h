// RunComparison: two runs (timelines A and B) compared by semantic keys, never by row index.
//
// Keys:
//   iteration : (rank id, iteration index)       — rank id from the timeline, index from the
//                                                  rank's kIteration spans (ProfilerStep#N)
//   bucket    : (rank id, iteration index, bucket id)
// A rank without iteration markers contributes one pseudo-iteration, index 0, spanning its
// device spans (first start → last end).
//
// Per iteration window [start, start + stepTime) of a rank, over device lanes (kCompute and
// kComm; host lanes are ignored, as in traces/overlap.h):
//   stepTime    : the window's length
//   forward     : first kForward start → last kForward end among spans starting in the window
//   backward    : the same for kBackward
//   comm, exposedComm, overlapped, overlapPercent: traces::computeOverlap's numbers for the
//                 window (HTA definition, intervals clipped to the window)
// Bucket collectives (communication other than the used-map allreduce and broadcasts) belong
// to the iteration whose window contains their start. Their bucket id is the span's "bucket"
// arg; without one (PyTorch profiler traces) it is the collective's launch ordinal within the
// iteration (0, 1, ...), which is the same key in both runs when both lack the arg. Several
// collectives with one key (PowerSGD's three parts) add up. Bytes: the "bytes" arg, else
// Kineto's "In msg nelems" × the size of "dtype".
//
// Deltas are B − A; the percentage is 100 · (B − A) / |A|, absent when A is 0.
// Matched keys are listed in key order; keys present in one run only are listed apart.
//
// Complexity: O(n log n) for n spans of both runs (computeOverlap's unions and sorting the
// keys); each span is assigned to its iteration by binary search.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "traces/timeline.h"

namespace ddpscope::traces {

struct IterationKey {
  int rank = 0;
  int64_t iteration = 0;
  auto operator<=>(const IterationKey&) const = default;
};

struct BucketKey {
  int rank = 0;
  int64_t iteration = 0;
  int64_t bucket = 0;
  auto operator<=>(const BucketKey&) const = default;
};

// One iteration of one rank, measured on one run.
struct IterationMetrics {
  Nanos start;  // window start (the compare view aligns runs here)
  Nanos stepTime;
  Nanos forward;
  Nanos backward;
  Nanos comm;
  Nanos exposedComm;
  Nanos overlapped;
  double overlapPercent = 0;
  bool hasCommunication = false;
};

// One bucket's collectives in one iteration of one rank, on one run.
struct BucketMetrics {
  Nanos duration;     // summed over the collectives with this key
  int64_t bytes = 0;  // summed; 0 when unknown
  int collectives = 0;
};

enum class ComparedMetric { kStepTime, kForward, kBackward, kComm, kExposedComm, kOverlapPercent };
inline constexpr int kComparedMetricCount = 6;
// "step time", "forward", "backward", "comm", "exposed comm", "overlap %".
const char* comparedMetricName(ComparedMetric metric);
// The metric's value: milliseconds for times, percent for kOverlapPercent.
double metricValue(const IterationMetrics& metrics, ComparedMetric metric);

struct Delta {
  double a = 0;
  double b = 0;
  double delta = 0;                    // b − a
  std::optional<double> deltaPercent;  // 100 · (b − a) / |a|; nullopt when a == 0
};
Delta makeDelta(double a, double b);

struct IterationComparison {
  IterationKey key;
  IterationMetrics a;
  IterationMetrics b;
  Delta delta(ComparedMetric metric) const {
    return makeDelta(metricValue(a, metric), metricValue(b, metric));
  }
};

struct BucketComparison {
  BucketKey key;
  BucketMetrics a;
  BucketMetrics b;
  // Durations in milliseconds.
  Delta delta() const { return makeDelta(a.duration.toMillis(), b.duration.toMillis()); }
};

struct RunComparison {
  std::vector<IterationComparison> iterations;  // matched, in key order
  std::vector<BucketComparison> buckets;        // matched, in key order
  std::vector<IterationKey> iterationsOnlyInA;
  std::vector<IterationKey> iterationsOnlyInB;
  std::vector<BucketKey> bucketsOnlyInA;
  std::vector<BucketKey> bucketsOnlyInB;
  // Each run's start of the first matched iteration (smallest key); zero when nothing matched.
  // Shifting run A by −alignA and run B by −alignB puts both at t = 0.
  Nanos alignA;
  Nanos alignB;

  // Mean of a metric over the matched iterations (all ranks), as a Delta.
  Delta meanDelta(ComparedMetric metric) const;
};

// Per-rank iteration metrics and bucket durations of one timeline (what compareRuns uses).
struct RunMetrics {
  std::vector<std::pair<IterationKey, IterationMetrics>> iterations;  // in key order
  std::vector<std::pair<BucketKey, BucketMetrics>> buckets;           // in key order
};
RunMetrics computeRunMetrics(const Timeline& timeline);

RunComparison compareRuns(const Timeline& a, const Timeline& b);

}  // namespace ddpscope::traces
