#include "api/sweep_request.h"

#include <nlohmann/json.hpp>

#include "api/simulation_json.h"
#include "sim/engine/workload.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts

StatusOr<SweepRequest> parseSweepRequest(const SettingValues& values) {
  SweepRequest plan;
  ASSIGN_OR_RETURN(plan.request, parseSimulationRequest(values, /*sweep=*/true));
  if (auto text = values.value("bucket-cap-mb")) {
    ASSIGN_OR_RETURN(plan.capsMb, parsePositiveList(*text, "--bucket-cap-mb"));
  }
  plan.compileModes = {plan.request.options.compile};
  if (auto text = values.value("compile")) {
    ASSIGN_OR_RETURN(plan.compileModes, parseCompileModes(*text, /*list=*/true));
  }
  if (auto fu = values.value("find-unused")) {
    if (*fu == "on") {
      plan.findUnused = {true};
    } else if (*fu == "off") {
      plan.findUnused = {false};
    } else if (*fu == "both") {
      plan.findUnused = {false, true};
    } else {
      return invalidArgument("--find-unused: expected on, off or both, got '" + *fu + "'");
    }
  }
  if (values.has("nodes") && values.has("world-size")) {
    return invalidArgument("give either --nodes or --world-size, not both");
  }
  const ClusterSpec& cluster = plan.request.cluster;
  if (auto text = values.value("world-size")) {
    ASSIGN_OR_RETURN(std::vector<int> sizes, parsePositiveIntList(*text, "--world-size"));
    for (int w : sizes) {
      ASSIGN_OR_RETURN(WorldLayout l, makeWorldLayout(cluster, std::nullopt, w));
      plan.layouts.push_back(l);
    }
  } else {
    std::vector<int> nodes = {1};
    if (auto text = values.value("nodes")) {
      ASSIGN_OR_RETURN(nodes, parsePositiveIntList(*text, "--nodes"));
    }
    for (int n : nodes) {
      ASSIGN_OR_RETURN(WorldLayout l, makeWorldLayout(cluster, n, std::nullopt));
      plan.layouts.push_back(l);
    }
  }
  return plan;
}

StatusOr<SweepRequest> sweepRequestOf(const SimulationChoice& choice,
                                      const std::vector<double>& capsMb,
                                      const std::vector<int>& worldSizes) {
  SweepRequest plan;
  ASSIGN_OR_RETURN(plan.request, simulationRequestOf(choice, /*sweep=*/true));
  RETURN_IF_ERROR(checkCapsMb(capsMb, "sweep"));
  plan.capsMb = capsMb;
  plan.compileModes = {plan.request.options.compile};
  plan.findUnused = {choice.ddp.findUnusedParameters};
  for (int w : worldSizes.empty() ? std::vector<int>{choice.worldSize} : worldSizes) {
    ASSIGN_OR_RETURN(WorldLayout l, makeWorldLayout(plan.request.cluster, std::nullopt, w));
    plan.layouts.push_back(l);
  }
  return plan;
}

StatusOr<SweepResult> runSweepRequest(const SweepRequest& plan,
                                      std::function<void(size_t finished, size_t total)> progress) {
  // Every configuration on all cores; the default cap (25) is always simulated for the "gain"
  // column.
  SweepGrid sweep;
  sweep.model = &plan.request.model;
  sweep.cluster = &plan.request.cluster;
  sweep.compute = plan.request.compute.get();
  sweep.base = plan.request.options;
  sweep.layouts = plan.layouts;
  sweep.capsMb = plan.capsMb;
  sweep.findUnused = plan.findUnused;
  sweep.compileModes = plan.compileModes;
  sweep.progress = std::move(progress);
  return runSweep(sweep);
}

nlohmann::json sweepJson(const SweepRequest& plan, const SweepResult& result) {
  const std::vector<SweepPoint>& rows = result.points;
  const SimulationRequest& req = plan.request;
  nlohmann::json out;
  nlohmann::json jrows = nlohmann::json::array();
  for (size_t i = 0; i < plan.size(); ++i) {
    SimulationRequest r = req;
    r.options = sweepPointOptions(req.options, rows[i]);
    nlohmann::json row = simSummaryJson(r, rows[i].layout, rows[i].summary);
    row.erase("iterations");
    row.erase("workload");  // the shared "workload" below; the row has its own cap and layout
    row["compile"] = compileModeName(rows[i].compile);
    jrows.push_back(std::move(row));
  }
  nlohmann::json jbest = nlohmann::json::array();
  for (const auto& b : result.best) {
    const auto& r = rows[b.point];
    jbest.push_back({{"world_size", r.layout.worldSize()},
                     {"nodes", r.layout.nodes},
                     {"find_unused_parameters", r.findUnused},
                     {"compile", compileModeName(r.compile)},
                     {"bucket_cap_mb", r.capMb},
                     {"step_time_ns", r.summary.stepTime.count()},
                     {"default_step_time_ns", rows[b.baseline].summary.stepTime.count()},
                     {"default_bucket_cap_mb", rows[b.baseline].capDefault
                                                   ? nlohmann::json(nullptr)
                                                   : nlohmann::json(rows[b.baseline].capMb)},
                     {"gain_percent", b.gainPercent}});
  }
  out["model"] = req.model.name;
  out["cluster"] = req.cluster.name;
  // What every row assumes besides its own bucket cap, find_unused and layout (first row's).
  out["workload"] = workloadJson(rows.front().summary.workload);
  out["rows"] = std::move(jrows);
  out["best"] = std::move(jbest);
  return out;
}

}  // namespace ddpscope::api
