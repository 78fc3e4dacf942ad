#include "sim/engine/replayer.h"

#include <cmath>
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
                   traces::Timeline* timeline, const HostModel& host, int smCount)
    : m_model(model),
      m_numRanks(numRanks),
      m_slowdown(1.0 + contention),
      m_smCount(smCount),
      m_timeline(timeline),
      m_hostAhead(host.runsAhead) {
  m_cursor.assign(static_cast<size_t>(numRanks), 0);
  m_host.assign(static_cast<size_t>(numRanks), 0);
  m_issueAt.assign(static_cast<size_t>(numRanks), 0);
  m_pos.assign(static_cast<size_t>(numRanks), 0);
  m_busyIdx.assign(static_cast<size_t>(numRanks), 0);
  m_hook.assign(static_cast<size_t>(numRanks), 0);
  m_iterStart.assign(static_cast<size_t>(numRanks), 0);
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

inline int64_t Replayer::scaled(int r, int64_t workNs) const {
  const double scale = m_scale[static_cast<size_t>(r)];
  if (scale == 1.0) return workNs;
  return std::llround(static_cast<double>(workNs) * scale);
}

inline int64_t Replayer::runKernel(int r, int64_t startNs, int64_t workNs, int known) {
  int& busyIdx = m_busyIdx[static_cast<size_t>(r)];
  while (busyIdx < known && m_collEnd[static_cast<size_t>(busyIdx)] <= startNs) ++busyIdx;
  if (workNs == 0 || (m_slowdown == 1.0 && m_smCount <= 0)) return startNs + workNs;
  double pos = static_cast<double>(startNs);
  double remaining = static_cast<double>(workNs);
  bool slowed = false;
  for (int k = busyIdx; k < known; ++k) {
    const double busyEnd = static_cast<double>(m_collEnd[static_cast<size_t>(k)]);
    if (busyEnd <= pos) continue;
    const double busyBegin = static_cast<double>(busyStart(r, k));
    if (busyBegin >= pos + remaining) break;
    slowed = true;
    if (busyBegin > pos) {
      remaining -= busyBegin - pos;
      pos = busyBegin;
    }
    const double slowdown = m_collSlowdown[static_cast<size_t>(k)];
    const double capacity = (busyEnd - pos) / slowdown;  // work done inside the interval
    if (remaining <= capacity) {
      pos += remaining * slowdown;
      remaining = 0;
      break;
    }
    remaining -= capacity;
    pos = busyEnd;
  }
  if (!slowed) return startNs + workNs;
  return std::llround(pos + remaining);
}

void Replayer::advance(int r, const Script& script, int stopAt, int known,
                       RankZeroRecorder& recorder) {
  if (m_hostAhead) {
    advanceRank<true>(r, script, stopAt, known, recorder);
  } else {
    advanceRank<false>(r, script, stopAt, known, recorder);
  }
}

template <bool kHostAhead>
void Replayer::advanceRank(int r, const Script& script, int stopAt, int known,
                           RankZeroRecorder& recorder) {
  // The rank's cursors live in locals while its ops run (written back at every exit): stores
  // through references to the member vectors would make the compiler reload them per op.
  int& pos = m_pos[static_cast<size_t>(r)];
  int64_t cursor = m_cursor[static_cast<size_t>(r)];
  int64_t host = m_host[static_cast<size_t>(r)];
  int64_t stall = 0;
  // (No lambda captures the cursors by reference: they would have to live in memory.)
  // A DDP host cost: the host does op.hostNs of work (when it is the stream: after the stream);
  // returns when it is done.
  auto chargeHost = [this, r](const Op& op, int64_t hostNs, int64_t cursorNs) {
    if (!kHostAhead) hostNs = std::max(hostNs, cursorNs);
    if (m_timeline) emitHostSpan(r, op, hostNs);
    return hostNs + op.hostNs;
  };

  const int numOps = static_cast<int>(script.ops.size());
  for (; pos < numOps; ++pos) {
    const Op& op = script.ops[static_cast<size_t>(pos)];
    switch (op.kind) {
      case OpKind::kIssue: {
        DDPSCOPE_CHECK_EQ(op.index, stopAt);
        // The collective is enqueued when the stream reaches the issue point and the host has
        // launched it.
        if (op.hostNs > 0) host = chargeHost(op, host, cursor);
        if (!kHostAhead && host > cursor) {
          stall += host - cursor;  // the launch holds the CPU rank
          cursor = host;
        }
        m_issueAt[static_cast<size_t>(r)] = std::max(cursor, host);
        m_cursor[static_cast<size_t>(r)] = cursor;
        m_host[static_cast<size_t>(r)] = host;
        if (r == 0) m_hostStallNs += stall;
        return;
      }
      case OpKind::kWait:
        DDPSCOPE_CHECK_LT(op.index, known);
        cursor = std::max(cursor, m_collEnd[static_cast<size_t>(op.index)]);
        if (!kHostAhead) host = cursor;  // the wait blocks the host
        if (op.hostNs > 0) {
          host = chargeHost(op, host, cursor);
          if (!kHostAhead) {
            stall += host - cursor;
            cursor = host;
          }
        }
        break;
      case OpKind::kHost: {
        // Host work the stream waits for: it starts when both are free.
        const int64_t durNs = scaled(r, op.workNs);
        const int64_t startNs = std::max(cursor, host);
        if (m_timeline) {
          m_timeline->addSpan({r, 2},
                              op.index == kHostGraphCall ? "compiled graph call"
                              : op.index == kDdpForwardWrapper
                                  ? "DDP forward wrapper (_pre_forward, _post_forward)"
                                  : "find_unused_parameters graph traversal",
                              Category::kOther, Nanos(startNs), Nanos(durNs),
                              {{std::string(traces::kArgIteration), m_iteration}});
        }
        if (op.index == kDdpForwardWrapper) {
          stall += startNs + durNs - cursor;  // the stream waits for the wrapper
        }
        cursor = startNs + durNs;
        host = cursor;
        break;
      }
      default: {
        if (kHostAhead) {
          // The host launches the kernel (after DDP's hook for a copy into a bucket).
          if (m_timeline && op.ddpHost) emitHostSpan(r, op, host);
          host += op.hostNs;
          if (host > cursor) {
            stall += host - cursor;
            cursor = host;
          }
        } else if (op.hostNs > 0) {
          host = chargeHost(op, host, cursor);
          stall += host - cursor;
          cursor = host;
        }
        const int64_t endNs = runKernel(r, cursor, scaled(r, op.workNs), known);
        const Category category = kernelCategory(op.kind);
        if (r == 0) recorder.add(category, Nanos(cursor), Nanos(endNs - cursor));
        if (op.kind == OpKind::kBackward) m_hook[static_cast<size_t>(r)] = endNs;
        if (m_timeline) {
          if (op.kind == OpKind::kCopy && op.bucket >= 0) {
            m_bucketHook[bucketHookIndex(r, op.bucket)] = m_hook[static_cast<size_t>(r)];
          }
          emitKernel(r, op, category, cursor, endNs);
        }
        cursor = endNs;
        if (!kHostAhead) host = endNs;
        break;
      }
    }
  }
  m_cursor[static_cast<size_t>(r)] = cursor;
  m_host[static_cast<size_t>(r)] = host;
  if (r == 0) m_hostStallNs += stall;
  DDPSCOPE_CHECK_EQ(stopAt, -1);
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
