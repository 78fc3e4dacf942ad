// `ddpscope host-profile list | show P | fit --facts F`: the host profiles (what the CPU pays per
// op and DDP's reducer per event; sim/cost/host_profile.h) and their fit from the host facts of
// real profiled PyTorch steps (sim/replay/host_fit.h).
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "api/cluster_settings.h"
#include "api/host_profile_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "io/file_output.h"

namespace ddpscope::cli {
namespace {

Status runProfileList(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope host-profile list", "",
                   "Lists the built-in host profiles: what the host pays per module call, forward\n"
                   "op, backward node, CUDA runtime call and parameter, and what it stands for.");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const std::vector<sim::HostProfile> profiles, api::builtinHostProfiles());
  for (const sim::HostProfile& p : profiles) {
    io.out << p.name << ": module " << formatShortest(p.moduleUs) << " us, forward op "
           << formatShortest(p.forwardOpUs) << " us, backward node "
           << formatShortest(p.backwardNodeUs) << " us, launch " << formatShortest(p.launchUs)
           << " us, AccumulateGrad " << formatShortest(p.accumulateGradUs) << " us; stands for "
           << p.standsFor << "\n";
  }
  return Status::ok();
}

Status runProfileShow(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope host-profile show", "NAME",
                   "Prints a built-in host profile's JSON (sim/cost/host_profiles/FORMAT.md).");
  parser.positional("NAME", "a built-in host profile (ddpscope host-profile list)", true);
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const sim::HostProfile p, api::builtinHostProfile(args.positionals()[0]));
  io.out << api::hostProfileText(p);
  return Status::ok();
}

Status runProfileFit(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope host-profile fit",
      "--facts FACTS.json [--hold-out MODEL] [--cluster C] [--name N] [--stands-for TEXT]\n"
      "       [-o|--out FILE] [--json]",
      "Fits a host profile to the host facts of profiled PyTorch steps (written by\n"
      "scripts/gpu_kit/host_facts.py from the GPU kit's traces): each term is its per-event\n"
      "cost in the profiled steps less the profiler's, and the profiler's cost per event is\n"
      "fitted so that the simulator, with each layer's kernels as measured, meets the\n"
      "unprofiled eager and DDP medians (docs/spec/host-lane.md). Where the facts also hold\n"
      "the host's unprofiled time per phase (the kit's timed steps), the per-op, per-launch\n"
      "and DDP terms are fitted on those times instead, and the profiler's cost per event is\n"
      "what the profiled phases took more. Prints each model's simulated steps against the\n"
      "measured ones.");
  parser.options(api::hostProfileFitSettingList())
      .option("out", "FILE", "write the profile JSON here (-o FILE works too)")
      .flag("json", "print the fit as JSON");
  parser.options(api::clusterSettingList());
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const api::HostProfileFitRequest request, api::parseHostProfileFitRequest(args));
  ASSIGN_OR_RETURN(const api::HostProfileFitResult result, api::runHostProfileFit(request));
  const sim::replay::HostFit& fit = result.fit;
  std::ostringstream report;
  report
      << "host profile " << fit.profile.name << " fitted on " << result.fittedOn
      << " model(s); profiler " << formatShortest(fit.profile.profilerEventUs) << " us per event, "
      << formatShortest(fit.profile.profilerModuleUs) << " us per module call\n"
      << "  model        eager: simulated  measured   error | DDP: simulated  measured   error\n";
  for (const api::HostProfileFitRow& r : result.rows) {
    report << "  " << std::left << std::setw(12) << (r.model + (r.heldOut ? "*" : "")) << std::right
           << std::fixed << std::setprecision(2) << std::setw(16) << r.eagerMs << std::setw(10)
           << r.measuredEagerMs << std::setw(7) << std::setprecision(1) << std::showpos
           << 100 * (r.eagerMs / r.measuredEagerMs - 1) << "%" << std::noshowpos
           << std::setprecision(2) << std::setw(17) << r.ddpMs << std::setw(10) << r.measuredDdpMs
           << std::setw(7) << std::setprecision(1) << std::showpos
           << 100 * (r.ddpMs / r.measuredDdpMs - 1) << "%" << std::noshowpos << std::defaultfloat
           << "\n";
  }
  if (!request.heldOut.empty()) report << "  (* held out: not in the fit)\n";
  for (const std::string& note : fit.notes) report << "  note: " << note << "\n";
  const std::string profileText = api::hostProfileText(fit.profile);
  if (auto out = args.value("out")) {
    ASSIGN_OR_RETURN(auto file, io::OutputFile::open(*out));
    file->stream() << profileText;
    RETURN_IF_ERROR(file->close());
  }
  if (args.has("json")) {
    io.out << api::hostProfileFitJson(result).dump(2) << "\n";
  } else {
    io.out << report.str();
    if (!args.has("out")) io.out << profileText;
  }
  return Status::ok();
}

}  // namespace

Status runHostProfileCommand(const std::vector<std::string>& argv, CommandIo io) {
  return runSubcommand(
      "host-profile",
      {{"list", "the built-in host profiles, one line each", runProfileList},
       {"show NAME", "print a built-in host profile's JSON", runProfileShow},
       {"fit", "fit a host profile to the host facts of profiled PyTorch steps", runProfileFit}},
      argv, io);
}

}  // namespace ddpscope::cli
