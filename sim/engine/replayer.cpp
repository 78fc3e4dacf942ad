#include "sim/engine/replayer.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "sim/engine/compile_script.h"

namespace ddpscope::sim::internal {

using traces::Category;

namespace {

// Portable uniform in [0, 1) from the raw 64-bit output.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

Category kernelCategory(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return Category::kForward;
    case OpKind::kBackward:
      return Category::kBackward;
    case OpKind::kOptimizer:
      return Category::kOptimizer;
    default:
      return Category::kCopy;
  }
}

}  // namespace

// ---- jitter -------------------------------------------------------------------------------------

ComputeJitter::ComputeJitter(const SimOptions& options, int numRanks)
    : m_rng(options.seed), m_jitter(options.jitterPercent / 100.0) {
  if (options.allRanks) {
    m_stragglerFactor.assign(static_cast<size_t>(numRanks), 1.0);
    for (const auto& [rank, slowdown] : options.stragglers) {
      m_stragglerFactor[static_cast<size_t>(rank)] *= 1.0 + slowdown;
    }
  }
}

void ComputeJitter::draw(std::vector<double>& scales) {
  const int numRanks = static_cast<int>(m_stragglerFactor.size());
  for (int r = 0; r < numRanks; ++r) {
    const double u = uniform01(m_rng);  // drawn for every (rank, iteration), jitter or not
    scales[static_cast<size_t>(r)] =
        (1.0 + (2.0 * u - 1.0) * m_jitter) * m_stragglerFactor[static_cast<size_t>(r)];
  }
}

// ---- Replayer -----------------------------------------------------------------------------------

Replayer::Replayer(const models::ModelSpec& model, int numRanks, double contention,
                   traces::Timeline* timeline, const HostModel& host, int threads)
    : m_model(model),
      m_numRanks(numRanks),
      m_slowdown(1.0 + contention),
      m_timeline(timeline),
      m_hostAhead(host.runsAhead) {
  m_ranks.assign(static_cast<size_t>(numRanks), RankState{});
  // A trace is written in rank order by one thread; the chunks need ranks to share.
  if (!timeline && threads > 1 && numRanks >= 2 * threads) {
    m_pool = std::make_unique<ChunkPool>(threads);
  }
  m_scale.assign(static_cast<size_t>(numRanks), 1.0);
  if (m_timeline) {
    for (int r = 0; r < numRanks; ++r) {
      m_timeline->addRank(r, "rank " + std::to_string(r));
      m_timeline->addLane(r, "compute", traces::LaneKind::kCompute);
      m_timeline->addLane(r, "comm", traces::LaneKind::kComm);
      m_timeline->addLane(r, "host", traces::LaneKind::kHost);
    }
  }
}

namespace {

// What advanceRank reads besides the rank's own state, hoisted into one place so the per-op loop
// keeps it in registers.
struct KernelContext {
  const int64_t* collEnd;  // ends of the collectives timed so far
  const int64_t* busyCol;  // the rank's column of busyStart: busyCol[k * stride]
  size_t stride;           // ranks per busyStart row
  double slowdown;         // 1 + contention
  int known;               // collectives [0, known) are timed
};

// Below 2^53 ns (104 days) int64 ↔ double conversions and sums of two times are exact, so the
// integer fast paths of kernelEnd decide exactly as the double arithmetic of its loop would.
constexpr int64_t kExactDoubleNs = int64_t{1} << 53;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// The rank's first busy interval that may still overlap its cursor: collective idx, the first
// whose end is after the cursor. Its bounds are kept in the forms the fast paths compare with;
// without contention (or when idx == known) there is nothing to overlap and every bound is kNever.
struct BusyWindow {
  int32_t idx = 0;
  int64_t endNs = kNever;         // the collective's end (seek when a kernel starts at or after it)
  int64_t clearUntilNs = kNever;  // a kernel ending by then is not slowed: min(begin, 2^53 − 1)
  int64_t insideFromNs = kNever;  // a kernel starting at or after it starts inside the interval
                                  // (kNever when the end is past the exact range)
  double endDouble = 0;           // endNs as double
};

// Moves the window to the first collective that ends after `startNs`.
inline void seekBusyWindow(const KernelContext& c, BusyWindow& w, int64_t startNs) {
  if (c.slowdown == 1.0) return;  // no contention: the window stays empty
  while (w.idx < c.known && c.collEnd[w.idx] <= startNs) ++w.idx;
  if (w.idx < c.known) {
    const int64_t beginNs = c.busyCol[static_cast<size_t>(w.idx) * c.stride];
    w.endNs = c.collEnd[w.idx];
    w.clearUntilNs = std::min(beginNs, kExactDoubleNs - 1);
    w.insideFromNs = w.endNs < kExactDoubleNs ? beginNs : kNever;
    w.endDouble = static_cast<double>(w.endNs);
  } else {
    w.endNs = w.clearUntilNs = w.insideFromNs = kNever;
  }
}

// End of a kernel of `workNs` starting at `startNs`, slowed by `slowdown` inside the rank's busy
// intervals of collectives [w.idx, known) (ddp_simulator.h "Contention"). The loop integrates the
// work piecewise in double; the two fast paths in front of it are the loop's own first step for
// the common cases (the kernel ends before the next busy interval; it starts and ends inside one),
// decided with the same comparisons, so the result is the same to the bit.
inline int64_t kernelEnd(const KernelContext& c, BusyWindow& w, int64_t startNs, int64_t workNs) {
  if (startNs >= w.endNs) seekBusyWindow(c, w, startNs);
  const int64_t endNs = startNs + workNs;
  if (endNs <= w.clearUntilNs) return endNs;
  if (startNs >= w.insideFromNs) {
    // Starts inside interval idx: the loop's first step, where busyBegin ≤ pos < busyEnd (a
    // kernel of 0 ns ends where it starts, as the loop's early return has it).
    const double pos = static_cast<double>(startNs);
    const double remaining = static_cast<double>(workNs);
    const double capacity = (w.endDouble - pos) / c.slowdown;
    if (remaining <= capacity) return roundHalfAwayFromZero(pos + remaining * c.slowdown);
  }
  if (workNs == 0 || c.slowdown == 1.0) return endNs;
  double pos = static_cast<double>(startNs);
  double remaining = static_cast<double>(workNs);
  bool slowed = false;
  for (int k = w.idx; k < c.known; ++k) {
    const double busyEnd = static_cast<double>(c.collEnd[k]);
    if (busyEnd <= pos) continue;
    const double busyBegin = static_cast<double>(c.busyCol[static_cast<size_t>(k) * c.stride]);
    if (busyBegin >= pos + remaining) break;
    slowed = true;
    if (busyBegin > pos) {
      remaining -= busyBegin - pos;
      pos = busyBegin;
    }
    const double capacity = (busyEnd - pos) / c.slowdown;  // work done inside the interval
    if (remaining <= capacity) {
      pos += remaining * c.slowdown;
      remaining = 0;
      break;
    }
    remaining -= capacity;
    pos = busyEnd;
  }
  if (!slowed) return endNs;
  return roundHalfAwayFromZero(pos + remaining);
}

}  // namespace

int64_t Replayer::advance(int r, const Script& script, int stopAt, int known,
                          RankZeroRecorder& recorder) {
  const bool isScaled = m_scale[static_cast<size_t>(r)] != 1.0;
  // Rank 0 feeds the summary and a trace records every rank: both take the detailed path.
  if (r == 0 || m_timeline) {
    if (m_hostAhead) {
      return isScaled ? advanceRank<true, true, true>(r, script, stopAt, known, recorder)
                      : advanceRank<true, false, true>(r, script, stopAt, known, recorder);
    }
    return isScaled ? advanceRank<false, true, true>(r, script, stopAt, known, recorder)
                    : advanceRank<false, false, true>(r, script, stopAt, known, recorder);
  }
  if (m_hostAhead) {
    return isScaled ? advanceRank<true, true, false>(r, script, stopAt, known, recorder)
                    : advanceRank<true, false, false>(r, script, stopAt, known, recorder);
  }
  return isScaled ? advanceRank<false, true, false>(r, script, stopAt, known, recorder)
                  : advanceRank<false, false, false>(r, script, stopAt, known, recorder);
}

template <bool kHostAhead, bool kScaled, bool kDetail>
int64_t Replayer::advanceRank(int r, const Script& script, int stopAt, int known,
                              RankZeroRecorder& recorder) {
  // The rank's state lives in locals while its ops run (written back at every exit): stores
  // through a reference into m_ranks would make the compiler reload it per op.
  RankState& state = m_ranks[static_cast<size_t>(r)];
  int pos = state.pos;
  int64_t cursor = state.cursor;
  int64_t host = state.host;
  int64_t hook = state.hook;
  int64_t stall = 0;  // rank 0 only (kDetail)
  const double scale = m_scale[static_cast<size_t>(r)];
  const KernelContext context{m_collEnd.data(), m_busyStart.data() + r,
                              static_cast<size_t>(m_numRanks), m_slowdown, known};
  BusyWindow busy;
  busy.idx = state.busyIdx;
  seekBusyWindow(context, busy, cursor);
  // Jitter × straggler factor: a kernel of w ns nominal takes round(w · scale).
  auto scaled = [scale](int64_t workNs) {
    return kScaled ? roundHalfAwayFromZero(static_cast<double>(workNs) * scale) : workNs;
  };
  auto saveState = [&] {
    state.pos = pos;
    state.busyIdx = busy.idx;
    state.cursor = cursor;
    state.host = host;
    if (kDetail) {
      state.hook = hook;
      if (r == 0) m_hostStallNs += stall;
    }
  };
  // (No lambda captures the cursors by reference on the per-op path: they would have to live in
  // memory.) A DDP host cost: the host does op.hostNs of work (when it is the stream: after the
  // stream); returns when it is done.
  auto chargeHost = [this, r](const Op& op, int64_t hostNs, int64_t cursorNs) {
    if (!kHostAhead) hostNs = std::max(hostNs, cursorNs);
    if (kDetail && m_timeline) emitHostSpan(r, op, hostNs);
    return hostNs + op.hostNs;
  };

  const Op* ops = script.ops.data();
  const int numOps = static_cast<int>(script.ops.size());
  for (; pos < numOps; ++pos) {
    const Op& op = ops[pos];
    if (op.kind < OpKind::kHost) {  // a kernel on the compute stream
      if (kHostAhead) {
        // The host launches the kernel (after DDP's hook for a copy into a bucket).
        if (kDetail && m_timeline && op.ddpHost) emitHostSpan(r, op, host);
        host += op.hostNs;
        if (host > cursor) {
          if (kDetail) stall += host - cursor;
          cursor = host;
        }
      } else if (op.hostNs > 0) {
        host = chargeHost(op, host, cursor);
        if (kDetail) stall += host - cursor;
        cursor = host;
      }
      const int64_t endNs = kernelEnd(context, busy, cursor, scaled(op.workNs));
      if (kDetail) {
        const Category category = kernelCategory(op.kind);
        if (r == 0) recorder.add(category, Nanos(cursor), Nanos(endNs - cursor));
        if (op.kind == OpKind::kBackward) hook = endNs;
        if (m_timeline) {
          if (op.kind == OpKind::kCopy && op.bucket >= 0) {
            m_bucketHook[bucketHookIndex(r, op.bucket)] = hook;
          }
          emitKernel(r, op, category, cursor, endNs);
        }
      }
      cursor = endNs;
      if (!kHostAhead) host = endNs;
      continue;
    }
    switch (op.kind) {
      case OpKind::kIssue: {
        DDPSCOPE_CHECK_EQ(op.index, stopAt);
        // The collective is enqueued when the stream reaches the issue point and the host has
        // launched it.
        if (op.hostNs > 0) host = chargeHost(op, host, cursor);
        if (!kHostAhead && host > cursor) {
          if (kDetail) stall += host - cursor;  // the launch holds the CPU rank
          cursor = host;
        }
        saveState();
        return std::max(cursor, host);
      }
      case OpKind::kWait:
        DDPSCOPE_CHECK_LT(op.index, known);
        cursor = std::max(cursor, m_collEnd[static_cast<size_t>(op.index)]);
        if (!kHostAhead) host = cursor;  // the wait blocks the host
        if (op.hostNs > 0) {
          host = chargeHost(op, host, cursor);
          if (!kHostAhead) {
            if (kDetail) stall += host - cursor;
            cursor = host;
          }
        }
        break;
      default: {  // kHost
        // Host work the stream waits for: it starts when both are free.
        const int64_t durNs = scaled(op.workNs);
        const int64_t startNs = std::max(cursor, host);
        if (kDetail && m_timeline) {
          m_timeline->addSpan({r, 2},
                              op.index == kHostGraphCall ? "compiled graph call"
                              : op.index == kDdpForwardWrapper
                                  ? "DDP forward wrapper (_pre_forward, _post_forward)"
                                  : "find_unused_parameters graph traversal",
                              Category::kOther, Nanos(startNs), Nanos(durNs),
                              {{std::string(traces::kArgIteration), m_iteration}});
        }
        if (kDetail && op.index == kDdpForwardWrapper) {
          stall += startNs + durNs - cursor;  // the stream waits for the wrapper
        }
        cursor = startNs + durNs;
        host = cursor;
        break;
      }
    }
  }
  saveState();
  DDPSCOPE_CHECK_EQ(stopAt, -1);
  return 0;
}

void Replayer::emitHostSpan(int r, const Op& op, int64_t startNs) {
  const char* name = op.kind == OpKind::kIssue        ? "DDP allreduce launch"
                     : op.kind == OpKind::kWait       ? "DDP finalize wait"
                     : op.role == CopyRole::kCopyBack ? "DDP copy back launch"
                                                      : "DDP autograd hook";
  traces::Args args{{std::string(traces::kArgIteration), m_iteration}};
  if (op.kind == OpKind::kCopy && op.index >= 0) {
    args.append("param", static_cast<int64_t>(op.index));
  }
  if (op.bucket >= 0) {
    args.append(std::string(traces::kArgBucket), static_cast<int64_t>(op.bucket));
  }
  m_timeline->addSpan({r, 2}, name, Category::kOther, Nanos(startNs), Nanos(op.hostNs),
                      std::move(args));
}

void Replayer::emitKernel(int r, const Op& op, Category category, int64_t startNs, int64_t endNs) {
  traces::Args args{{std::string(traces::kArgIteration), m_iteration}};
  std::string name;
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kBackward:
      name = m_model.layers[static_cast<size_t>(op.index)].name;
      break;
    case OpKind::kOptimizer:
      name = "optimizer.step";
      break;
    default:
      name = copyRoleName(op.role);
      if (op.index >= 0) args.append("param", static_cast<int64_t>(op.index));
      if (op.bucket >= 0)
        args.append(std::string(traces::kArgBucket), static_cast<int64_t>(op.bucket));
      break;
  }
  m_timeline->addSpan({r, 0}, std::move(name), category, Nanos(startNs), Nanos(endNs - startNs),
                      std::move(args));
}

void Replayer::emitCollective(int r, int k, const CollectiveDesc& desc, int64_t startNs,
                              int64_t endNs) {
  std::string name;
  traces::Args args;
  switch (desc.kind) {
    case CollectiveKind::kBucket:
      name = "allreduce bucket " + std::to_string(desc.bucket);
      if (desc.parts > 1) name += " (PowerSGD " + std::string(1, "UPQ"[desc.part]) + ")";
      args.append(std::string(traces::kArgBucket), static_cast<int64_t>(desc.bucket));
      break;
    case CollectiveKind::kUsedMap:
      name = "allreduce used map";
      break;
    case CollectiveKind::kRebuildBroadcast:
      name = "broadcast rebuilt bucket indices";
      break;
    case CollectiveKind::kBufferBroadcast:
      name = "broadcast buffers";
      break;
    case CollectiveKind::kSyncBn:
      name = "SyncBatchNorm allreduce " + m_model.layers[static_cast<size_t>(desc.layer)].name;
      break;
  }
  const CollectiveEstimate& est = *desc.estimate;
  args.append(std::string(traces::kArgBytes), desc.bytes);
  args.append(std::string(traces::kArgIteration), m_iteration);
  args.append("algorithm", est.algorithm);
  args.append("protocol", est.protocol);
  args.append("busbw_gbps", est.busbwGBps);
  m_timeline->addSpan({r, 1}, std::move(name), desc.category(), Nanos(startNs),
                      Nanos(endNs - startNs), std::move(args));
  if (desc.kind == CollectiveKind::kBucket && desc.part == 0) {
    traces::Flow flow;
    flow.id = ++m_flowId;
    flow.name = "bucket ready";
    flow.from = {r, 0, Nanos(m_bucketHook[bucketHookIndex(r, desc.bucket)])};
    flow.to = {r, 1, Nanos(startNs)};
    m_timeline->addFlow(std::move(flow));
  }
  (void)k;
}

}  // namespace ddpscope::sim::internal
