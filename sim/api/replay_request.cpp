#include "sim/api/replay_request.h"

#include <nlohmann/json.hpp>

#include "ddp/ddp_settings.h"
#include "sim/api/simulation_json.h"
#include "sim/engine/workload.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::sim {
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

}  // namespace

std::vector<SettingSpec> replaySettingList() {
  std::vector<SettingSpec> out = {
      {"from-trace", "RUN.json", "the measured run (Chrome trace, .json or .json.gz)"}};
  const std::vector<SettingSpec> simulation =
      simulationSettingList(/*sweep=*/false, /*computeFrom=*/false);
  out.insert(out.end(), simulation.begin(), simulation.end());
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

  // 1. The run's own settings.
  ASSIGN_OR_RETURN(WorldLayout ownLayout,
                   makeWorldLayout(req.cluster, std::nullopt, run.worldSize));
  SimOptions own = replay::ownSettingsOptions(profile);
  own.contentionSlowdown = req.options.contentionSlowdown;
  r.rankMaxFactor = profile.rankMaxFactor;
  ASSIGN_OR_RETURN(r.own, replay::predictStep(req.model, req.cluster, ownLayout, own,
                                              req.compute.get(), r.rankMaxFactor));
  r.measuredStep = profile.measuredStep;
  r.ownErrorPercent = percentError(r.own.step, r.measuredStep);

  // 2. The what-if: the trace's settings, with every given setting applied.
  r.whatIf = ddp::anyDdpSetting(values, simulationDdpSettings(/*sweep=*/false));
  for (const char* name : kWhatIfSettings) r.whatIf |= values.has(name);
  r.whatIfOptions = req.options;  // DDP settings: the run's own, changed by the settings given
  if (!values.has("sync-batchnorm")) r.whatIfOptions.syncBatchNorm = run.syncBatchNorm;
  ASSIGN_OR_RETURN(const LayoutSettings layout, parseLayoutSettings(values, run.worldSize));
  ASSIGN_OR_RETURN(r.whatIfLayout, makeWorldLayout(req.cluster, layout.nodes, layout.worldSize));
  r.whatIfOptions.recordTrace = recordTrace;
  if (r.whatIf || recordTrace) {
    ASSIGN_OR_RETURN(r.whatIfResult, runSimulation(req, r.whatIfLayout, r.whatIfOptions));
    r.whatIfVsMeasuredPercent = percentError(r.whatIfResult->summary.stepTime, r.measuredStep);
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
  out["rank_max_factor"] = r.rankMaxFactor;
  if (r.whatIf) {
    SimulationRequest shown = r.request;
    shown.options = r.whatIfOptions;
    out["what_if"] = simSummaryJson(shown, r.whatIfLayout, r.whatIfResult->summary);
    out["what_if"]["vs_measured_percent"] = r.whatIfVsMeasuredPercent;
  }
  return out;
}

}  // namespace ddpscope::sim
