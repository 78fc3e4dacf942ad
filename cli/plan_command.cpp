// `ddpscope plan`: the best bucket layout for a model on a cluster and the DDP call that
// produces it (sim/engine/plan.h does the work; this file parses flags and prints).
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_flags.h"
#include "ddp/ddp_config.h"
#include "sim/engine/plan.h"
#include "sim/engine/workload.h"

namespace ddpscope::cli {
namespace {

nlohmann::json summaryJson(const sim::SimSummary& s) {
  return {{"step_time_ns", s.stepTime.count()}, {"exposed_comm_ns", s.exposedComm.count()},
          {"comm_ns", s.comm.count()},          {"overlap_percent", s.overlapPercent},
          {"num_buckets", s.numBuckets},        {"bucket_bytes", s.bucketBytes}};
}

std::string ms(Nanos t) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", t.toMillis());
  return buf;
}

std::string percent(double gain) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f%% %s", std::abs(gain), gain < 0 ? "slower" : "faster");
  return buf;
}

}  // namespace

Status runPlanCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope plan",
      "(--model M | --model-file F) (--cluster C | --cluster-file F)\n"
      "       [--nodes N | --world-size W] [--torch 1.13|2.15] [--objective step|exposed]\n"
      "       [--bucket-cap-mb X,...] [...simulate flags] [--json]",
      "Plans DDP's gradient buckets for a model on a cluster: the default and the best uniform\n"
      "bucket_cap_mb, the best per-bucket layout (an exact dynamic program over the bucket\n"
      "layouts PyTorch can build, then a full simulation of it), and the DDP keyword arguments\n"
      "that produce exactly that layout (bucket_cap_mb_list for torch 2.15, the best uniform cap\n"
      "for 1.13) plus the flags that help, each with its simulated effect.");
  addSimulationFlags(parser, /*sweep=*/true);
  // The sweep flag set, narrowed: one layout, find_unused on or off, eager only.
  parser.redescribe("nodes", "N", "number of nodes (default 1)")
      .redescribe("world-size", "W", "number of ranks (a multiple of the GPUs per node)")
      .redescribe("bucket-cap-mb", "X[,X...]",
                  "uniform caps to compare in MiB (default 1,2,5,10,25,50,100,200)")
      .redescribe("find-unused", "on|off",
                  "find_unused_parameters (default off; on needs --static-graph to plan)")
      .redescribe("compile", "none", "eager DDP only (plan refuses other modes)");
  parser.option("torch", "VERSION", "the PyTorch version to plan for: 2.15 (default) or 1.13")
      .option("objective", "step|exposed",
              "what to minimise: steady step time (default) or exposed communication")
      .flag("json", "machine-readable output")
      .epilog("example: ddpscope plan --model gpt2-small --cluster dgx-a100 --nodes 4");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(SimulationRequest req, parseSimulationRequest(args, /*sweep=*/true));
  if (auto mode = args.value("compile"); mode && *mode != "none") {
    return invalidArgument("--compile " + *mode + ": plan covers eager DDP only");
  }
  if (auto torch = args.value("torch")) {
    if (args.has("semantics")) return invalidArgument("give either --torch or --semantics");
    if (*torch != "2.15" && *torch != "1.13") {
      return invalidArgument("--torch: expected 2.15 or 1.13, got '" + *torch + "'");
    }
    ASSIGN_OR_RETURN(req.options.ddp.profile, ddp::parseSemanticsProfile(*torch));
  }
  if (req.options.ddp.profile == ddp::SemanticsProfile::kV1_5) {
    return invalidArgument("--semantics 1.5: plan supports torch 1.13 and 2.15");
  }
  sim::PlanRequest plan;
  if (auto text = args.value("objective")) {
    ASSIGN_OR_RETURN(plan.objective, sim::parsePlanObjective(*text));
  }
  if (auto text = args.value("bucket-cap-mb")) {
    ASSIGN_OR_RETURN(plan.uniformCapsMb, parsePositiveList(*text, "--bucket-cap-mb"));
  }
  if (auto fu = args.value("find-unused")) {
    if (*fu != "on" && *fu != "off") {
      return invalidArgument("--find-unused: expected on or off, got '" + *fu + "'");
    }
    req.options.ddp.findUnusedParameters = *fu == "on";
  }
  if (args.has("nodes") && args.has("world-size")) {
    return invalidArgument("give either --nodes or --world-size, not both");
  }
  std::optional<int> nodes, worldSize;
  for (const char* flag : {"nodes", "world-size"}) {
    if (auto text = args.value(flag)) {
      ASSIGN_OR_RETURN(std::vector<int> v, parsePositiveIntList(*text, std::string("--") + flag));
      if (v.size() != 1) {
        return invalidArgument(std::string("--") + flag + ": plan takes one value, got '" + *text +
                               "'");
      }
      (std::string(flag) == "nodes" ? nodes : worldSize) = v[0];
    }
  }
  if (!nodes && !worldSize) nodes = 1;
  ASSIGN_OR_RETURN(plan.layout, sim::makeWorldLayout(req.cluster, nodes, worldSize));
  plan.model = &req.model;
  plan.cluster = &req.cluster;
  plan.compute = req.compute.get();
  plan.base = req.options;
  ASSIGN_OR_RETURN(const sim::PlanResult r, sim::runPlan(plan));

  const sim::SweepPoint& def = r.uniform.points[r.defaultPoint];
  const sim::SweepPoint& uni = r.uniform.points[r.bestUniformPoint];
  const std::string kwargs = sim::planDdpKwargs(r);
  const std::string torch(ddp::semanticsProfileName(req.options.ddp.profile));
  if (args.has("json")) {
    nlohmann::json out;
    out["model"] = req.model.name;
    out["cluster"] = req.cluster.name;
    out["nodes"] = plan.layout.nodes;
    out["world_size"] = plan.layout.worldSize();
    out["torch"] = torch;
    out["objective"] = sim::planObjectiveName(plan.objective);
    out["workload"] = sim::workloadJson(def.summary.workload);
    out["default"] = summaryJson(def.summary);
    out["default"]["bucket_cap_mb"] =
        def.capDefault ? nlohmann::json(nullptr) : nlohmann::json(def.capMb);
    out["best_uniform"] = summaryJson(uni.summary);
    out["best_uniform"]["bucket_cap_mb"] = uni.capMb;
    out["best_uniform"]["gain_percent"] = r.uniformGainPercent;
    if (r.listSupported) {
      nlohmann::json buckets = nlohmann::json::array();
      for (const sim::PlannedBucket& b : r.layout.buckets) {
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
      for (const sim::SimulatedBucket& b : r.plannedAllreduces) {
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
    for (const sim::PlanFlag& f : r.flags) {
      flags.push_back({{"kwarg", f.kwarg},
                       {"without", summaryJson(f.without)},
                       {"with", summaryJson(f.with)},
                       {"gain_percent", f.gainPercent},
                       {"recommended", f.gainPercent > 0}});
    }
    out["flags"] = std::move(flags);
    out["recommend_list"] = r.recommendList;
    out["ddp_kwargs"] = kwargs;
    io.out << out.dump(2) << "\n";
    return Status::ok();
  }

  std::ostringstream o;
  o << "plan: " << req.model.name << " on " << req.cluster.name << ", " << plan.layout.nodes
    << " node(s), world size " << plan.layout.worldSize() << ", torch " << torch << ", objective: "
    << (plan.objective == sim::PlanObjective::kStep ? "step time" : "exposed comm") << "\n";
  o << sim::workloadText(def.summary.workload) << "\n";
  o << "1. uniform bucket_cap_mb (steady state, full simulation)\n";
  o << "   default (bucket_cap_mb left out"
    << (def.capDefault ? ": 25 MiB, 1 MiB first bucket" : "") << ")  " << ms(def.summary.stepTime)
    << " ms/step, exposed comm " << ms(def.summary.exposedComm) << " ms, " << def.summary.numBuckets
    << " buckets\n";
  o << "   best uniform bucket_cap_mb=" << formatShortest(uni.capMb) << "  "
    << ms(uni.summary.stepTime) << " ms/step, exposed comm " << ms(uni.summary.exposedComm)
    << " ms, " << uni.summary.numBuckets << " buckets: " << percent(r.uniformGainPercent)
    << " than the default\n\n";
  if (r.listSupported) {
    o << "2. planned layout: " << r.layout.buckets.size()
      << " buckets, contiguous in gradient-ready order (position 0 = first gradient ready)\n"
         "   allreduce launch/end in ms from the backward's start: the planner's model (nominal "
         "backward ends at "
      << ms(r.timeline.backwardEndNs) << ") and the full simulation (backward ends at "
      << ms(r.plannedBackwardEndNs) << ")\n";
    o << std::right << std::setw(9) << "bucket" << std::setw(13) << "gradients" << std::setw(11)
      << "MiB" << std::setw(6) << "cap" << std::setw(10) << "ready" << std::setw(10) << "launch"
      << std::setw(10) << "end" << std::setw(12) << "sim_launch" << std::setw(10) << "sim_end"
      << "\n";
    for (size_t k = 0; k < r.layout.buckets.size(); ++k) {
      const sim::PlannedBucket& b = r.layout.buckets[k];
      const bool simulated = k < r.plannedAllreduces.size();
      char line[192];
      std::snprintf(line, sizeof(line), "%9zu %5d..%-6d%11.3f%6lld%10.3f%10.3f%10.3f%12.3f%10.3f\n",
                    k, b.first, b.last, static_cast<double>(b.bytes) / sim::kPlanMiB,
                    static_cast<long long>(b.capMib), b.readyNs.toMillis(), b.startNs.toMillis(),
                    b.endNs.toMillis(), simulated ? r.plannedAllreduces[k].startNs.toMillis() : 0.0,
                    simulated ? r.plannedAllreduces[k].endNs.toMillis() : 0.0);
      o << line;
    }
    o << "   planner's model: contention delays the backward by " << ms(r.layout.computeDelayNs)
      << " ms; the last allreduce ends "
      << ms(r.layout.commEndNs - r.timeline.backwardEndNs - r.layout.computeDelayNs)
      << " ms after it\n";
    o << "   full simulation: " << ms(r.planned.stepTime) << " ms/step, exposed comm "
      << ms(r.planned.exposedComm) << " ms: " << percent(r.gainOverDefaultPercent)
      << " than the default, " << percent(r.gainOverUniformPercent) << " than the best uniform\n\n";
  } else {
    o << "2. planned layout: torch " << torch
      << " has no bucket_cap_mb_list, so only uniform caps can be expressed (plan with --torch "
         "2.15 for a per-bucket layout)\n\n";
  }
  o << "3. DDP call for torch " << torch << ":\n   DistributedDataParallel(model, " << kwargs
    << ")\n";
  if (r.listSupported && !r.recommendList) {
    o << "   (the per-bucket list does not beat the best uniform cap here)\n";
  }
  for (const sim::PlanFlag& f : r.flags) {
    o << "   " << f.kwarg << ": " << ms(f.without.stepTime) << " -> " << ms(f.with.stepTime)
      << " ms/step, exposed comm " << ms(f.without.exposedComm) << " -> " << ms(f.with.exposedComm)
      << " ms: " << percent(f.gainPercent) << (f.gainPercent > 0 ? " (included)" : " (left out)")
      << "\n";
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
