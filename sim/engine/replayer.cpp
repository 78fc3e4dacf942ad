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
                   traces::Timeline* timeline, const HostModel& host, int smCount, int threads)
    : m_model(model),
      m_numRanks(numRanks),
      m_slowdown(1.0 + contention),
      m_smCount(smCount),
      m_timeline(timeline),
      m_hostAhead(host.runsAhead),
      m_hostPerOp(host.profile.perOp()) {
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
      m_timeline->addLane(r, std::string(traces::kMainThreadLane), traces::LaneKind::kHost);
      m_timeline->addLane(r, std::string(traces::kAutogradThreadLane), traces::LaneKind::kHost);
    }
    m_issueHost.assign(static_cast<size_t>(numRanks), -1);
  }
}

int64_t Replayer::advanceOne(int r, const Script& script, int stopAt, int known,
                             RankZeroRecorder& recorder) {
  const bool isScaled = m_scale[static_cast<size_t>(r)] != 1.0;
  int64_t launchNs = 0;
  // Rank 0 feeds the summary and a trace records every rank: both take the detailed path.
  if (r == 0 || m_timeline) {
    if (m_hostAhead) {
      isScaled ? advanceLanes<true, true, true, 1>(r, script, stopAt, known, recorder, &launchNs)
               : advanceLanes<true, false, true, 1>(r, script, stopAt, known, recorder, &launchNs);
    } else {
      isScaled ? advanceLanes<false, true, true, 1>(r, script, stopAt, known, recorder, &launchNs)
               : advanceLanes<false, false, true, 1>(r, script, stopAt, known, recorder, &launchNs);
    }
  } else if (m_hostAhead) {
    isScaled ? advanceLanes<true, true, false, 1>(r, script, stopAt, known, recorder, &launchNs)
             : advanceLanes<true, false, false, 1>(r, script, stopAt, known, recorder, &launchNs);
  } else {
    isScaled ? advanceLanes<false, true, false, 1>(r, script, stopAt, known, recorder, &launchNs)
             : advanceLanes<false, false, false, 1>(r, script, stopAt, known, recorder, &launchNs);
  }
  return launchNs;
}

void Replayer::advanceBatch(int r, const Script& script, int stopAt, int known,
                            RankZeroRecorder& recorder, int64_t* launchOut) {
  bool isScaled = false;
  for (int l = 0; l < kLanes; ++l) isScaled |= m_scale[static_cast<size_t>(r + l)] != 1.0;
  if (m_hostAhead) {
    isScaled
        ? advanceLanes<true, true, false, kLanes>(r, script, stopAt, known, recorder, launchOut)
        : advanceLanes<true, false, false, kLanes>(r, script, stopAt, known, recorder, launchOut);
  } else {
    isScaled
        ? advanceLanes<false, true, false, kLanes>(r, script, stopAt, known, recorder, launchOut)
        : advanceLanes<false, false, false, kLanes>(r, script, stopAt, known, recorder, launchOut);
  }
}

template <bool kHostAhead, bool kScaled, bool kDetail, int kN>
void Replayer::advanceLanes(int r, const Script& script, int stopAt, int known,
                            RankZeroRecorder& recorder, int64_t* launchOut) {
  static_assert(kN == 1 || !kDetail, "only a single rank is replayed in detail");
  // The ranks' state lives in locals while their ops run (written back at every exit): stores
  // through a reference into m_ranks would make the compiler reload it per op. Lane l is rank
  // r + l; the lanes stand at the same op (they ran the same script to the same collective).
  const int pos0 = m_ranks[static_cast<size_t>(r)].pos;
  int pos = pos0;
  int64_t cursor[kN];
  int64_t host[kN];
  double scale[kN];
  KernelContext context[kN] = {};
  BusyWindow busy[kN] = {};
  for (int l = 0; l < kN; ++l) {
    const RankState& state = m_ranks[static_cast<size_t>(r + l)];
    DDPSCOPE_CHECK_EQ(state.pos, pos0);
    cursor[l] = state.cursor;
    host[l] = state.host;
    scale[l] = m_scale[static_cast<size_t>(r + l)];
    context[l] = KernelContext{
        m_collEnd.data(),      m_busyStart.data() + r + l,         static_cast<size_t>(m_numRanks),
        m_collSlowdown.data(), m_slowdown != 1.0 || m_smCount > 0, known};
    busy[l].idx = state.busyIdx;
    seekBusyWindow(context[l], busy[l], cursor[l]);
  }
  int64_t hook = m_ranks[static_cast<size_t>(r)].hook;  // kDetail only
  int64_t stall = 0;                                    // rank 0 only (kDetail)
  // Jitter × straggler factor: a kernel of w ns nominal takes round(w · scale).
  auto scaled = [](double laneScale, int64_t workNs) {
    return kScaled ? roundHalfAwayFromZero(static_cast<double>(workNs) * laneScale) : workNs;
  };
  auto saveState = [&] {
    for (int l = 0; l < kN; ++l) {
      RankState& state = m_ranks[static_cast<size_t>(r + l)];
      state.pos = pos;
      state.busyIdx = busy[l].idx;
      state.cursor = cursor[l];
      state.host = host[l];
    }
    if (kDetail) {
      m_ranks[static_cast<size_t>(r)].hook = hook;
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
      // Unrolled: the lanes' independent chains sit side by side in the loop body.
#pragma GCC unroll 8
      for (int l = 0; l < kN; ++l) {
        if (kHostAhead) {
          // The host launches the kernel (after DDP's hook for a copy into a bucket).
          if (kDetail && m_timeline && (op.ddpHost || (m_hostPerOp && op.hostNs > 0))) {
            emitHostSpan(r, op, host[l]);
          }
          host[l] += op.hostNs;
          if (host[l] > cursor[l]) {
            if (kDetail) stall += host[l] - cursor[l];
            cursor[l] = host[l];
          }
        } else if (op.hostNs > 0) {
          host[l] = chargeHost(op, host[l], cursor[l]);
          if (kDetail) stall += host[l] - cursor[l];
          cursor[l] = host[l];
        }
        const int64_t endNs =
            kernelEnd(context[l], busy[l], cursor[l], scaled(scale[l], op.workNs));
        if (kDetail) {
          const Category category = kernelCategory(op.kind);
          if (r == 0) recorder.add(category, Nanos(cursor[l]), Nanos(endNs - cursor[l]));
          if (op.kind == OpKind::kBackward) hook = endNs;
          if (m_timeline) {
            if (op.kind == OpKind::kCopy && op.bucket >= 0) {
              m_bucketHook[bucketHookIndex(r, op.bucket)] = hook;
            }
            emitKernel(r, op, category, cursor[l], endNs, kHostAhead ? host[l] : -1);
          }
        }
        cursor[l] = endNs;
        if (!kHostAhead) host[l] = endNs;
      }
      continue;
    }
    switch (op.kind) {
      case OpKind::kIssue: {
        DDPSCOPE_CHECK_EQ(op.index, stopAt);
        // The collective is enqueued when the stream reaches the issue point and the host has
        // launched it.
        for (int l = 0; l < kN; ++l) {
          if (op.hostNs > 0) host[l] = chargeHost(op, host[l], cursor[l]);
          if (!kHostAhead && host[l] > cursor[l]) {
            if (kDetail) stall += host[l] - cursor[l];  // the launch holds the CPU rank
            cursor[l] = host[l];
          }
          launchOut[l] = std::max(cursor[l], host[l]);
          if (kDetail && m_timeline)
            m_issueHost[static_cast<size_t>(r)] = kHostAhead ? host[l] : -1;
        }
        saveState();
        return;
      }
      case OpKind::kWait:
        DDPSCOPE_CHECK_LT(op.index, known);
        for (int l = 0; l < kN; ++l) {
          cursor[l] = std::max(cursor[l], m_collEnd[static_cast<size_t>(op.index)]);
          if (!kHostAhead) host[l] = cursor[l];  // the wait blocks the host
          if (op.hostNs > 0) {
            host[l] = chargeHost(op, host[l], cursor[l]);
            if (!kHostAhead) {
              if (kDetail) stall += host[l] - cursor[l];
              cursor[l] = host[l];
            }
          }
        }
        break;
      default: {  // kHost
        if (op.index == kStepHost) {
          // The step's own host work: the host does it, the stream does not wait for it.
          for (int l = 0; l < kN; ++l) {
            const int64_t startNs = kHostAhead ? host[l] : std::max(cursor[l], host[l]);
            if (kDetail && m_timeline) {
              m_timeline->addSpan({r, kMainLane}, "training step (zero_grad, loss, loop)",
                                  Category::kOther, Nanos(startNs), Nanos(op.workNs),
                                  {{std::string(traces::kArgIteration), m_iteration}});
            }
            host[l] = startNs + op.workNs;
            if (!kHostAhead) cursor[l] = host[l];
          }
          break;
        }
        // Host work the stream waits for: it starts when both are free.
        for (int l = 0; l < kN; ++l) {
          const int64_t durNs = scaled(scale[l], op.workNs);
          const int64_t startNs = std::max(cursor[l], host[l]);
          if (kDetail && m_timeline) {
            m_timeline->addSpan({r, kMainLane},
                                op.index == kHostGraphCall ? "compiled graph call"
                                : op.index == kDdpForwardWrapper
                                    ? "DDP forward wrapper (_pre_forward, _post_forward)"
                                    : "find_unused_parameters graph traversal",
                                Category::kOther, Nanos(startNs), Nanos(durNs),
                                {{std::string(traces::kArgIteration), m_iteration}});
          }
          if (kDetail && op.index == kDdpForwardWrapper) {
            stall += startNs + durNs - cursor[l];  // the stream waits for the wrapper
          }
          cursor[l] = startNs + durNs;
          host[l] = cursor[l];
        }
        break;
      }
    }
  }
  saveState();
  DDPSCOPE_CHECK_EQ(stopAt, -1);
  for (int l = 0; l < kN; ++l) launchOut[l] = 0;
}

int Replayer::hostLaneOf(const Op& op) {
  switch (op.kind) {
    case OpKind::kBackward:
    case OpKind::kCopy:
    case OpKind::kIssue:
    case OpKind::kWait:
      return kAutogradLane;
    default:
      return kMainLane;
  }
}

void Replayer::emitHostSpan(int r, const Op& op, int64_t startNs) {
  std::string name = op.kind == OpKind::kIssue        ? "DDP allreduce launch"
                     : op.kind == OpKind::kWait       ? "DDP finalize wait"
                     : op.role == CopyRole::kCopyBack ? "DDP copy back launch"
                                                      : "DDP autograd hook";
  if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
    name = m_model.layers[static_cast<size_t>(op.index)].name +
           (op.kind == OpKind::kForward ? " (dispatch)" : " (autograd)");
  } else if (op.kind == OpKind::kOptimizer) {
    name = "optimizer.step (dispatch)";
  }
  traces::Args args{{std::string(traces::kArgIteration), m_iteration}};
  if (op.kind == OpKind::kCopy && op.index >= 0) {
    args.append("param", static_cast<int64_t>(op.index));
  }
  if (op.bucket >= 0) {
    args.append(std::string(traces::kArgBucket), static_cast<int64_t>(op.bucket));
  }
  m_timeline->addSpan({r, hostLaneOf(op)}, name, Category::kOther, Nanos(startNs), Nanos(op.hostNs),
                      std::move(args));
}

void Replayer::emitKernel(int r, const Op& op, Category category, int64_t startNs, int64_t endNs,
                          int64_t launchNs) {
  traces::Args args{{std::string(traces::kArgIteration), m_iteration}};
  if (launchNs >= 0) {
    args.append(std::string(traces::kArgLaunchNs), launchNs);
    args.append(std::string(traces::kArgLaunchLane), static_cast<int64_t>(hostLaneOf(op)));
  }
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
  if (const int64_t launchNs = m_issueHost[static_cast<size_t>(r)]; launchNs >= 0) {
    // DDP's bucket and used-map allreduces are launched from its hooks (autograd's thread); the
    // broadcasts and SyncBatchNorm's allreduce from the forward (the main thread).
    const bool hook = desc.kind == CollectiveKind::kBucket || desc.kind == CollectiveKind::kUsedMap;
    args.append(std::string(traces::kArgLaunchNs), launchNs);
    args.append(std::string(traces::kArgLaunchLane),
                static_cast<int64_t>(hook ? kAutogradLane : kMainLane));
  }
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
