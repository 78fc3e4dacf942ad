// `ddpscope host-profile list | show P | fit --facts F`: the host profiles (what the CPU pays per
// op and DDP's reducer per event; sim/cost/host_profile.h) and their fit from the host facts of
// real profiled PyTorch steps (sim/replay/host_fit.h).
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "io/file_output.h"
#include "sim/cost/cluster.h"
#include "sim/cost/host_profile.h"
#include "sim/replay/host_fit.h"

namespace ddpscope::cli {
namespace {

Status runProfileList(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope host-profile list", "",
                   "Lists the built-in host profiles: what the host pays per module call, forward\n"
                   "op, backward node and parameter, and what it stands for.");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  for (const std::string& name : sim::builtinHostProfileNames()) {
    ASSIGN_OR_RETURN(sim::HostProfile p, sim::loadBuiltinHostProfile(name));
    io.out << name << ": module " << formatShortest(p.moduleUs) << " us, forward op "
           << formatShortest(p.forwardOpUs) << " us, backward node "
           << formatShortest(p.backwardNodeUs) << " us, AccumulateGrad "
           << formatShortest(p.accumulateGradUs) << " us; stands for " << p.standsFor << "\n";
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
  ASSIGN_OR_RETURN(sim::HostProfile p, sim::loadBuiltinHostProfile(args.positionals()[0]));
  io.out << sim::hostProfileJson(p).dump(2) << "\n";
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
      "unprofiled eager and DDP medians (docs/spec/host-lane.md). Prints each model's\n"
      "simulated steps against the measured ones.");
  parser.option("facts", "FACTS.json", "host facts (scripts/gpu_kit/host_facts.py)")
      .option("hold-out", "MODEL", "fit without this model and predict it")
      .option("name", "N", "the profile's name (default: fitted)")
      .option("stands-for", "TEXT", "what the profile stands for: PyTorch, CPU, settings")
      .option("out", "FILE", "write the profile JSON here (-o FILE works too)")
      .flag("json", "print the fit as JSON");
  parser.options(sim::clusterSettingList());
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  if (!args.has("facts")) return invalidArgument("--facts: required (host_facts.py's JSON)");
  ASSIGN_OR_RETURN(std::vector<sim::replay::HostFacts> all,
                   sim::replay::loadHostFacts(*args.value("facts")));
  SettingValues clusterArgs = args;
  if (!clusterArgs.has("cluster")) clusterArgs.set("cluster", "dgx-h100");
  ASSIGN_OR_RETURN(sim::ClusterSpec cluster, sim::loadClusterFromSettings(clusterArgs));
  const std::string heldOut = args.value("hold-out").value_or("");
  std::vector<const sim::replay::HostFacts*> fitOn;
  bool found = heldOut.empty();
  for (const sim::replay::HostFacts& f : all) {
    if (f.model == heldOut) {
      found = true;
    } else {
      fitOn.push_back(&f);
    }
  }
  if (!found) return invalidArgument("--hold-out: no model '" + heldOut + "' in the facts");
  ASSIGN_OR_RETURN(
      sim::replay::HostFit fit,
      sim::replay::fitHostProfile(fitOn, cluster, args.value("name").value_or("fitted")));
  if (auto standsFor = args.value("stands-for")) fit.profile.standsFor = *standsFor;
  nlohmann::json rows = nlohmann::json::array();
  std::ostringstream report;
  report
      << "host profile " << fit.profile.name << " fitted on " << fitOn.size()
      << " model(s); profiler " << formatShortest(fit.profile.profilerEventUs) << " us per event, "
      << formatShortest(fit.profile.profilerModuleUs) << " us per module call\n"
      << "  model        eager: simulated  measured   error | DDP: simulated  measured   error\n";
  for (const sim::replay::HostFacts& f : all) {
    ASSIGN_OR_RETURN(sim::replay::HostSimulation s,
                     sim::replay::simulateHostFacts(f, cluster, fit.profile));
    const double eager = f.measuredMedianMs("eager");
    const double ddp = f.measuredMedianMs("ddp-default");
    const bool held = f.model == heldOut;
    rows.push_back({{"model", f.model},
                    {"held_out", held},
                    {"eager_ms", s.eagerMs},
                    {"measured_eager_ms", eager},
                    {"ddp_ms", s.ddpMs},
                    {"measured_ddp_ms", ddp}});
    report << "  " << std::left << std::setw(12) << (f.model + (held ? "*" : "")) << std::right
           << std::fixed << std::setprecision(2) << std::setw(16) << s.eagerMs << std::setw(10)
           << eager << std::setw(7) << std::setprecision(1) << std::showpos
           << 100 * (s.eagerMs / eager - 1) << "%" << std::noshowpos << std::setprecision(2)
           << std::setw(17) << s.ddpMs << std::setw(10) << ddp << std::setw(7)
           << std::setprecision(1) << std::showpos << 100 * (s.ddpMs / ddp - 1) << "%"
           << std::noshowpos << std::defaultfloat << "\n";
  }
  if (!heldOut.empty()) report << "  (* held out: not in the fit)\n";
  for (const std::string& note : fit.notes) report << "  note: " << note << "\n";
  const std::string profileText = sim::hostProfileJson(fit.profile).dump(2) + "\n";
  if (auto out = args.value("out")) {
    ASSIGN_OR_RETURN(auto file, io::OutputFile::open(*out));
    file->stream() << profileText;
    RETURN_IF_ERROR(file->close());
  }
  if (args.has("json")) {
    io.out << nlohmann::json{{"profile", sim::hostProfileJson(fit.profile)},
                             {"models", rows},
                             {"notes", fit.notes}}
                  .dump(2)
           << "\n";
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
