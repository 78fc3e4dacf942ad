#include "cli/sim_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "api/simulation_json.h"
#include "base/strings.h"

namespace ddpscope::cli {

std::string formatDdpCosts(const sim::SimSummary& s) {
  char line[256];
  std::ostringstream o;
  const sim::DdpOverheads& t = s.overheads;
  const sim::DdpHostCosts& h = s.ddpHost;
  if (!t.any()) {
    o << "DDP host costs: not set for this cluster (its ddp_overheads are 0: unknown, not\n"
         "  measured); fit them from a trace with 'ddpscope calibrate'\n";
  } else {
    o << "DDP host costs per step ("
      << (s.hostProfile.empty() ? "cluster's ddp_overheads" : "host profile " + s.hostProfile)
      << "; hidden unless the host falls behind):\n";
    // Counts per step: means over the steady steps (fractional with no_sync()).
    auto term = [&](const char* label, double count, double us, Nanos total) {
      if (count == std::round(count)) {
        std::snprintf(line, sizeof(line), "  %-22s %5.0f x %8.1f us = %9.3f ms\n", label, count, us,
                      total.toMillis());
      } else {
        std::snprintf(line, sizeof(line), "  %-22s %5.2f x %8.1f us = %9.3f ms\n", label, count, us,
                      total.toMillis());
      }
      o << line;
    };
    const sim::SimSummary::DdpHostCounts& n = s.ddpHostPerStep;
    term("allreduce launches", n.launches, t.allreduceLaunchUs, h.allreduceLaunch);
    term("autograd hooks", n.hooks, t.gradHookUs, h.gradHook);
    term("copy-back launches", n.copyBacks, t.copyBackUs, h.copyBack);
    term("finalize waits", n.waits, t.finalizeWaitUs, h.finalizeWait);
    term("DDP forward wrapper", n.steps, t.stepOverheadUs, h.stepOverhead);
    if (n.broadcasts > 0) {
      term("buffer broadcasts", n.broadcasts, t.bufferSyncUs, h.bufferSync);
      term("buffer copies", n.buffers, t.bufferCopyUs, h.bufferCopy);
    }
    std::snprintf(line, sizeof(line), "  %-22s %12.3f ms   (compute stream waiting for the host)\n",
                  "host stall", s.hostStall.toMillis());
    o << line;
  }
  if (s.hostPerOp) {
    // The host's own pace (a host profile with per-op costs): does the GPU wait for it?
    const double stallShare = s.stepTime.count() > 0
                                  ? 100.0 * static_cast<double>(s.hostStall.count()) /
                                        static_cast<double>(s.stepTime.count())
                                  : 0.0;
    o << "host: profile " << s.hostProfile << " (dispatch per module, aten op, autograd node)\n";
    std::snprintf(line, sizeof(line),
                  "  %s: the GPU waits %.3f ms per step for the host's launches (%.1f %% of the "
                  "step)\n",
                  stallShare >= 5.0 ? "host-bound" : "GPU-bound", s.hostStall.toMillis(),
                  stallShare);
    o << line;
    std::snprintf(
        line, sizeof(line),
        "  %-22s %12.3f ms   (forward %.3f, backward %.3f, optimizer %.3f: the host's own "
        "work)\n",
        "host work per step", s.hostWork.total().toMillis(), s.hostWork.forward.toMillis(),
        s.hostWork.backward.toMillis(), s.hostWork.optimizer.toMillis());
    o << line;
  }
  const sim::SimSummary::CommDevice& d = s.commDevice;
  if (d.maxCtas > 0) {  // NCCL collectives: their CTAs on the device
    o << "NCCL CTAs on the device (per collective; they hold whole SMs while it runs):\n";
    if (d.smCount > 0) {
      std::snprintf(line, sizeof(line),
                    "  %-22s %2d .. %-2d of %d SMs: compute %.1f .. %.1f %% slower while one runs "
                    "(flat contention %.1f %%)\n",
                    "CTAs per call", d.minCtas, d.maxCtas, d.smCount, 100.0 * d.minContention,
                    100.0 * d.maxContention, 100.0 * d.flatContention);
    } else {
      std::snprintf(line, sizeof(line),
                    "  %-22s %2d .. %-2d (SM share not modelled: nccl_sm_contention off or "
                    "contention overridden; flat %.1f %%)\n",
                    "CTAs per call", d.minCtas, d.maxCtas, 100.0 * d.flatContention);
    }
    o << line;
  }
  const double pct = s.plainStep.count() > 0 ? 100.0 * static_cast<double>(s.ddpOverhead.count()) /
                                                   static_cast<double>(s.plainStep.count())
                                             : 0.0;
  std::snprintf(line, sizeof(line), "  %-22s %12.3f ms   (%s)\n", "plain training step",
                s.plainStep.toMillis(),
                s.plainSimulated ? "simulated without DDP: same host and device"
                                 : "forward + backward + optimizer kernels, no DDP");
  o << line;
  std::snprintf(line, sizeof(line), "  %-22s %12.3f ms   (%+.2f %% over plain training)\n",
                "DDP overhead", s.ddpOverhead.toMillis(), pct);
  o << line;
  return o.str();
}

std::string formatSimSummary(const api::SimulationRequest& request, const sim::WorldLayout& layout,
                             const sim::SimSummary& s) {
  char line[256];
  std::ostringstream o;
  const ddp::DdpConfig& d = request.options.ddp;
  o << request.model.name << " on " << request.cluster.name << ": " << layout.nodes << " node(s) x "
    << layout.gpusPerNode << " = " << layout.worldSize() << " ranks, bucket_cap_mb "
    << d.bucketCapMb << (d.findUnusedParameters ? ", find_unused" : "")
    << (d.staticGraph ? ", static_graph" : "")
    << (d.noSyncPeriod > 1 ? ", no_sync " + std::to_string(d.noSyncPeriod) : "")
    << (request.options.compile != sim::CompileMode::kNone
            ? ", compile " + std::string(sim::compileModeName(request.options.compile))
            : "")
    << ", " << s.workload.dtype << "\n";
  if (const std::string source = sim::allreduceTimeSource(request.cluster, layout);
      !source.empty()) {
    o << source << "\n";
  }
  o << sim::workloadText(s.workload);
  o << "results (steady state):\n";
  auto row = [&](const char* label, Nanos t, const std::string& extra = "") {
    std::snprintf(line, sizeof(line), "  %-22s %12.3f ms%s\n", label, t.toMillis(), extra.c_str());
    o << line;
  };
  row("step time (steady)", s.stepTime);
  row("first iteration", s.firstIteration);
  row("forward", s.forward);
  row("backward", s.backward);
  row("optimizer", s.optimizer);
  row("communication", s.comm);
  row("  overlapped", s.overlapped);
  row("  exposed", s.exposedComm);
  std::snprintf(line, sizeof(line), "  %-22s %12.2f %%   (HTA: |compute ∩ comm| / |comm|)\n",
                "overlap", s.overlapPercent);
  o << line;
  o << "  buckets                " << std::string(8, ' ') << s.numBuckets << " (";
  for (size_t i = 0; i < s.bucketBytes.size() && i < 8; ++i) {
    o << (i ? ", " : "") << formatBytes(s.bucketBytes[i]);
  }
  if (s.bucketBytes.size() > 8) o << ", ...";
  o << ")\n";
  if (request.options.strategy == sim::Strategy::kDdp) o << formatDdpCosts(s);
  return o.str();
}

}  // namespace ddpscope::cli
