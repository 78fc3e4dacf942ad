// Compute / communication overlap metrics, with Holistic Trace Analysis' exact definition
// (trace-formats.md §1.2) as the headline number.
//
// Per rank, over the device-side lanes only (LaneKind kCompute and kComm; host lanes are CPU
// ranges and are ignored, as HTA ignores CPU work):
//   compute     = |∪ spans with isComputation(category)|  (forward, backward, optimizer, compute)
//   comm        = |∪ spans with isCommunication(category)| (allreduce, used-map allreduce,
//                 broadcast, allgather, reduce-scatter, other collectives)
//   overlapped  = |∪compute ∩ ∪comm|
//   exposedComm = comm − overlapped
//   overlap %   = 100 × overlapped / comm; 0 with hasCommunication = false when comm is 0.
// Memory spans (kCopy: memcpy / memset / bucket copies) count as neither, as in HTA; so do
// kIteration markers and kOther. The percentage keeps full precision; HTA rounds to 2 decimals,
// so round only when printing (formatPercent).
//
// RankOverlap::total is the whole-trace aggregate (HTA's number on the same events; HTA's own
// preprocessing may additionally drop the last profiler step). Each iteration window (from the
// rank's kIteration spans) gets the same metrics with every interval clipped to the window,
// its step time, and DDP's logger metric (§1.3): backward-compute end − first bucket
// collective start, which is a window length, not an intersection.
//
// Complexity: O(n log n) per rank for the unions (sort + merge), O(log n) per iteration
// window (prefix sums over the merged intervals).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "traces/timeline.h"

namespace ddpscope::traces {

struct OverlapStats {
  Nanos compute;                  // |∪ compute|
  Nanos comm;                     // |∪ comm|
  Nanos overlapped;               // |∪compute ∩ ∪comm|
  Nanos exposedComm;              // comm − overlapped
  double overlapPercent = 0;      // 100 × overlapped / comm, full precision
  bool hasCommunication = false;  // false: "no communication", overlapPercent is 0
};

struct IterationOverlap {
  int64_t index = 0;  // ProfilerStep#N
  Nanos start;
  Nanos stepTime;      // the iteration window's length
  OverlapStats stats;  // intervals clipped to [start, start + stepTime)
  // DDP logger's avg_backward_compute_comm_overlap_time for this iteration: end of the last
  // kBackward span − start of the first bucket collective (allreduce / allgather /
  // reduce-scatter / other, not the used-map allreduce or broadcasts) starting in the
  // window; clamped at 0. nullopt without backward compute or bucket collectives.
  std::optional<Nanos> ddpLoggerOverlap;
};

struct RankOverlap {
  int rank = 0;
  OverlapStats total;  // whole trace: the HTA number
  std::vector<IterationOverlap> iterations;
};

// One entry per rank of the timeline, in timeline order.
std::vector<RankOverlap> computeOverlap(const Timeline& timeline);

// ---- interval helpers (exposed for tests and for the GUI's range selection) ----

struct Interval {
  Nanos start;
  Nanos end;
  bool operator==(const Interval&) const = default;
};

// Sorted, disjoint, non-empty intervals with prefix sums of their lengths.
class IntervalSet {
 public:
  IntervalSet() = default;
  // Merges any intervals (overlapping, touching, unsorted); empty ones are dropped.
  // O(n log n).
  static IntervalSet unionOf(std::vector<Interval> intervals);
  // Intersection of two sets. O(n + m).
  static IntervalSet intersectionOf(const IntervalSet& a, const IntervalSet& b);

  const std::vector<Interval>& intervals() const { return m_intervals; }
  Nanos length() const { return m_prefixNs.empty() ? Nanos(0) : Nanos(m_prefixNs.back()); }
  // Length of the part inside [start, end). O(log n).
  Nanos lengthWithin(Nanos start, Nanos end) const;

 private:
  explicit IntervalSet(std::vector<Interval> disjoint);
  std::vector<Interval> m_intervals;
  std::vector<int64_t> m_prefixNs;  // m_prefixNs[i] = total length of intervals [0, i]
};

OverlapStats makeOverlapStats(Nanos compute, Nanos comm, Nanos overlapped);
// "87.50" (2 decimals, like HTA); "n/a" when there is no communication.
std::string formatPercent(const OverlapStats& stats);

}  // namespace ddpscope::traces
