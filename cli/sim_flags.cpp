#include "cli/sim_flags.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/strings.h"
#include "cli/common.h"
#include "sim/engine/workload.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"

namespace ddpscope::cli {

void addSimulationFlags(ArgParser& parser, bool sweep, bool computeFrom) {
  addModelFlags(parser);
  addClusterFlags(parser);
  if (computeFrom) {
    parser.option("compute-from", "RUN.json",
                  "measured per-layer compute from a run's trace instead of the roofline");
  }
  if (sweep) {
    parser.option("nodes", "N[,N...]", "node counts to sweep (default 1)")
        .option("world-size", "W[,W...]",
                "world sizes to sweep (multiples of GPUs per node; default: --nodes)")
        .option("bucket-cap-mb", "X[,X...]", "bucket caps in MiB (default 1,2,5,10,25,50,100,200)")
        .option("find-unused", "on|off|both", "find_unused_parameters (default off)");
  } else {
    parser.option("nodes", "N", "number of nodes (default 1)")
        .option("world-size", "W",
                "number of ranks (a multiple of the GPUs per node; default: one node's)");
  }
  addDdpFlags(parser, ddpFlagSet(sweep));
  parser.option("batch", "B", "samples per rank per step (default: the model's)")
      .option("seq-len", "T", "tokens per sample for transformers (default: the model's)")
      .option("image-size", "PX", "image side for vision models (default: the model's)")
      .option("dtype", "DT",
              "compute dtype: fp32, tf32, bf16, fp16 (default: the cluster's device: bf16 where "
              "it has bf16, fp16 on V100, fp32 on CPUs; fp32 with measured compute)")
      .option("iterations", "I", "iterations to simulate (default: enough for the steady state)")
      .flag("sync-batchnorm", "SyncBatchNorm: a blocking allreduce per BatchNorm layer")
      .option("contention", "F", "compute slowdown while a collective runs (default: cluster's)")
      .option("strategy", "S", "ddp (default) or dp (nn.DataParallel, one node)")
      .option("compile", sweep ? "MODE[,MODE...]" : "MODE",
              std::string("how a torch.compile'd model meets DDP: none (eager, default), "
                          "ddp-optimizer (forward split at bucket boundaries; hooks fire between "
                          "sub-graphs), whole-graph (optimize_ddp=False: every allreduce after "
                          "the backward), compiled-autograd (python reducer; Inductor buckets the "
                          "allreduces)") +
                  (sweep ? "; a list sweeps the modes" : ""))
      .option("compile-graph-overhead", "US",
              "host time of one compiled (sub-)graph, forward + backward call, in us (default " +
                  formatShortest(sim::kGraphCallOverhead.toMicros()) + ", measured)")
      .flag("all-ranks", "simulate every rank (jitter, stragglers) instead of one")
      .option("jitter", "PCT",
              "per-rank, per-iteration compute jitter in % (with --all-ranks; default 0)")
      .option("seed", "S", "seed for jitter (default 1)")
      .option("stragglers", "R:PCT[,...]",
              "ranks slower by PCT % (with --all-ranks; default none)");
}

StatusOr<std::vector<sim::CompileMode>> parseCompileModes(const std::string& text, bool list) {
  std::vector<sim::CompileMode> modes;
  for (const std::string& part : list ? splitString(text, ',') : std::vector<std::string>{text}) {
    const std::optional<sim::CompileMode> mode = sim::parseCompileMode(part);
    if (!mode) {
      return invalidArgument("--compile: expected " + std::string(sim::compileModeChoices()) +
                             (list ? " (or a comma list of them)" : "") + ", got '" + part + "'");
    }
    if (std::find(modes.begin(), modes.end(), *mode) == modes.end()) modes.push_back(*mode);
  }
  if (modes.empty()) return invalidArgument("--compile: expected a mode, got ''");
  return modes;
}

ddp::DdpSettingSet ddpFlagSet(bool sweep) {
  using ddp::DdpSetting;
  const ddp::DdpSettingSet all = ddp::DdpSettingSet::all();
  // A sweep varies bucket_cap_mb (and find_unused) itself; a bucket_cap_mb_list would override
  // every point of the cap axis, so sweep does not take it.
  return sweep ? all.without(DdpSetting::kBucketCapMb)
                     .without(DdpSetting::kFindUnused)
                     .without(DdpSetting::kBucketCapMbList)
               : all;
}

StatusOr<SimulationRequest> parseSimulationRequest(const ParsedArgs& args, bool sweep,
                                                   std::optional<std::string> replayTrace) {
  SimulationRequest req;
  const std::optional<std::string> computeFrom =
      replayTrace ? replayTrace : args.value("compute-from");
  req.computeFrom = computeFrom;
  sim::SimOptions& o = req.options;
  ASSIGN_OR_RETURN(o.inputs.batch, args.positiveInt("batch", 0));
  ASSIGN_OR_RETURN(o.inputs.seqLen, args.positiveInt("seq-len", 0));
  ASSIGN_OR_RETURN(o.inputs.imageSize, args.positiveInt("image-size", 0));
  if (auto dtype = args.value("dtype")) {
    if (*dtype != "fp32" && *dtype != "tf32" && *dtype != "bf16" && *dtype != "fp16") {
      return invalidArgument("--dtype: expected fp32, tf32, bf16 or fp16, got '" + *dtype + "'");
    }
    o.dtype = *dtype;
  }
  if (args.has("iterations")) {
    ASSIGN_OR_RETURN(int64_t it, args.positiveInt("iterations", 4));
    if (it > 10000) return invalidArgument("--iterations: expected at most 10000");
    o.iterations = static_cast<int>(it);
  } else {
    o.iterations = 0;  // automatic: sim::defaultIterations (past the rebuild, two no_sync cycles)
  }
  o.syncBatchNorm = args.has("sync-batchnorm");
  if (auto c = args.value("contention")) {
    auto v = parseDouble(*c);
    if (!v || *v < 0 || *v > 10) {
      return invalidArgument("--contention: expected a slowdown fraction in [0, 10], got '" + *c +
                             "'");
    }
    o.contentionSlowdown = *v;
  }
  std::string strategy = args.value("strategy").value_or("ddp");
  if (strategy == "ddp") {
    o.strategy = sim::Strategy::kDdp;
  } else if (strategy == "dp") {
    o.strategy = sim::Strategy::kDataParallel;
  } else {
    return invalidArgument("--strategy: expected ddp or dp, got '" + strategy + "'");
  }
  if (auto modes = args.value("compile")) {
    ASSIGN_OR_RETURN(const std::vector<sim::CompileMode> parsed, parseCompileModes(*modes, sweep));
    o.compile = parsed.front();  // sweep: the first; the caller sweeps the list
  }
  if (auto us = args.value("compile-graph-overhead")) {
    auto v = parseDouble(*us);
    if (!v || *v < 0 || *v > 1e6) {
      return invalidArgument(
          "--compile-graph-overhead: expected microseconds in [0, 1000000], got '" + *us + "'");
    }
    o.compileGraphOverhead = Nanos::fromMicrosDouble(*v);
  }
  o.allRanks = args.has("all-ranks");
  if (auto j = args.value("jitter")) {
    auto v = parseDouble(*j);
    if (!v || *v < 0 || *v >= 100) {
      return invalidArgument("--jitter: expected a percentage in [0, 100), got '" + *j + "'");
    }
    o.jitterPercent = *v;
  }
  ASSIGN_OR_RETURN(const int64_t seed, args.nonNegativeInt("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  if (auto s = args.value("stragglers")) {
    for (const std::string& part : splitString(*s, ',')) {
      auto colon = part.find(':');
      std::optional<int64_t> rank;
      std::optional<double> pct;
      if (colon != std::string::npos) {
        rank = parseInt64(part.substr(0, colon));
        pct = parseDouble(part.substr(colon + 1));
      }
      if (!rank || !pct || *rank < 0 || *pct <= 0) {
        return invalidArgument("--stragglers: expected RANK:PCT pairs like 3:20, got '" + part +
                               "'");
      }
      o.stragglers.emplace_back(static_cast<int>(*rank), *pct / 100.0);
    }
  }
  if ((o.jitterPercent > 0 || !o.stragglers.empty()) && !o.allRanks) {
    return invalidArgument("--jitter and --stragglers need --all-ranks");
  }
  if (!computeFrom) {
    ASSIGN_OR_RETURN(o.ddp, parseDdpFlags(args, ddpFlagSet(sweep)));
    ASSIGN_OR_RETURN(req.model, loadModelFromFlags(args));
    ASSIGN_OR_RETURN(req.cluster, loadClusterFromFlags(args));
    if (o.dtype.empty()) o.dtype = sim::defaultDtype(req.cluster.device);
    return req;
  }
  // Measured compute from a trace.
  std::optional<models::ModelSpec> model;
  if (args.has("model") || args.has("model-file")) {
    ASSIGN_OR_RETURN(model, loadModelFromFlags(args));
  }
  ASSIGN_OR_RETURN(sim::replay::LoadedProfile loaded,
                   sim::replay::loadProfile(*computeFrom, model));
  req.model = loaded.model;
  if (args.has("cluster") || args.has("cluster-file")) {
    ASSIGN_OR_RETURN(req.cluster, loadClusterFromFlags(args));
  } else {
    ASSIGN_OR_RETURN(req.cluster, sim::replay::selfCalibratedCluster(loaded.profile, loaded.model));
  }
  const sim::replay::RunSettings run = loaded.profile.settings;
  // replay: the flags change the run's own DDP settings; --compute-from: they start from
  // DDP's defaults like simulate's.
  ASSIGN_OR_RETURN(
      o.ddp, parseDdpFlags(args, ddpFlagSet(sweep), replayTrace ? run.ddp : ddp::DdpConfig()));
  if (o.inputs.batch == 0) o.inputs.batch = run.batchPerRank;
  if (o.inputs.seqLen == 0) o.inputs.seqLen = run.seqLen;
  if (o.inputs.imageSize == 0) o.inputs.imageSize = run.imageSize;
  if (!args.has("dtype")) o.dtype = "fp32";
  sim::replay::MeasuredComputeOptions mo;
  mo.contentionSlowdown = o.contentionSlowdown.value_or(req.cluster.contentionSlowdown);
  ASSIGN_OR_RETURN(std::unique_ptr<sim::replay::MeasuredComputeModel> compute,
                   sim::replay::MeasuredComputeModel::create(loaded.profile, loaded.model,
                                                             req.cluster.device, mo));
  req.compute = std::move(compute);
  req.measured = std::make_shared<const sim::replay::LoadedProfile>(std::move(loaded));
  return req;
}

StatusOr<sim::SimResult> runSimulation(const SimulationRequest& request,
                                       const sim::WorldLayout& layout,
                                       const sim::SimOptions& options) {
  return sim::simulate(request.model, request.cluster, layout, options, request.compute.get());
}

std::string formatDdpCosts(const sim::SimSummary& s) {
  char line[256];
  std::ostringstream o;
  const sim::DdpOverheads& t = s.overheads;
  const sim::DdpHostCosts& h = s.ddpHost;
  if (!t.any()) {
    o << "DDP host costs: not set for this cluster (its ddp_overheads are 0: unknown, not\n"
         "  measured); fit them from a trace with 'ddpscope calibrate'\n";
  } else {
    o << "DDP host costs per step (cluster's ddp_overheads; hidden unless the host falls "
         "behind):\n";
    auto term = [&](const char* label, int count, double us, Nanos total) {
      std::snprintf(line, sizeof(line), "  %-22s %5d x %8.1f us = %9.3f ms\n", label, count, us,
                    total.toMillis());
      o << line;
    };
    term("allreduce launches", h.launches, t.allreduceLaunchUs, h.allreduceLaunch);
    term("autograd hooks", h.hooks, t.gradHookUs, h.gradHook);
    term("copy-back launches", h.copyBacks, t.copyBackUs, h.copyBack);
    term("finalize waits", h.waits, t.finalizeWaitUs, h.finalizeWait);
    term("DDP forward wrapper", h.steps, t.stepOverheadUs, h.stepOverhead);
    std::snprintf(line, sizeof(line), "  %-22s %12.3f ms   (compute stream waiting for the host)\n",
                  "host stall", s.hostStall.toMillis());
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
  std::snprintf(line, sizeof(line),
                "  %-22s %12.3f ms   (forward + backward + optimizer kernels, no DDP)\n",
                "plain training step", s.plainStep.toMillis());
  o << line;
  std::snprintf(line, sizeof(line), "  %-22s %12.3f ms   (%+.2f %% over plain training)\n",
                "DDP overhead", s.ddpOverhead.toMillis(), pct);
  o << line;
  return o.str();
}

std::string formatSimSummary(const SimulationRequest& request, const sim::WorldLayout& layout,
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
