// `ddpscope plan`: the best bucket layout for a model on a cluster and the DDP call that
// produces it (sim/engine/plan.h does the work; this file parses flags and prints).
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/plan_request.h"
#include "api/simulation_json.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ddpscope::cli {
namespace {

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
      "--model M --cluster C [--nodes N | --world-size W] [--torch-version 1.13|2.15]\n"
      "       [--objective step|exposed] [--bucket-cap-mb X,...] [...simulate flags] [--json]\n"
      "       ddpscope plan --from-trace RUN.json [--cluster C] [...the same flags]",
      "Plans DDP's gradient buckets for a model on a cluster: the default and the best uniform\n"
      "bucket_cap_mb, the best per-bucket layout (an exact dynamic program over the bucket\n"
      "layouts PyTorch can build, then a full simulation of it), and the DDP keyword arguments\n"
      "that produce exactly that layout (bucket_cap_mb_list for torch 2.15, the best uniform cap\n"
      "for 1.13) plus the flags that help, each with its simulated effect.\n"
      "With --from-trace, plans a recorded run (a 'ddpscope run' trace, or a PyTorch profiler\n"
      "trace after 'ddpscope import-torch --model m.json ...'): its model, measured compute,\n"
      "world size and DDP settings, and cpu-mpi (a GPU trace: its GPU's built-in cluster)\n"
      "calibrated on its own collectives unless --cluster is given (as 'ddpscope replay').");
  parser.options(api::planSettingList())
      .flag("json", "machine-readable output")
      .epilog(
          "example: ddpscope plan --model gpt2-small --cluster dgx-a100 --nodes 4\n"
          "         ddpscope run --nproc 2 -- --model mlp-wide --iterations 10 --trace run.json\n"
          "         ddpscope plan --from-trace run.json")
      .deprecatedAlias("trace", "from-trace")
      .deprecatedAlias("torch", "torch-version");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const api::PlanRequest input, api::parsePlanRequest(args));
  ASSIGN_OR_RETURN(const sim::PlanResult r, api::runPlanRequest(input));
  if (args.has("json")) {
    io.out << api::planJson(input, r).dump(2) << "\n";
    return Status::ok();
  }

  const api::SimulationRequest& req = input.request;
  const sim::PlanSearch& plan = input.search;
  const sim::SweepPoint& def = r.uniform.points[r.defaultPoint];
  const sim::SweepPoint& uni = r.uniform.points[r.bestUniformPoint];
  const std::string kwargs = sim::planDdpKwargs(r);
  const std::string torch(ddp::semanticsProfileName(req.options.ddp.profile));
  std::ostringstream o;
  o << "plan: " << req.model.name << " on " << req.cluster.name << ", " << plan.layout.nodes
    << " node(s), world size " << plan.layout.worldSize() << ", torch " << torch << ", objective: "
    << (plan.objective == sim::PlanObjective::kStep ? "step time" : "exposed comm") << "\n";
  if (const std::string source = sim::allreduceTimeSource(req.cluster, plan.layout);
      !source.empty()) {
    o << source << "\n";
  }
  if (input.fromTrace) {
    o << "from the recorded run " << *req.computeFrom << ": measured step "
      << ms(input.measuredStep) << " ms (median of the slowest rank), replayed at its own "
      << "settings " << ms(input.replayedStep) << " ms; compute as measured, communication from "
      << req.cluster.name << "\n";
  }
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
      << " ms: ";
    if (!f.note.empty()) {
      o << "left out, " << f.note << "\n";
    } else {
      o << percent(f.gainPercent) << (f.included() ? " (included)" : " (left out)") << "\n";
    }
  }
  o << "\n4. layouts to measure in your own job (predicted, not measured: "
       "ddpscope.torch.tune times them\n   in interleaved rounds of real training steps and keeps "
       "the winner only when it beats the\n   current settings by more than the measured noise)\n";
  for (const api::PlanCandidate& c : api::planCandidates(input, r)) {
    o << std::right << std::setw(12) << ms(c.predictedStep) << " ms/step " << std::setw(4)
      << c.bucketBytes.size() << " buckets  " << c.label
      << (c.current && c.label != "current" ? " (current)" : "")
      << ": DistributedDataParallel(model" << (c.kwargs.empty() ? "" : ", " + c.kwargs) << ")\n";
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
