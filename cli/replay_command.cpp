// `ddpscope replay --from-trace RUN.json [what-if flags]`: re-simulates a measured run with its
// measured per-layer compute (sim/replay), first at the run's own settings (measured vs replayed
// step time), then with the what-if flags changed.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "api/replay_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_text.h"
#include "io/file_output.h"
#include "traces/chrome_writer.h"

namespace ddpscope::cli {
namespace {

// Before the one grammar, replay read its input with --trace and wrote with --trace-out. Until
// the next release, a command line without --from-trace keeps those meanings (with a note):
// --trace IN becomes --from-trace IN and --trace-out OUT becomes --trace OUT.
std::vector<std::string> oldReplaySpellings(const std::vector<std::string>& argv,
                                            std::ostream& notes) {
  auto named = [](const std::string& arg, const std::string& flag) {
    return arg == flag || arg.starts_with(flag + "=");
  };
  for (const std::string& arg : argv) {
    if (named(arg, "--from-trace")) return argv;
  }
  std::vector<std::string> out;
  bool noted = false;
  for (const std::string& arg : argv) {
    std::string now = arg;
    if (named(arg, "--trace")) {
      now = "--from-trace" + arg.substr(7);
    } else if (named(arg, "--trace-out")) {
      now = "--trace" + arg.substr(11);
    }
    if (now != arg && !noted) {
      notes << "ddpscope replay: note: --trace RUN.json as the input and --trace-out are "
               "deprecated and go in the next release; use --from-trace RUN.json and --trace "
               "OUT.json\n";
      noted = true;
    }
    out.push_back(std::move(now));
  }
  return out;
}

}  // namespace

Status runReplayCommand(const std::vector<std::string>& argvIn, CommandIo io) {
  ArgParser parser(
      "ddpscope replay",
      "--from-trace RUN.json [--model M] [--cluster C] [--world-size W | --nodes N]\n"
      "       [--bucket-cap-mb X] [--find-unused] [...simulate flags] [--trace OUT.json] [--json]",
      "Re-simulates a measured run (a trace written by 'ddpscope run', or any trace with the\n"
      "same lanes) with its measured per-layer forward/backward times, copy and optimizer\n"
      "times. Prints the measured step time against the replay at the run's own settings, then\n"
      "the what-if: the same run with the flags given changed. Communication comes from --cluster\n"
      "or, by default, from cpu-mpi calibrated on the run's own collectives (alpha-beta fit and\n"
      "contention); a GPU trace that names its GPU is calibrated on that GPU's built-in cluster\n"
      "instead (dgx-h100 for an H100; its NCCL model kept at one rank, and for a trace of some\n"
      "of the job's ranks, whose collectives hold the wait for the others). The per-rank batch\n"
      "stays the trace's unless --batch is given. The model is --model, else the trace's (the\n"
      "one import-torch read off a profile recorded with record_shapes=True). A GPU trace\n"
      "imported with its layers named also replays on the host lane from its own host facts:\n"
      "as profiled, without the profiler, and the what-if without the profiler (the profiler's\n"
      "own cost fitted to --unprofiled-step-ms, else from --host-profile, else h100-torch211's);\n"
      "--host-profile-out writes that host profile.\n"
      "A GPU trace's kernels ran on the GPU its deviceProperties name: on a --cluster of another\n"
      "GPU (or at another --dtype) the what-if carries each layer's kernels there by the ratio of\n"
      "the two GPUs' rooflines; the run's own settings replay on the traced GPU.");
  parser.options(api::replaySettingList());
  addTraceOutputFlags(parser, "write the what-if's simulated trace here");
  parser
      .option("host-profile-out", "FILE",
              "write the host lane's host profile (the trace's per-event costs without the "
              "profiler) here, for simulate/plan/sweep --host-profile FILE")
      .flag("json", "machine-readable output")
      .epilog(
          "example: ddpscope run --nproc 2 -- --model mlp-wide --iterations 10 --trace run.json\n"
          "         ddpscope replay --from-trace run.json --world-size 4 --bucket-cap-mb 5\n"
          "GPU:     ddpscope import-torch rank0.json.gz --model resnet50 --autocast -o r.json\n"
          "         ddpscope replay --from-trace r.json --model resnet50 --cluster dgx-h100 \\\n"
          "           --world-size 1 --unprofiled-step-ms 35.8 --bucket-cap-mb 1 \\\n"
          "           --host-profile-out host.json\n"
          "old spellings, accepted with a note until the next release: --trace RUN.json as the\n"
          "input (without --from-trace), --trace-out (--trace)");
  const std::vector<std::string> argv = oldReplaySpellings(argvIn, io.err);
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  RETURN_IF_ERROR(checkTraceOutputFlags(args));
  // Opened before the replay (a path that cannot be written fails first); the file appears only
  // once written.
  std::unique_ptr<io::OutputFile> profileOut;
  if (auto out = args.value("host-profile-out")) {
    StatusOr<std::unique_ptr<io::OutputFile>> opened = io::OutputFile::open(*out);
    if (!opened.isOk()) return invalidArgument("--host-profile-out: " + opened.status().message());
    profileOut = std::move(opened).value();
  }
  ASSIGN_OR_RETURN(const api::ReplayReport report,
                   api::runReplay(args, /*recordTrace=*/args.has("trace")));
  if (profileOut) {
    if (!report.hostLane) {
      std::string why;
      for (const std::string& note : report.notes) {
        if (note.starts_with("no host lane")) why = " (" + note + ")";
      }
      return invalidArgument("--host-profile-out: " + report.trace +
                             " has no host lane to write a host profile from" + why);
    }
    profileOut->stream() << sim::hostProfileJson(report.hostLane->profile).dump(2) << "\n";
    RETURN_IF_ERROR(profileOut->close());
  }
  std::vector<std::string> traceFiles;
  if (report.whatIfResult) {
    ASSIGN_OR_RETURN(traceFiles, writeTraceOutput(report.whatIfResult->timeline, args));
  }
  if (args.has("json")) {
    io.out << api::replayJson(report).dump(2) << "\n";
    return Status::ok();
  }
  const std::string& trace = report.trace;
  const api::SimulationRequest& req = report.request;
  const sim::replay::MeasuredProfile& profile = req.measured->profile;
  const sim::replay::RunSettings& run = profile.settings;
  const sim::replay::StepPrediction& ownResult = report.own;
  char line[256];
  io.out << "replay of " << trace << ": " << req.model.name << ", " << run.worldSize
         << " rank(s), bucket_cap_mb " << run.ddp.bucketCapMb
         << (run.ddp.findUnusedParameters ? ", find_unused" : "")
         << (run.batchPerRank > 0
                 ? ", batch " + std::to_string(run.batchPerRank) + " per rank"
                 : std::string(", batch per rank unknown (not in the trace: import-torch "
                               "--batch-per-rank records it)"))
         << "\n";
  io.out << "  measured iterations " << profile.measuredIterations.front() << ".."
         << profile.measuredIterations.back() << " (" << profile.measuredIterations.size()
         << "), cluster " << req.cluster.name << " (";
  if (req.cluster.commModel == sim::CommModelKind::kAlphaBeta) {
    const sim::AlphaBetaSpec& ab = req.cluster.alphaBeta;
    io.out << "alpha " << ab.intraAlphaUs << " us, beta " << ab.intraBetaGBps << " GB/s, base "
           << ab.baseUs << " us";
    if (ab.interBetaGBps > 0 &&
        (ab.interAlphaUs != ab.intraAlphaUs || ab.interBetaGBps != ab.intraBetaGBps)) {
      io.out << "; across nodes alpha " << ab.interAlphaUs << " us, beta " << ab.interBetaGBps
             << " GB/s";
    }
  } else {
    io.out << "NCCL " << req.cluster.ncclVersion << "'s model";
  }
  io.out << ", contention " << req.cluster.contentionSlowdown << ")\n";
  io.out << sim::workloadText(ownResult.result.summary.workload);
  std::snprintf(line, sizeof(line), "  %-28s %10.3f ms\n", "measured step time (median)",
                report.measuredStep.toMillis());
  io.out << line;
  std::snprintf(line, sizeof(line), "  %-28s %10.3f ms   (%+.2f %%)\n",
                "replayed at its own settings", report.own.step.toMillis(), report.ownErrorPercent);
  io.out << line;
  if (!report.stepByStep.empty()) {
    std::snprintf(line, sizeof(line), "  %-28s %10.3f ms   (%+.2f %%; median of %zu steps)\n",
                  "replayed step by step", report.stepByStepMedian.toMillis(),
                  report.stepByStepErrorPercent, report.stepByStep.size());
    io.out << line;
  }
  if (run.worldSize > 1) {
    std::snprintf(line, sizeof(line),
                  "  (a typical rank: %.3f ms, x %.3f: the run's slowest-rank factor)\n",
                  ownResult.result.summary.stepTime.toMillis(), report.rankMaxFactor);
    io.out << line;
  }
  if (report.whatIf) {
    api::SimulationRequest shown = req;
    shown.options = report.whatIfOptions;
    io.out << "what-if: "
           << formatSimSummary(shown, report.whatIfLayout, report.whatIfResult->summary);
    if (!report.carried.empty()) io.out << "  " << report.carried << "\n";
    std::snprintf(line, sizeof(line), "  %-22s %+12.2f %%\n", "vs measured step",
                  report.whatIfVsMeasuredPercent);
    io.out << line;
  }
  if (report.hostLane) {
    const api::ReplayReport::HostLane& lane = *report.hostLane;
    io.out << "host lane (the trace's host facts, " << lane.steps
           << " profiled step(s); each layer's kernels as measured"
           << (report.carried.empty() ? "" : ", in the what-if carried as above") << "):\n";
    std::snprintf(line, sizeof(line), "  %-40s %10.3f ms   (%+.2f %%)\n",
                  "own settings, host as profiled", lane.profiled.toMillis(),
                  lane.profiledErrorPercent);
    io.out << line;
    std::snprintf(line, sizeof(line), "  %-40s %10.3f ms   (plain training %.3f ms)\n",
                  "own settings, without the profiler", lane.unprofiled.toMillis(),
                  lane.unprofiledPlain.toMillis());
    io.out << line;
    const sim::HostPhaseWork& w = lane.unprofiledHostWork;
    std::snprintf(line, sizeof(line),
                  "  %-40s %10.3f ms   (forward %.3f, backward %.3f, optimizer %.3f)\n",
                  "  its host's own work", w.total().toMillis(), w.forward.toMillis(),
                  w.backward.toMillis(), w.optimizer.toMillis());
    io.out << line;
    if (lane.whatIfUnprofiled) {
      std::snprintf(line, sizeof(line), "  %-40s %10.3f ms\n", "what-if, without the profiler",
                    lane.whatIfUnprofiled->toMillis());
      io.out << line;
    }
    io.out << "  (the profiler's own cost: " << formatShortest(lane.profile.profilerEventUs)
           << " us per event, " << formatShortest(lane.profile.profilerModuleUs)
           << " us per module call, from " << lane.profilerFrom << ")\n";
  }
  for (const std::string& note : report.notes) io.out << "note: " << note << "\n";
  io.out << traceWrittenLine(traceFiles, args);
  return Status::ok();
}

}  // namespace ddpscope::cli
