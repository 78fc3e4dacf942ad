// Compute / communication overlap metrics, with Holistic Trace Analysis' exact definition
// (docs/spec/trace-formats.md §1.2) as the headline number.
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
// RankOverlap::total is the whole-trace aggregate, HTA's headline number. On PyTorch profiler
// (Kineto) traces — a rank whose device spans carry Kineto's "cat" (kernel, gpu_memcpy,
// gpu_memset, cuda_sync) — it is computed the way HTA 0.5.0 (pip holistictraceanalysis)
// computes get_comm_comp_overlap, so that the two agree to its 2 printed decimals:
//   - device rows are the spans with an integer "stream" ≥ 0 and "correlation" ≥ 0 (so
//     gpu_user_annotation ranges are not device rows; they have no stream);
//   - timestamps are HTA's µs rounding of ns-resolution traces: start → ceil(ts µs),
//     end → floor((ts + dur) µs) (HTA's round_down_time_stamps; a no-op on integer µs);
//   - iterations (HTA's Trace._filter_irrelevant_gpu_kernels): when the trace names two or
//     more distinct ProfilerStep ranges, only device rows launched (same "correlation") by a
//     host row that starts before the rank's last ProfilerStep starts are kept — the last
//     profiled step is dropped, everything before it (even before the first step) stays;
//     a rank without a ProfilerStep keeps no device rows;
//   - kernels are classified by HTA 0.5.0's own name rules (htaKernelClass below; they differ
//     from classifyGpuKernel, which follows HTA's newer main branch, only on "Stream Wait Event"
//     — compute in 0.5.0 — and on hip… / hccl… / …ncclKernel… names);
//   - the comm denominator is HTA's sum over merged groups, which keeps a sub-µs kernel that
//     the rounding turned negative (ceil(ts) > floor(end)) when it stands alone.
// Other traces (ddpscope's own) use every device span as recorded. Per-iteration rows are
// never filtered or rounded: they are the exact values inside each ProfilerStep window. Each
// iteration window (from the rank's kIteration spans) gets the same metrics with every interval
// clipped to the window, its step time, and DDP's logger metric (§1.3): backward-compute end −
// first bucket collective start, which is a window length, not an intersection.
//
// Complexity: O(n log n) per rank for the unions (sort + merge), O(log n) per iteration
// window (prefix sums over the merged intervals).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
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
  // Kineto device spans: total was computed with HTA's preprocessing (see above);
  // htaDroppedLastStep says whether its last-ProfilerStep filter applied.
  bool kineto = false;
  bool htaDroppedLastStep = false;
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
  // O(n log n); O(n) when they come sorted by start.
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

// HTA 0.5.0's kernel classes (hta/common/types.py, matched with re.match at the name's start):
// communication ^nccl; memory ^(hip)?Memcpy, ^(hip)?Memset, ^dma; computation unless the name
// starts with nccl / runFunction / cuda…LaunchKernel or contains Memcpy, Memset, dma or Sync.
enum class HtaKernelClass { kCommunication, kMemory, kComputation, kOther };
HtaKernelClass htaKernelClass(std::string_view name);

OverlapStats makeOverlapStats(Nanos compute, Nanos comm, Nanos overlapped);
// "87.50" (2 decimals, like HTA); "n/a" when there is no communication.
std::string formatPercent(const OverlapStats& stats);

// What `ddpscope overlap --json` prints for a trace: {"trace": tracePath, "ranks": [{rank,
// compute_ns, comm_ns, overlapped_ns, exposed_comm_ns, overlap_percent (2 decimals),
// has_communication, hta_last_step_dropped (profiler traces), iterations: [{iteration,
// start_ns, step_ns, the same times, ddp_logger_overlap_ns when known}]}]}.
nlohmann::json overlapJson(const std::string& tracePath, const std::vector<RankOverlap>& ranks);

}  // namespace ddpscope::traces
