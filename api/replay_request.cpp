#include "api/replay_request.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/cluster_settings.h"
#include "api/ddp_flags.h"
#include "api/simulation_json.h"
#include "base/median.h"
#include "base/strings.h"
#include "ddp/ddp_settings.h"
#include "io/json_reader.h"
#include "sim/engine/workload.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts
namespace {

// Settings besides the DDP settings that change the simulated configuration away from the
// trace's.
const char* const kWhatIfSettings[] = {"world-size", "nodes",          "batch",     "seq-len",
                                       "image-size", "sync-batchnorm", "strategy",  "all-ranks",
                                       "jitter",     "stragglers",     "contention"};

double percentError(Nanos predicted, Nanos measured) {
  if (measured.count() == 0) return 0;
  return 100.0 * static_cast<double>((predicted - measured).count()) /
         static_cast<double>(measured.count());
}

// The built-in host profile whose profiler costs stand in when the one given has none.
constexpr const char* kDefaultProfilerProfile = "h100-torch211";

// ReplayReport::HostLane (its comment) from the profile's host facts; nullopt with a note when
// the trace has none or they do not cover the model.
StatusOr<std::optional<ReplayReport::HostLane>> hostLaneReplay(const ReplayReport& r,
                                                               const ClusterSpec& ownCluster,
                                                               const SimOptions& own,
                                                               const WorldLayout& ownLayout,
                                                               std::vector<std::string>& notes) {
  const SimulationRequest& req = r.request;
  const replay::MeasuredProfile& profile = req.measured->profile;
  ASSIGN_OR_RETURN(std::optional<replay::ProfileHostFacts> read,
                   replay::hostFactsOfProfile(profile, req.model));
  if (!read) return std::optional<ReplayReport::HostLane>();
  replay::HostFacts& facts = read->facts;
  if (StatusOr<models::ModelSpec> covered = replay::withHostFactsOps(req.model, facts);
      !covered.isOk()) {
    notes.push_back("no host lane: " + covered.status().message());
    return std::optional<ReplayReport::HostLane>();
  }
  ReplayReport::HostLane lane;
  lane.steps = read->steps;
  SimOptions options = own;
  options.recordTrace = false;
  options.simulatePlain = true;
  const std::string from = facts.trace.empty() ? profile.origin : facts.trace;
  if (r.unprofiledStepMs) {
    // One unknown (the profiler's cost per event), one measurement: the unprofiled step.
    facts.measuredMs["ddp-default"] = {*r.unprofiledStepMs};
    auto simulateOwn = [&](const replay::HostFacts& f,
                           const HostProfile& p) -> StatusOr<replay::HostSimulation> {
      ASSIGN_OR_RETURN(SimResult s, replay::simulateWithHostFacts(f, req.model, ownCluster,
                                                                  ownLayout, options, p));
      return replay::HostSimulation{s.summary.plainStep.toMillis(), s.summary.stepTime.toMillis()};
    };
    ASSIGN_OR_RETURN(replay::HostFit fit,
                     replay::fitHostProfileWith({&facts}, simulateOwn, "from " + from,
                                                "the trace's host facts, read by ddpscope"));
    lane.profile = std::move(fit.profile);
    lane.profile.standsFor = "the traced job's PyTorch, CPU and settings, profiler off";
    lane.profilerFrom = "a fit to --unprofiled-step-ms " + formatShortest(*r.unprofiledStepMs);
    lane.profilerCalibrated = true;
  } else {
    HostProfile profiler = req.cluster.host;
    lane.profilerFrom = profiler.name.empty() ? "the cluster's host profile" : profiler.name;
    lane.profilerCalibrated = profiler.profilerEventUs > 0;
    if (!lane.profilerCalibrated) {
      ASSIGN_OR_RETURN(profiler, loadBuiltinHostProfile(kDefaultProfilerProfile));
      lane.profilerFrom = kDefaultProfilerProfile;
    }
    lane.profile = replay::hostProfileFromFacts({&facts}, profiler);
    lane.profile.name = "from " + from;
    lane.profile.source = "the trace's host facts, the profiler's costs from " + lane.profilerFrom;
  }
  const HostProfile asProfiled = replay::hostProfileFromFacts({&facts}, HostProfile{});
  ASSIGN_OR_RETURN(
      SimResult profiled,
      replay::simulateWithHostFacts(facts, req.model, ownCluster, ownLayout, options, asProfiled));
  lane.profiled = profiled.summary.stepTime;
  lane.profiledErrorPercent = percentError(lane.profiled, r.measuredStep);
  ASSIGN_OR_RETURN(SimResult unprofiled,
                   replay::simulateWithHostFacts(facts, req.model, ownCluster, ownLayout, options,
                                                 lane.profile));
  lane.unprofiled = unprofiled.summary.stepTime;
  lane.unprofiledPlain = unprofiled.summary.plainStep;
  lane.unprofiledHostWork = unprofiled.summary.hostWork;
  if (r.whatIf) {
    SimOptions whatIf = r.whatIfOptions;
    whatIf.recordTrace = false;
    ASSIGN_OR_RETURN(SimResult result,
                     replay::simulateWithHostFacts(facts, req.model, req.cluster, r.whatIfLayout,
                                                   whatIf, lane.profile));
    lane.whatIfUnprofiled = result.summary.stepTime;
    lane.whatIfUnprofiledHostWork = result.summary.hostWork;
  }
  if (!lane.profilerCalibrated) {
    notes.push_back(std::string("the profiler's own cost per event is ") + kDefaultProfilerProfile +
                    "'s (fitted on the GPU kit's H100 traces, PyTorch 2.11), not calibrated for "
                    "this machine: give the job's step measured without the profiler "
                    "(--unprofiled-step-ms) to calibrate the unprofiled prediction");
  }
  return std::optional<ReplayReport::HostLane>(std::move(lane));
}

}  // namespace

std::vector<SettingSpec> replaySettingList() {
  std::vector<SettingSpec> out = {
      {"from-trace", "RUN.json", "the measured run (Chrome trace, .json or .json.gz)"},
      {"unprofiled-step-ms", "MS",
       "the job's step measured without the profiler (a median, at the trace's settings): the "
       "host lane fits the profiler's own cost per event on this trace to meet it, so its "
       "what-if is calibrated for this machine (a GPU trace with host facts only)"}};
  const std::vector<SettingSpec> simulation =
      simulationSettingList(/*sweep=*/false, /*computeFrom=*/false);
  out.insert(out.end(), simulation.begin(), simulation.end());
  out.push_back(kernelBenchSettingSpec());
  return out;
}

StatusOr<ReplayReport> runReplay(const SettingValues& values, bool recordTrace) {
  ReplayReport r;
  auto trace = values.value("from-trace");
  if (!trace) return invalidArgument("--from-trace: required (the measured run's trace)");
  r.trace = *trace;
  ASSIGN_OR_RETURN(r.request, parseSimulationRequest(values, /*sweep=*/false, *trace));
  const SimulationRequest& req = r.request;
  const replay::MeasuredProfile& profile = req.measured->profile;
  const replay::RunSettings& run = profile.settings;

  // 1. The run's own settings, on the GPU and at the precision the trace ran at: a cluster of
  // another GPU, or another --dtype, carries the kernels in the what-if only (KernelCarry).
  ClusterSpec ownCluster = req.cluster;
  const ComputeModel* ownCompute = req.compute.get();
  std::unique_ptr<replay::MeasuredComputeModel> asTraced;
  if (values.has("cluster")) {
    ASSIGN_OR_RETURN(std::unique_ptr<replay::KernelCarry> carry,
                     replay::KernelCarry::create(profile.gpu, run.dtype, req.cluster.device,
                                                 req.options.dtype, r.trace, req.kernelBench));
    if (carry) {
      r.carried = carry->describe();
      if (!replay::isTracedGpu(*profile.gpu, req.cluster.device)) {
        ownCluster.device = *replay::builtinDeviceOf(*profile.gpu);
      }
      replay::MeasuredComputeOptions mo;
      mo.contentionSlowdown =
          req.options.contentionSlowdown.value_or(req.cluster.contentionSlowdown);
      ASSIGN_OR_RETURN(asTraced, replay::MeasuredComputeModel::create(profile, req.model,
                                                                      ownCluster.device, mo));
      ownCompute = asTraced.get();
    }
  }
  ASSIGN_OR_RETURN(WorldLayout ownLayout, makeWorldLayout(ownCluster, std::nullopt, run.worldSize));
  SimOptions own = replay::ownSettingsOptions(profile);
  own.contentionSlowdown = req.options.contentionSlowdown;
  r.rankMaxFactor = profile.rankMaxFactor;
  ASSIGN_OR_RETURN(r.own, replay::predictStep(req.model, ownCluster, ownLayout, own, ownCompute,
                                              r.rankMaxFactor));
  r.measuredStep = profile.measuredStep;
  r.ownErrorPercent = percentError(r.own.step, r.measuredStep);
  // Step by step: each measured iteration's own parts, on the same compute options.
  if (profile.measuredIterations.size() > 1) {
    replay::MeasuredComputeOptions mo;
    mo.contentionSlowdown = req.options.contentionSlowdown.value_or(req.cluster.contentionSlowdown);
    if (!asTraced) {  // as parseSimulationRequest built the request's compute
      mo.dtype = req.options.dtype;
      mo.carryToDevice = values.has("cluster");
      mo.kernelBench = req.kernelBench;
    }
    std::vector<int64_t> steps;
    for (int64_t it : profile.measuredIterations) {
      const replay::MeasuredProfile one = replay::oneIteration(profile, it);
      ASSIGN_OR_RETURN(std::unique_ptr<replay::MeasuredComputeModel> compute,
                       replay::MeasuredComputeModel::create(one, req.model, ownCluster.device, mo));
      ASSIGN_OR_RETURN(replay::StepPrediction step,
                       replay::predictStep(req.model, ownCluster, ownLayout, own, compute.get(),
                                           r.rankMaxFactor));
      r.stepByStep.push_back(step.step);
      steps.push_back(step.step.count());
    }
    r.stepByStepMedian = Nanos(static_cast<int64_t>(std::llround(median(steps))));
    r.stepByStepErrorPercent = percentError(r.stepByStepMedian, r.measuredStep);
  }

  // 2. The what-if: the trace's settings, with every given setting applied.
  r.whatIf = api::anyDdpSetting(values, simulationDdpSettings(/*sweep=*/false));
  for (const char* name : kWhatIfSettings) r.whatIf |= values.has(name);
  r.whatIf |= !r.carried.empty();  // another GPU or precision is a what-if of its own
  r.whatIfOptions = req.options;   // DDP settings: the run's own, changed by the settings given
  if (!values.has("sync-batchnorm")) r.whatIfOptions.syncBatchNorm = run.syncBatchNorm;
  ASSIGN_OR_RETURN(r.whatIfLayout, layoutFromSettings(values, req.cluster, run.worldSize));
  r.whatIfOptions.recordTrace = recordTrace;
  if (r.whatIf || recordTrace) {
    ASSIGN_OR_RETURN(r.whatIfResult, runSimulation(req, r.whatIfLayout, r.whatIfOptions));
    r.whatIfVsMeasuredPercent = percentError(r.whatIfResult->summary.stepTime, r.measuredStep);
  }
  if (values.has("unprofiled-step-ms")) {
    ASSIGN_OR_RETURN(r.unprofiledStepMs, values.positiveDouble("unprofiled-step-ms", 0));
  }
  ASSIGN_OR_RETURN(r.hostLane, hostLaneReplay(r, ownCluster, own, ownLayout, r.notes));
  if (r.unprofiledStepMs && !r.hostLane) {
    return invalidArgument("--unprofiled-step-ms: " + r.trace + " has no host lane to calibrate (" +
                           (r.notes.empty() ? std::string("no host facts: import a GPU trace "
                                                          "with import-torch --model")
                                            : r.notes.front()) +
                           ")");
  }
  if (!profile.layerOrderNote.empty()) r.notes.push_back(r.trace + ": " + profile.layerOrderNote);
  if (values.has("cluster") && !profile.gpu && profile.gpuImport()) {
    r.notes.push_back(r.trace +
                      " does not say which GPU its kernels ran on (imported before import-torch "
                      "kept the trace's deviceProperties): they are taken as " +
                      req.cluster.device.name +
                      "'s; import the trace again to have them carried to another GPU");
  }
  // The run's own cluster: a trace of some of the world's ranks keeps its network (and says why).
  const std::string partialNote =
      values.has("cluster") ? std::string() : replay::partialTraceNetworkNote(profile);
  if (!partialNote.empty()) r.notes.push_back(partialNote);
  // Communication calibrated on this run alone: say when its collectives could not separate a
  // call's fixed cost from its bandwidth, which a what-if's other bucket sizes depend on.
  if (r.whatIf && !values.has("cluster") && partialNote.empty() && run.worldSize >= 2) {
    StatusOr<replay::AlphaBetaFit> fit = replay::fitAlphaBeta({{&profile, &req.model}});
    if (fit.isOk()) {
      if (std::string note = replay::oneMessageSizeNote(*fit); !note.empty()) {
        r.notes.push_back(r.trace + ": " + note);
      }
    }
  }
  return r;
}

nlohmann::json replayJson(const ReplayReport& r) {
  const replay::MeasuredProfile& profile = r.request.measured->profile;
  const replay::RunSettings& run = profile.settings;
  nlohmann::json out;
  out["trace"] = r.trace;
  out["model"] = r.request.model.name;
  out["world_size"] = run.worldSize;
  out["run_settings"] = ddp::ddpSettingsJson(run.ddp);  // as read from the trace
  out["workload"] = workloadJson(r.own.result.summary.workload);
  out["cluster"] = r.request.cluster.name;
  out["measured_iterations"] = profile.measuredIterations;
  out["measured_step_ms"] = r.measuredStep.toMillis();
  out["replayed_step_ms"] = r.own.step.toMillis();
  out["replay_error_percent"] = r.ownErrorPercent;
  if (!r.stepByStep.empty()) {
    nlohmann::json steps = nlohmann::json::array();
    for (Nanos s : r.stepByStep) steps.push_back(s.toMillis());
    out["step_by_step"] = {{"replayed_step_ms", steps},
                           {"median_ms", r.stepByStepMedian.toMillis()},
                           {"error_percent", r.stepByStepErrorPercent}};
  }
  out["rank_max_factor"] = r.rankMaxFactor;
  if (r.whatIf) {
    SimulationRequest shown = r.request;
    shown.options = r.whatIfOptions;
    out["what_if"] = simSummaryJson(shown, r.whatIfLayout, r.whatIfResult->summary);
    out["what_if"]["vs_measured_percent"] = r.whatIfVsMeasuredPercent;
  }
  if (r.hostLane) {
    const ReplayReport::HostLane& lane = *r.hostLane;
    nlohmann::json h;
    h["steps"] = lane.steps;
    h["profiled_step_ms"] = lane.profiled.toMillis();
    h["profiled_error_percent"] = lane.profiledErrorPercent;
    h["unprofiled_step_ms"] = lane.unprofiled.toMillis();
    h["unprofiled_plain_step_ms"] = lane.unprofiledPlain.toMillis();
    h["what_if_unprofiled_step_ms"] =
        lane.whatIfUnprofiled ? nlohmann::json(lane.whatIfUnprofiled->toMillis()) : nullptr;
    auto workMs = [](const HostPhaseWork& w) {
      return nlohmann::json{{"forward", w.forward.toMillis()},
                            {"backward", w.backward.toMillis()},
                            {"optimizer", w.optimizer.toMillis()},
                            {"total", w.total().toMillis()}};
    };
    h["unprofiled_host_work_ms"] = workMs(lane.unprofiledHostWork);
    h["what_if_unprofiled_host_work_ms"] =
        lane.whatIfUnprofiledHostWork ? workMs(*lane.whatIfUnprofiledHostWork) : nullptr;
    h["profiler_from"] = lane.profilerFrom;
    h["profiler_calibrated"] = lane.profilerCalibrated;
    h["unprofiled_step_ms_given"] =
        r.unprofiledStepMs ? nlohmann::json(*r.unprofiledStepMs) : nullptr;
    h["host_profile"] = hostProfileJson(lane.profile);
    out["host_lane"] = std::move(h);
  }
  out["kernels_carried"] = r.carried.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.carried);
  out["notes"] = r.notes;
  return out;
}

}  // namespace ddpscope::api
