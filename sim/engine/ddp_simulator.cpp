// The simulator's entry: validates the options, builds the model facts and one Reducer-driven
// script builder per usage class (script.h), then per iteration writes the scripts and times
// them (replayer.h); rank 0's numbers become the summary (accounting.h).
#include "sim/engine/ddp_simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddp/bucket_plan.h"
#include "ddp/ddp_settings.h"
#include "ddp/reducer.h"
#include "sim/engine/accounting.h"
#include "sim/engine/compile_script.h"
#include "sim/engine/replayer.h"
#include "sim/engine/script.h"
#include "traces/args_json.h"

namespace ddpscope::sim {

using internal::CollectiveDesc;
using internal::ComputeJitter;
using internal::EstimateCache;
using internal::ModelFacts;
using internal::RankZeroRecorder;
using internal::Replayer;
using internal::Script;
using internal::ScriptBuilder;
using internal::UsageClass;

int minIterations(const ddp::DdpConfig& config) {
  const int64_t k = std::max<int64_t>(config.noSyncPeriod, 1);
  return static_cast<int>(ddp::rebuildIteration(config) + k);
}

double collectiveContention(double contention, int smCount, int ctas) {
  if (smCount <= 0 || ctas <= 0) return contention;
  const int held = std::min(ctas, smCount - 1);
  return std::max(contention, static_cast<double>(held) / static_cast<double>(smCount - held));
}

int defaultIterations(const ddp::DdpConfig& config) {
  const int64_t k = std::max<int64_t>(config.noSyncPeriod, 1);
  return static_cast<int>(std::max<int64_t>(4, ddp::rebuildIteration(config) + 2 * k));
}

namespace {

Status validateOptions(const models::ModelSpec& model, const WorldLayout& layout,
                       const SimOptions& options, double contention) {
  if (model.params.empty()) {
    return invalidArgument("model '" + model.name + "' has no trainable parameters");
  }
  if (!model.hasLayers()) {
    return invalidArgument("model '" + model.name +
                           "' has no layers: the simulator needs per-layer compute costs");
  }
  if (layout.nodes < 1 || layout.gpusPerNode < 1) {
    return invalidArgument("world layout: expected at least 1 node and 1 rank per node, got " +
                           std::to_string(layout.nodes) + " x " +
                           std::to_string(layout.gpusPerNode));
  }
  if (!(contention >= 0) || !std::isfinite(contention)) {
    return invalidArgument("contention slowdown: expected a fraction >= 0, got " +
                           std::to_string(contention));
  }
  if (!(options.jitterPercent >= 0 && options.jitterPercent < 100)) {
    return invalidArgument("jitter: expected a percentage in [0, 100), got " +
                           std::to_string(options.jitterPercent));
  }
  if (!options.allRanks && (options.jitterPercent != 0 || !options.stragglers.empty())) {
    return invalidArgument(
        "jitter and stragglers need all-ranks mode (the symmetric fast path simulates rank 0 "
        "only)");
  }
  for (const auto& [rank, slowdown] : options.stragglers) {
    if (rank < 0 || rank >= layout.worldSize()) {
      return invalidArgument("straggler rank " + std::to_string(rank) + " out of range [0, " +
                             std::to_string(layout.worldSize()) + ")");
    }
    if (!(slowdown > -1) || !std::isfinite(slowdown)) {
      return invalidArgument("straggler slowdown: expected a fraction > -1, got " +
                             std::to_string(slowdown));
    }
  }
  return Status::ok();
}

Status validateHostModel(const HostModel& host) {
  const HostProfile& p = host.profile;
  auto check = [](const std::string& name, double value) -> Status {
    if (!(value >= 0 && value <= 1e6)) {
      return invalidArgument(name + ": expected a number of µs in [0, 1e6], got " +
                             std::to_string(value));
    }
    return Status::ok();
  };
  for (const auto& [key, field] : ddpOverheadTerms()) {
    RETURN_IF_ERROR(check(std::string("ddp_overheads.") + key, p.ddp.*field));
  }
  for (const HostTerm& term : hostProfileTerms()) {
    RETURN_IF_ERROR(check(std::string("host_profile.") + term.key, p.*term.field));
  }
  if (host.kernelLaunch < Nanos::zero() || host.kernelLaunch > Nanos::fromMicros(1000000)) {
    return invalidArgument("host kernel launch time: expected 0 to 1 s, got " +
                           std::to_string(host.kernelLaunch.count()));
  }
  return Status::ok();
}

}  // namespace

LayerHostUs layerHostUs(const HostProfile& p, const models::LayerSpec& layer, bool autocast) {
  if (!p.perOp()) return {};
  const models::HostOps ops = models::hostOps(layer, autocast);
  return {(ops.moduleCall ? p.moduleUs : 0.0) + ops.forward * p.forwardOpUs +
              ops.forwardLaunches * p.launchUs,
          ops.backward * p.backwardNodeUs + ops.backwardLaunches * p.launchUs +
              static_cast<double>(layer.params.size()) * p.accumulateGradUs};
}

namespace {

// The host costs in ns the scripts charge (script.h HostCosts): DDP's terms, and with a profile's
// per-op terms each layer's dispatch (models::hostOps under the run's autocast), the step's own
// work and the optimizer step. Compiled runs keep kernel launches (their graphs' host cost is
// compile_mode.h's).
ScriptBuilder::HostCosts hostCostsNs(const HostModel& host, const models::ModelSpec& model,
                                     const ddp::DdpConfig& config, bool compiled) {
  const HostProfile& p = host.profile;
  const DdpOverheads& o = p.ddp;
  auto ns = [](double us) { return static_cast<int32_t>(std::llround(us * 1000.0)); };
  ScriptBuilder::HostCosts costs;
  costs.allreduceLaunch = ns(o.allreduceLaunchUs);
  costs.gradHook = ns(o.gradHookUs);
  costs.copyBack = ns(o.copyBackUs);
  costs.finalizeWait = ns(o.finalizeWaitUs);
  costs.stepOverhead = std::llround(o.stepOverheadUs * 1000.0);
  if (config.broadcastBuffers && !model.buffers.empty()) {
    // One flatten, broadcast call and unflatten per group of one dtype, one copy per buffer.
    costs.broadcasts = static_cast<int32_t>(
        ddp::coalescedBroadcastBytes(ddp::buffersAsTensors(model.buffers)).size());
    costs.buffers = static_cast<int32_t>(model.buffers.size());
    costs.bufferSync = std::llround(o.bufferSyncUs * 1000.0 * costs.broadcasts);
    costs.bufferCopy = std::llround(o.bufferCopyUs * 1000.0 * costs.buffers);
  }
  costs.kernelLaunch = host.runsAhead ? static_cast<int32_t>(host.kernelLaunch.count()) : 0;
  if (!p.perOp() || compiled) return costs;
  costs.kernelLaunch = 0;  // the per-op costs include the launches
  for (const models::LayerSpec& layer : model.layers) {
    const LayerHostUs us = layerHostUs(p, layer, config.autocast);
    costs.forward.push_back(ns(us.forward));
    costs.backward.push_back(ns(us.backward));
  }
  costs.step = std::llround(p.stepUs * 1000.0);
  costs.optimizer = ns(p.optimizerUs);
  return costs;
}

void writeMetadata(traces::Timeline& timeline, const Workload& workload, const SimOptions& options,
                   int iterations, double contention) {
  timeline.setName(workload.model + " DDP simulation");
  traces::Args& meta = timeline.mutableMetadata();
  // The workload (workload.h), its DDP settings under their canonical keys: what replay reads.
  for (const auto& [key, value] : traces::argsFromJson(workloadMetadata(workload))) {
    meta.set(key, value);
  }
  meta.set("iterations", static_cast<int64_t>(iterations));
  meta.set("contention", contention);
  meta.set("sync_batchnorm", static_cast<int64_t>(options.syncBatchNorm));
  meta.set("all_ranks", static_cast<int64_t>(options.allRanks));
  if (options.allRanks) {
    meta.set("jitter_percent", options.jitterPercent);
    meta.set("seed", static_cast<int64_t>(options.seed));
  }
}

// SimSummary::commDevice over the steady iterations (summary.firstSteadyIteration onwards).
void summarizeCommDevice(SimSummary& summary, int smCount, double contention,
                         const std::vector<std::pair<int, int>>& ctasPerIteration) {
  SimSummary::CommDevice& d = summary.commDevice;
  d.smCount = smCount;
  d.flatContention = contention;
  for (size_t i = 0; i < ctasPerIteration.size(); ++i) {
    const auto [fewest, most] = ctasPerIteration[i];
    if (static_cast<int64_t>(i) + 1 < summary.firstSteadyIteration || most == 0) continue;
    d.minCtas = d.maxCtas == 0 ? fewest : std::min(d.minCtas, fewest);
    d.maxCtas = std::max(d.maxCtas, most);
  }
  d.minContention = collectiveContention(contention, smCount, d.minCtas);
  d.maxContention = collectiveContention(contention, smCount, d.maxCtas);
}

// Threads for the all-ranks replay: below ~1,000 ranks a collective's share of work per thread
// (ranks × ops between two issues) is too small to pay for the fork/join.
int replayThreads(const SimOptions& options, int numRanks) {
  constexpr int kMinRanksForThreads = 1024;
  if (!options.allRanks || options.recordTrace || numRanks < kMinRanksForThreads) return 1;
  const unsigned threads =
      options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<unsigned>(threads, 64));
}

}  // namespace

StatusOr<SimResult> simulateDdp(const models::ModelSpec& model, const WorldLayout& layout,
                                const SimOptions& options, const ComputeModel& compute,
                                const CommModel& comm, double contentionSlowdown) {
  RETURN_IF_ERROR(validateOptions(model, layout, options, contentionSlowdown));
  ddp::DdpConfig config = options.ddp;
  config.worldSize = layout.worldSize();  // options.ddp was validated where it entered
  const int minIters = minIterations(config);
  int iterations = options.iterations;
  if (iterations == 0) {
    iterations = defaultIterations(config);
  } else if (iterations < minIters) {
    return invalidArgument("iterations: expected at least " + std::to_string(minIters) +
                           " to reach the steady state (past the bucket rebuild and one no_sync "
                           "period), got " +
                           std::to_string(iterations));
  }

  ASSIGN_OR_RETURN(
      const internal::CompilePlan compilePlan,
      internal::makeCompilePlan(model, config, options.compile, options.compileGraphOverhead));
  ASSIGN_OR_RETURN(
      const ModelFacts facts,
      internal::makeModelFacts(model, compute, internal::effectiveInputs(model, options.inputs)));
  const int worldSize = layout.worldSize();
  const int numRanks = options.allRanks ? worldSize : 1;

  // Usage classes: ranks that see the same layers in every iteration.
  std::vector<int> classOf;
  std::vector<UsageClass> classes = internal::makeUsageClasses(model, facts, numRanks, classOf);

  SimResult result;
  SimSummary& summary = result.summary;
  summary.worldSize = worldSize;
  summary.simulatedRanks = numRanks;
  const HostModel host = options.host.value_or(HostModel{});
  RETURN_IF_ERROR(validateHostModel(host));
  summary.overheads = host.profile.ddp;
  summary.hostRunsAhead = host.runsAhead;
  summary.hostProfile = host.profile.name;
  summary.hostPerOp = host.profile.perOp() && compilePlan.mode == CompileMode::kNone;
  const ScriptBuilder::HostCosts hostCosts =
      hostCostsNs(host, model, config, compilePlan.mode != CompileMode::kNone);
  // Plain training (no DDP): the layer kernels and the optimizer, nominal.
  for (const LayerTimes& t : facts.layerTimes) summary.plainStep += t.forward + t.backward;
  summary.plainStep += compute.optimizerTime(facts.totalParamBytes);
  EstimateCache estimates(comm);
  for (UsageClass& cls : classes) {
    cls.builder =
        std::make_unique<ScriptBuilder>(model, facts, compute, estimates, summary.warnings);
    cls.builder->setHostCosts(hostCosts);
    ASSIGN_OR_RETURN(
        ddp::Reducer reducer,
        ddp::Reducer::create(model, config, cls.representativeRank, cls.builder.get()));
    cls.reducer.emplace(std::move(reducer));
    cls.reducer->setActions(cls.builder.get());
    cls.builder->setReducer(&*cls.reducer);
  }

  traces::Timeline* timeline = options.recordTrace ? &result.timeline : nullptr;
  summary.workload = describeWorkload(model, layout, options, compute);
  if (timeline) {
    writeMetadata(*timeline, summary.workload, options, iterations, contentionSlowdown);
  }
  if (options.smContentionSms < 0) {
    return invalidArgument("SM count for NCCL's SM contention: expected >= 0, got " +
                           std::to_string(options.smContentionSms));
  }
  Replayer replayer(model, numRanks, contentionSlowdown, timeline, host, options.smContentionSms,
                    replayThreads(options, numRanks));
  RankZeroRecorder recorder;
  ComputeJitter jitter(options, numRanks);

  std::vector<int64_t> fusedBucketBytes;  // compiled-autograd
  std::vector<std::pair<int, int>> ctasPerIteration;
  summary.iterations.reserve(static_cast<size_t>(iterations));
  for (int64_t i = 1; i <= iterations; ++i) {
    for (UsageClass& cls : classes) {
      Status status = internal::buildScript(model, facts, compute, config, options.syncBatchNorm, i,
                                            cls, &compilePlan);
      if (!status.isOk()) return status.withContext("iteration " + std::to_string(i));
    }
    const Script& reference = classes[static_cast<size_t>(classOf[0])].script;
    if (compilePlan.mode == CompileMode::kCompiledAutograd && reference.synced) {
      // No Reducer plan: the buckets are Inductor's fused allreduces of this iteration.
      fusedBucketBytes.clear();
      for (const CollectiveDesc& desc : reference.collectives) {
        if (desc.kind == internal::CollectiveKind::kBucket) fusedBucketBytes.push_back(desc.bytes);
      }
    }
    for (const UsageClass& cls : classes) {
      const auto& a = reference.collectives;
      const auto& b = cls.script.collectives;
      if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin(),
                                              [](const CollectiveDesc& x, const CollectiveDesc& y) {
                                                return x.sameWire(y);
                                              })) {
        return failedPrecondition(
            "iteration " + std::to_string(i) + ": rank " + std::to_string(cls.representativeRank) +
            " issues a different collective sequence than rank 0 (a real run would hang or "
            "mismatch collectives)");
      }
    }
    std::pair<int, int> ctas{0, 0};  // fewest, most CTAs of this iteration's NCCL calls
    for (const CollectiveDesc& desc : reference.collectives) {
      const int k = desc.estimate->ctas;
      if (k <= 0) continue;
      ctas = ctas.second == 0 ? std::pair{k, k}
                              : std::pair{std::min(ctas.first, k), std::max(ctas.second, k)};
    }
    ctasPerIteration.push_back(ctas);
    if (options.allRanks) jitter.draw(replayer.scales());
    IterationSummary iteration;
    if (classes.size() == 1) {
      replayer.runIteration(
          i, [&](int) -> const Script& { return reference; }, reference, recorder, iteration);
    } else {
      replayer.runIteration(
          i,
          [&](int r) -> const Script& {
            return classes[static_cast<size_t>(classOf[static_cast<size_t>(r)])].script;
          },
          reference, recorder, iteration);
    }
    summary.iterations.push_back(std::move(iteration));
    if (options.progress) options.progress(static_cast<int>(i), iterations);
  }

  const ddp::BucketPlan& plan = classes[static_cast<size_t>(classOf[0])].reducer->plan();
  summary.numBuckets = plan.numBuckets();
  summary.bucketBytes = plan.bucketBytes();
  if (compilePlan.mode == CompileMode::kCompiledAutograd) {
    summary.numBuckets = static_cast<int>(fusedBucketBytes.size());
    summary.bucketBytes = fusedBucketBytes;
  }
  RETURN_IF_ERROR(internal::finishSummary(
      summary, static_cast<int>(std::max<int64_t>(config.noSyncPeriod, 1))));
  if (options.simulatePlain && summary.hostPerOp) {
    // Plain training on the same host and device: a few steps of the plain script on one rank.
    internal::Script plain;
    internal::buildPlainScript(model, facts, compute, hostCosts, plain);
    Replayer plainReplayer(model, 1, contentionSlowdown, nullptr, host, 0, 1);
    RankZeroRecorder plainRecorder;
    IterationSummary step;
    for (int64_t i = 1; i <= 3; ++i) {
      step = IterationSummary{};
      plainReplayer.runIteration(
          i, [&](int) -> const internal::Script& { return plain; }, plain, plainRecorder, step);
    }
    summary.plainStep = step.maxRankStepTime;
    summary.ddpOverhead = summary.stepTime - summary.plainStep;
    summary.plainSimulated = true;
  }
  summarizeCommDevice(summary, options.smContentionSms, contentionSlowdown, ctasPerIteration);
  return result;
}

}  // namespace ddpscope::sim
