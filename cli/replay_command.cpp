// `ddpscope replay --trace RUN.json [what-if flags]`: re-simulates a measured run with its
// measured per-layer compute (sim/replay), first at the run's own settings (measured vs replayed
// step time), then with the what-if flags changed.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_flags.h"
#include "cli/sim_json.h"
#include "ddp/ddp_settings.h"
#include "sim/engine/workload.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"
#include "traces/chrome_writer.h"

namespace ddpscope::cli {
namespace {

// Flags besides the DDP settings that change the simulated configuration away from the trace's.
const char* const kWhatIfFlags[] = {"world-size", "nodes",          "batch",     "seq-len",
                                    "image-size", "sync-batchnorm", "strategy",  "all-ranks",
                                    "jitter",     "stragglers",     "contention"};

double percentError(Nanos predicted, Nanos measured) {
  if (measured.count() == 0) return 0;
  return 100.0 * static_cast<double>((predicted - measured).count()) /
         static_cast<double>(measured.count());
}

}  // namespace

Status runReplayCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope replay",
      "--trace RUN.json [--model M | --model-file F] [--cluster C | --cluster-file F]\n"
      "       [--world-size W | --nodes N] [--bucket-cap-mb X] [--find-unused] [...simulate "
      "flags]\n"
      "       [--trace-out out.json] [--json]",
      "Re-simulates a measured run (a trace written by 'ddpscope run', or any trace with the\n"
      "same lanes) with its measured per-layer forward/backward times, copy and optimizer\n"
      "times. Prints the measured step time against the replay at the run's own settings, then\n"
      "the what-if: the same run with the flags given changed. Communication comes from --cluster\n"
      "or, by default, from cpu-mpi calibrated on the run's own collectives (alpha-beta fit and\n"
      "contention). The per-rank batch stays the trace's unless --batch is given.");
  parser.option("trace", "RUN.json", "the measured run (Chrome trace, .json or .json.gz)");
  addSimulationFlags(parser, /*sweep=*/false, /*computeFrom=*/false);
  parser.option("trace-out", "PATH", "write the what-if's simulated Chrome trace here")
      .flag("json", "machine-readable output")
      .epilog(
          "example: ddpscope run --nproc 2 -- --model mlp-wide --iterations 10 --trace run.json\n"
          "         ddpscope replay --trace run.json --world-size 4 --bucket-cap-mb 5");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  auto trace = args.value("trace");
  if (!trace) return invalidArgument("--trace: required (the measured run's trace)");
  ASSIGN_OR_RETURN(SimulationRequest req, parseSimulationRequest(args, /*sweep=*/false, *trace));
  const sim::replay::MeasuredProfile& profile = req.measured->profile;
  const sim::replay::RunSettings& run = profile.settings;

  // 1. The run's own settings.
  ASSIGN_OR_RETURN(sim::WorldLayout ownLayout,
                   sim::makeWorldLayout(req.cluster, std::nullopt, run.worldSize));
  sim::SimOptions own = sim::replay::ownSettingsOptions(profile);
  own.contentionSlowdown = req.options.contentionSlowdown;
  const double rankFactor = profile.rankMaxFactor;
  ASSIGN_OR_RETURN(sim::replay::StepPrediction ownResult,
                   sim::replay::predictStep(req.model, req.cluster, ownLayout, own,
                                            req.compute.get(), rankFactor));
  const Nanos measured = profile.measuredStep;
  const Nanos replayed = ownResult.step;

  // 2. The what-if: the trace's settings, with every given flag applied.
  bool whatIf = anyDdpFlag(args, ddpFlagSet(/*sweep=*/false));
  for (const char* flag : kWhatIfFlags) whatIf |= args.has(flag);
  sim::SimOptions o = req.options;  // DDP settings: the run's own, changed by the flags given
  if (!args.has("sync-batchnorm")) o.syncBatchNorm = run.syncBatchNorm;
  ASSIGN_OR_RETURN(const LayoutFlags layoutFlags, parseLayoutFlags(args, run.worldSize));
  ASSIGN_OR_RETURN(sim::WorldLayout layout,
                   sim::makeWorldLayout(req.cluster, layoutFlags.nodes, layoutFlags.worldSize));
  o.recordTrace = args.has("trace-out");
  std::optional<sim::SimResult> what;
  if (whatIf || o.recordTrace) {
    ASSIGN_OR_RETURN(what, runSimulation(req, layout, o));
    if (auto path = args.value("trace-out")) {
      RETURN_IF_ERROR(traces::writeChromeTrace(what->timeline, *path));
    }
  }

  const double ownError = percentError(replayed, measured);
  if (args.has("json")) {
    nlohmann::json out;
    out["trace"] = *trace;
    out["model"] = req.model.name;
    out["world_size"] = run.worldSize;
    out["run_settings"] = ddp::ddpSettingsJson(run.ddp);  // as read from the trace
    out["workload"] = sim::workloadJson(ownResult.result.summary.workload);
    out["cluster"] = req.cluster.name;
    out["measured_iterations"] = profile.measuredIterations;
    out["measured_step_ms"] = measured.toMillis();
    out["replayed_step_ms"] = replayed.toMillis();
    out["replay_error_percent"] = ownError;
    out["rank_max_factor"] = rankFactor;
    if (whatIf) {
      SimulationRequest shown = req;
      shown.options = o;
      out["what_if"] = simSummaryJson(shown, layout, what->summary);
      out["what_if"]["vs_measured_percent"] = percentError(what->summary.stepTime, measured);
    }
    io.out << out.dump(2) << "\n";
    return Status::ok();
  }
  char line[256];
  io.out << "replay of " << *trace << ": " << req.model.name << ", " << run.worldSize
         << " rank(s), bucket_cap_mb " << run.ddp.bucketCapMb
         << (run.ddp.findUnusedParameters ? ", find_unused" : "")
         << (run.batchPerRank > 0
                 ? ", batch " + std::to_string(run.batchPerRank) + " per rank"
                 : std::string(", batch per rank unknown (not in the trace: import-torch "
                               "--batch-per-rank records it)"))
         << "\n";
  io.out << "  measured iterations " << profile.measuredIterations.front() << ".."
         << profile.measuredIterations.back() << " (" << profile.measuredIterations.size()
         << "), cluster " << req.cluster.name << " (alpha " << req.cluster.alphaBeta.intraAlphaUs
         << " us, beta " << req.cluster.alphaBeta.intraBetaGBps << " GB/s, contention "
         << req.cluster.contentionSlowdown << ")\n";
  io.out << sim::workloadText(ownResult.result.summary.workload);
  std::snprintf(line, sizeof(line), "  %-28s %10.3f ms\n", "measured step time (median)",
                measured.toMillis());
  io.out << line;
  std::snprintf(line, sizeof(line), "  %-28s %10.3f ms   (%+.2f %%)\n",
                "replayed at its own settings", replayed.toMillis(), ownError);
  io.out << line;
  if (run.worldSize > 1) {
    std::snprintf(line, sizeof(line),
                  "  (a typical rank: %.3f ms, x %.3f: the run's slowest-rank factor)\n",
                  ownResult.result.summary.stepTime.toMillis(), rankFactor);
    io.out << line;
  }
  if (whatIf) {
    SimulationRequest shown = req;
    shown.options = o;
    io.out << "what-if: " << formatSimSummary(shown, layout, what->summary);
    std::snprintf(line, sizeof(line), "  %-22s %+12.2f %%\n", "vs measured step",
                  percentError(what->summary.stepTime, measured));
    io.out << line;
  }
  if (auto path = args.value("trace-out")) io.out << "trace written to " << *path << "\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
