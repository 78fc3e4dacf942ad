#include "api/plan_request.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/strings.h"
#include "ddp/ddp_config.h"
#include "ddp/ddp_settings.h"
#include "sim/engine/workload.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts
namespace {

nlohmann::json summaryJson(const SimSummary& s) {
  return {{"step_time_ns", s.stepTime.count()}, {"exposed_comm_ns", s.exposedComm.count()},
          {"comm_ns", s.comm.count()},          {"overlap_percent", s.overlapPercent},
          {"num_buckets", s.numBuckets},        {"bucket_bytes", s.bucketBytes}};
}

void redescribe(std::vector<SettingSpec>& specs, const std::string& name, std::string valueName,
                std::string help) {
  for (SettingSpec& s : specs) {
    if (s.name == name) {
      s.valueName = std::move(valueName);
      s.help = std::move(help);
    }
  }
}

}  // namespace

std::vector<SettingSpec> planSettingList() {
  // The sweep's settings, narrowed: one layout, find_unused on or off, eager only.
  std::vector<SettingSpec> specs = {
      {"from-trace", "RUN.json",
       "plan from a recorded run: its model, measured compute, world size and DDP settings "
       "(a 'ddpscope run' trace or an 'import-torch'ed PyTorch profiler trace)"}};
  const std::vector<SettingSpec> simulation = simulationSettingList(/*sweep=*/true);
  specs.insert(specs.end(), simulation.begin(), simulation.end());
  redescribe(specs, "nodes", "N", "number of nodes (default 1; gb200-nvl72: 72-GPU racks)");
  redescribe(specs, "world-size", "W", "number of ranks (a multiple of the GPUs per node)");
  redescribe(specs, "bucket-cap-mb", "X[,X...]",
             "uniform caps to compare in MiB (default 1,2,5,10,25,50,100,200)");
  redescribe(specs, "find-unused", "on|off",
             "find_unused_parameters (default off; on needs --static-graph to plan)");
  redescribe(specs, "compile", "none", "eager DDP only (plan refuses other modes)");
  redescribe(specs, "torch-version", "VERSION",
             "the PyTorch version to plan for: 2.15 (default) or 1.13");
  specs.push_back({"objective", "step|exposed",
                   "what to minimise: steady step time (default) or exposed communication"});
  return specs;
}

StatusOr<PlanRequest> parsePlanRequest(const SettingValues& values) {
  PlanRequest in;
  const std::optional<std::string> trace = values.value("from-trace");
  if (trace && values.has("compute-from")) {
    return invalidArgument(
        "give either --from-trace or --compute-from (--from-trace takes the compute too)");
  }
  ASSIGN_OR_RETURN(in.request, parseSimulationRequest(values, /*sweep=*/true, trace));
  SimulationRequest& req = in.request;
  std::optional<int> traceWorldSize;
  if (trace) {
    // The run's settings are the base (replay's rule); the caps are what plan chooses.
    const replay::MeasuredProfile& profile = req.measured->profile;
    req.options.ddp.bucketCapMbList.clear();
    if (!values.has("sync-batchnorm")) req.options.syncBatchNorm = profile.settings.syncBatchNorm;
    traceWorldSize = profile.settings.worldSize;
  }
  if (auto mode = values.value("compile"); mode && *mode != "none") {
    return invalidArgument("--compile " + *mode + ": plan covers eager DDP only");
  }
  if (req.options.ddp.profile == ddp::SemanticsProfile::kV1_5) {
    return invalidArgument("--torch-version 1.5: plan supports torch 1.13 and 2.15");
  }
  PlanSearch& plan = in.search;
  if (auto text = values.value("objective")) {
    ASSIGN_OR_RETURN(plan.objective, parsePlanObjective(*text));
  }
  if (auto text = values.value("bucket-cap-mb")) {
    ASSIGN_OR_RETURN(plan.uniformCapsMb, parsePositiveList(*text, "--bucket-cap-mb"));
  }
  if (auto fu = values.value("find-unused")) {
    if (*fu != "on" && *fu != "off") {
      return invalidArgument("--find-unused: expected on or off, got '" + *fu + "'");
    }
    req.options.ddp.findUnusedParameters = *fu == "on";
  }
  if (values.has("nodes") && values.has("world-size")) {
    return invalidArgument("give either --nodes or --world-size, not both");
  }
  std::optional<int> nodes, worldSize;
  for (const char* flag : {"nodes", "world-size"}) {
    if (auto text = values.value(flag)) {
      ASSIGN_OR_RETURN(std::vector<int> v, parsePositiveIntList(*text, std::string("--") + flag));
      if (v.size() != 1) {
        return invalidArgument(std::string("--") + flag + ": plan takes one value, got '" + *text +
                               "'");
      }
      (std::string(flag) == "nodes" ? nodes : worldSize) = v[0];
    }
  }
  if (!nodes && !worldSize) {
    if (traceWorldSize) {
      worldSize = traceWorldSize;
    } else {
      nodes = 1;
    }
  }
  ASSIGN_OR_RETURN(plan.layout, makeWorldLayout(req.cluster, nodes, worldSize));
  plan.base = req.options;
  if (trace) {
    // The run at its own settings, as `ddpscope replay` prints it first.
    const replay::MeasuredProfile& profile = req.measured->profile;
    ASSIGN_OR_RETURN(const WorldLayout own,
                     makeWorldLayout(req.cluster, std::nullopt, profile.settings.worldSize));
    SimOptions ownOptions = replay::ownSettingsOptions(profile);
    ownOptions.contentionSlowdown = req.options.contentionSlowdown;
    ASSIGN_OR_RETURN(const replay::StepPrediction replayed,
                     replay::predictStep(req.model, req.cluster, own, ownOptions, req.compute.get(),
                                         profile.rankMaxFactor));
    in.fromTrace = true;
    in.measuredStep = profile.measuredStep;
    in.replayedStep = replayed.step;
    in.replayedSummary = replayed.result.summary;
    in.rankMaxFactor = own.worldSize() > 1 ? std::max(1.0, profile.rankMaxFactor) : 1.0;
  }
  return in;
}

StatusOr<PlanRequest> planRequestOf(const SimulationChoice& choice,
                                    const std::vector<double>& capsMb) {
  PlanRequest in;
  ASSIGN_OR_RETURN(in.request, simulationRequestOf(choice, /*sweep=*/true));
  SimulationRequest& req = in.request;
  if (req.options.ddp.profile == ddp::SemanticsProfile::kV1_5) {
    return invalidArgument("torch 1.5: plan supports torch 1.13 and 2.15");
  }
  RETURN_IF_ERROR(checkCapsMb(capsMb, "plan over"));
  in.search.uniformCapsMb = capsMb;
  req.options.ddp.findUnusedParameters = choice.ddp.findUnusedParameters;
  ASSIGN_OR_RETURN(in.search.layout, makeWorldLayout(req.cluster, std::nullopt, choice.worldSize));
  in.search.base = req.options;
  return in;
}

StatusOr<PlanRequest> planRequestAtWorldSize(PlanRequest input, int worldSize) {
  ASSIGN_OR_RETURN(input.search.layout,
                   makeWorldLayout(input.request.cluster, std::nullopt, worldSize));
  return input;
}

namespace {

std::string capsText(const std::vector<int64_t>& caps) {
  std::string out = "[";
  for (size_t i = 0; i < caps.size(); ++i) out += (i ? ", " : "") + std::to_string(caps[i]);
  return out + "]";
}

// The candidate's DDP keyword arguments as text: what differs from DDP's defaults.
std::string candidateKwargs(const PlanCandidate& c) {
  std::vector<std::string> parts;
  if (!c.capListMib.empty()) {
    parts.push_back("bucket_cap_mb_list=" + capsText(c.capListMib));
  } else if (c.capMb) {
    parts.push_back("bucket_cap_mb=" + formatShortest(*c.capMb));
  }
  if (c.staticGraph) parts.push_back("static_graph=True");
  if (c.gradientAsBucketView) parts.push_back("gradient_as_bucket_view=True");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

Nanos scaled(Nanos step, double factor) {
  return Nanos(static_cast<int64_t>(std::llround(static_cast<double>(step.count()) * factor)));
}

}  // namespace

std::vector<PlanCandidate> planCandidates(const PlanRequest& input, const PlanResult& r, int keep) {
  const ddp::DdpConfig& base = input.search.base.ddp;
  const double factor = input.fromTrace ? input.rankMaxFactor : 1.0;
  auto make = [&](std::string label, const SimSummary& s) {
    PlanCandidate c;
    c.label = std::move(label);
    c.gradientAsBucketView = base.gradientAsBucketView;
    c.staticGraph = base.staticGraph;
    c.predictedStep = scaled(s.stepTime, factor);
    c.bucketBytes = s.bucketBytes;
    return c;
  };
  std::vector<PlanCandidate> all;
  if (input.fromTrace) {
    const ddp::DdpConfig& own = input.request.measured->profile.settings.ddp;
    PlanCandidate c = make("current", input.replayedSummary);
    c.current = true;
    c.capListMib = own.bucketCapMbList;
    if (own.bucketCapMbList.empty() && own.bucketCapSetByUser) c.capMb = own.bucketCapMb;
    c.gradientAsBucketView = own.gradientAsBucketView;
    c.staticGraph = own.staticGraph;
    c.predictedStep = input.replayedStep;
    all.push_back(std::move(c));
  }
  for (size_t i = 0; i < r.uniform.points.size(); ++i) {
    const SweepPoint& p = r.uniform.points[i];
    const bool isDefault = i == r.defaultPoint;
    PlanCandidate c = make(
        isDefault ? std::string("default") : "bucket_cap_mb=" + formatShortest(p.capMb), p.summary);
    if (!p.capDefault) c.capMb = p.capMb;
    c.current = isDefault && !input.fromTrace;
    all.push_back(std::move(c));
  }
  if (r.listSupported) {
    PlanCandidate c = make("planned list", r.planned);
    c.capListMib = r.layout.capsMib();
    all.push_back(std::move(c));
  }
  // The recommendation so far plus each flag that helps, cumulatively (as runPlan simulates
  // them); find_unused_parameters is the job's to choose, so nothing past that flag is proposed.
  PlanCandidate recommended =
      make("", r.recommendList ? r.planned : r.uniform.points[r.bestUniformPoint].summary);
  if (r.recommendList) {
    recommended.capListMib = r.layout.capsMib();
  } else {
    recommended.capMb = r.uniform.points[r.bestUniformPoint].capMb;
  }
  for (const PlanFlag& f : r.flags) {
    if (!f.included()) continue;
    if (f.kwarg.rfind("find_unused_parameters", 0) == 0) break;
    if (f.kwarg.rfind("static_graph", 0) == 0) recommended.staticGraph = true;
    if (f.kwarg.rfind("gradient_as_bucket_view", 0) == 0) recommended.gradientAsBucketView = true;
    recommended.predictedStep = scaled(f.with.stepTime, factor);
    recommended.bucketBytes = f.with.bucketBytes;
    recommended.label =
        (r.recommendList ? std::string("planned list") : "best uniform") + " + " + f.kwarg;
    all.push_back(recommended);
  }
  // One per (buckets, flags), the first named; then the current and the `keep` fastest others.
  std::vector<PlanCandidate> unique;
  for (PlanCandidate& c : all) {
    const bool seen = std::any_of(unique.begin(), unique.end(), [&](const PlanCandidate& u) {
      return u.bucketBytes == c.bucketBytes && u.staticGraph == c.staticGraph &&
             u.gradientAsBucketView == c.gradientAsBucketView;
    });
    if (!seen) unique.push_back(std::move(c));
  }
  std::stable_sort(unique.begin(), unique.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) {
                     if (a.current != b.current) return a.current;
                     return a.predictedStep < b.predictedStep;
                   });
  if (static_cast<int>(unique.size()) > keep + 1) {
    const auto isDefault = [](const PlanCandidate& c) { return c.label == "default"; };
    const auto firstCut = unique.begin() + keep + 1;
    const auto dflt = std::find_if(firstCut, unique.end(), isDefault);
    std::optional<PlanCandidate> keptDefault;
    if (dflt != unique.end() && std::none_of(unique.begin(), firstCut, isDefault)) {
      keptDefault = std::move(*dflt);
    }
    unique.resize(static_cast<size_t>(keep) + 1);
    if (keptDefault) unique.push_back(std::move(*keptDefault));
  }
  for (PlanCandidate& c : unique) c.kwargs = candidateKwargs(c);
  return unique;
}

nlohmann::json candidatesJson(const std::vector<PlanCandidate>& candidates) {
  nlohmann::json out = nlohmann::json::array();
  for (const PlanCandidate& c : candidates) {
    nlohmann::json kwargs = nlohmann::json::object();
    if (!c.capListMib.empty()) {
      kwargs["bucket_cap_mb_list"] = c.capListMib;
    } else if (c.capMb) {
      kwargs["bucket_cap_mb"] = *c.capMb;
    }
    kwargs["gradient_as_bucket_view"] = c.gradientAsBucketView;
    kwargs["static_graph"] = c.staticGraph;
    out.push_back({{"label", c.label},
                   {"current", c.current},
                   {"ddp_kwargs", std::move(kwargs)},
                   {"kwargs", c.kwargs},
                   {"predicted_step_ns", c.predictedStep.count()},
                   {"num_buckets", c.bucketBytes.size()},
                   {"bucket_bytes", c.bucketBytes}});
  }
  return out;
}

StatusOr<PlanResult> runPlanRequest(const PlanRequest& input) {
  PlanSearch plan = input.search;
  plan.model = &input.request.model;
  plan.cluster = &input.request.cluster;
  plan.compute = input.request.compute.get();
  return runPlan(plan);
}

nlohmann::json planJson(const PlanRequest& input, const PlanResult& r) {
  const SimulationRequest& req = input.request;
  const SweepPoint& def = r.uniform.points[r.defaultPoint];
  const SweepPoint& uni = r.uniform.points[r.bestUniformPoint];
  nlohmann::json out;
  out["model"] = req.model.name;
  out["cluster"] = req.cluster.name;
  out["nodes"] = input.search.layout.nodes;
  out["world_size"] = input.search.layout.worldSize();
  out["torch"] = std::string(ddp::semanticsProfileName(req.options.ddp.profile));
  out["objective"] = planObjectiveName(input.search.objective);
  out["workload"] = workloadJson(def.summary.workload);
  out["default"] = summaryJson(def.summary);
  out["default"]["bucket_cap_mb"] =
      def.capDefault ? nlohmann::json(nullptr) : nlohmann::json(def.capMb);
  out["best_uniform"] = summaryJson(uni.summary);
  out["best_uniform"]["bucket_cap_mb"] = uni.capMb;
  out["best_uniform"]["gain_percent"] = r.uniformGainPercent;
  if (r.listSupported) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const PlannedBucket& b : r.layout.buckets) {
      nlohmann::json params = nlohmann::json::array();
      for (int j = b.first; j <= b.last; ++j) params.push_back(r.timeline.order[j]);
      buckets.push_back({{"first", b.first},
                         {"last", b.last},
                         {"params", params},
                         {"bytes", b.bytes},
                         {"wire_bytes", b.wireBytes},
                         {"cap_mib", b.capMib},
                         {"ready_ns", b.readyNs.count()},
                         {"start_ns", b.startNs.count()},
                         {"end_ns", b.endNs.count()}});
    }
    nlohmann::json planned = summaryJson(r.planned);
    planned["bucket_cap_mb_list"] = r.layout.capsMib();
    planned["buckets"] = std::move(buckets);
    nlohmann::json simulated = nlohmann::json::array();
    for (const SimulatedBucket& b : r.plannedAllreduces) {
      simulated.push_back(
          {{"bucket", b.bucket}, {"start_ns", b.startNs.count()}, {"end_ns", b.endNs.count()}});
    }
    planned["simulated_allreduces"] = std::move(simulated);
    planned["simulated_backward_end_ns"] = r.plannedBackwardEndNs.count();
    planned["dp_comm_end_ns"] = r.layout.commEndNs.count();
    planned["dp_compute_delay_ns"] = r.layout.computeDelayNs.count();
    planned["dp_objective_ns"] = r.layout.objectiveNs.count();
    planned["dp_backward_end_ns"] = r.timeline.backwardEndNs.count();
    planned["gain_over_default_percent"] = r.gainOverDefaultPercent;
    planned["gain_over_uniform_percent"] = r.gainOverUniformPercent;
    out["planned"] = std::move(planned);
  } else {
    out["planned"] = nullptr;
  }
  nlohmann::json flags = nlohmann::json::array();
  for (const PlanFlag& f : r.flags) {
    flags.push_back({{"kwarg", f.kwarg},
                     {"without", summaryJson(f.without)},
                     {"with", summaryJson(f.with)},
                     {"gain_percent", f.gainPercent},
                     {"recommended", f.included()},
                     {"note", f.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.note)}});
  }
  out["flags"] = std::move(flags);
  out["recommend_list"] = r.recommendList;
  out["ddp_kwargs"] = planDdpKwargs(r);
  out["candidates"] = candidatesJson(planCandidates(input, r));
  if (input.fromTrace) {
    out["trace"] = {{"path", *req.computeFrom},
                    {"measured_step_ns", input.measuredStep.count()},
                    {"replayed_step_ns", input.replayedStep.count()},
                    {"run_settings", ddp::ddpSettingsJson(req.measured->profile.settings.ddp)}};
  } else {
    out["trace"] = nullptr;
  }
  return out;
}

}  // namespace ddpscope::api
