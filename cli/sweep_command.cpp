#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/simulation_json.h"
#include "api/sweep_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "cli/sim_text.h"
#include "traces/chrome_writer.h"

namespace ddpscope::cli {
namespace {}  // namespace

Status runSweepCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope sweep",
      "--model M --cluster C\n"
      "       [--nodes N,... | --world-size W,...] [--bucket-cap-mb X,...] [--find-unused "
      "on|off|both]\n"
      "       [--compile MODE,...]\n"
      "       [...simulate flags] [--csv PATH] [--json] [--trace PATH]",
      "Simulates every combination of bucket cap, world size, find_unused_parameters and\n"
      "torch.compile mode (on all cores) and prints a table, then the best bucket_cap_mb per\n"
      "world size (and mode) and its gain over PyTorch's default of 25.");
  parser.options(api::simulationSettingList(/*sweep=*/true));
  parser.option("csv", "PATH", "write one CSV row per configuration")
      .option("trace", "PATH",
              "write the best configuration's Chrome trace (per world size: PATH-wW.json when "
              "several)")
      .flag("json", "machine-readable output: {\"rows\": [...], \"best\": [...]}")
      .flag("quiet", "no progress on stderr (shown for sweeps that take more than 2 s)")
      .epilog(
          "example: ddpscope sweep --model gpt2-xl --cluster dgx-h100 --nodes 1,2,4,8 \\\n"
          "           --bucket-cap-mb 1,5,25,100 --find-unused both");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const api::SweepRequest plan, api::parseSweepRequest(args));
  const api::SimulationRequest& req = plan.request;
  const std::vector<sim::WorldLayout>& layouts = plan.layouts;
  const std::vector<bool>& findUnused = plan.findUnused;
  const bool severalModes = plan.compileModes.size() > 1;
  Progress progress = Progress::forCommand("sweep", 0, io.err, args.has("quiet"));
  ASSIGN_OR_RETURN(const sim::SweepResult result,
                   api::runSweepRequest(plan, [&progress](size_t finished, size_t total) {
                     progress.setTotal(total);
                     progress.update(finished);
                   }));
  const std::vector<sim::SweepPoint>& rows = result.points;
  const std::vector<sim::SweepBest>& best = result.best;
  const size_t swept = plan.size();

  if (auto path = args.value("csv")) {
    std::ofstream csv(*path);
    if (!csv) return invalidArgument("--csv: cannot write '" + *path + "'");
    csv << "model,cluster,nodes,world_size,bucket_cap_mb,find_unused_parameters,step_ms,first_"
           "iteration_ms,"
           "forward_ms,backward_ms,comm_ms,exposed_comm_ms,overlap_percent,num_buckets,compile\n";
    for (size_t i = 0; i < swept; ++i) {
      const auto& r = rows[i];
      const auto& s = r.summary;
      csv << req.model.name << "," << req.cluster.name << "," << r.layout.nodes << ","
          << r.layout.worldSize() << "," << r.capMb << "," << (r.findUnused ? 1 : 0) << ","
          << s.stepTime.toMillis() << "," << s.firstIteration.toMillis() << ","
          << s.forward.toMillis() << "," << s.backward.toMillis() << "," << s.comm.toMillis() << ","
          << s.exposedComm.toMillis() << "," << s.overlapPercent << "," << s.numBuckets << ","
          << sim::compileModeName(r.compile) << "\n";
    }
    if (!csv) return invalidArgument("--csv: write to '" + *path + "' failed");
  }

  if (auto path = args.value("trace")) {
    for (size_t k = 0; k < best.size(); ++k) {
      const sim::SweepPoint& c = rows[best[k].point];
      if (findUnused.size() > 1 && c.findUnused) continue;  // trace the find_unused=off best
      std::string out = *path;
      if (layouts.size() > 1 || severalModes) {
        std::string stem = out;
        std::string ext;
        if (auto dot = out.rfind(".json"); dot != std::string::npos) {
          stem = out.substr(0, dot);
          ext = out.substr(dot);
        }
        if (layouts.size() > 1) stem += "-w" + std::to_string(c.layout.worldSize());
        if (severalModes) stem += "-" + std::string(sim::compileModeName(c.compile));
        out = stem + ext;
      }
      sim::SimOptions o = sim::sweepPointOptions(req.options, c);
      o.recordTrace = true;
      ASSIGN_OR_RETURN(sim::SimResult traced, api::runSimulation(req, c.layout, o));
      RETURN_IF_ERROR(traces::writeChromeTrace(traced.timeline, out));
      io.err << "trace of the best configuration for world size " << c.layout.worldSize()
             << " written to " << out << "\n";
    }
  }

  if (args.has("json")) {
    io.out << api::sweepJson(plan, result).dump(2) << "\n";
    return Status::ok();
  }

  std::ostringstream o;
  o << "sweep: " << req.model.name << " on " << req.cluster.name << ", " << swept
    << " configurations (" << req.options.dtype << ")\n";
  std::set<std::pair<int, int>> layoutsShown;
  for (const auto& r : rows) {
    if (!layoutsShown.insert({r.layout.nodes, r.layout.gpusPerNode}).second) continue;
    const std::string source = sim::allreduceTimeSource(req.cluster, r.layout);
    if (!source.empty()) o << "  " << r.layout.worldSize() << " ranks: " << source << "\n";
  }
  o << sim::workloadText(rows.front().summary.workload);
  o << (severalModes ? "  (each row below sets its own bucket_cap_mb, find_unused_parameters, "
                       "compile mode and world layout)\n\n"
                     : "  (each row below sets its own bucket_cap_mb, find_unused_parameters and "
                       "world layout)\n\n");
  o << std::right << std::setw(6) << "nodes" << std::setw(7) << "world" << std::setw(8) << "cap_MiB"
    << std::setw(7) << "unused" << std::setw(12) << "step_ms" << std::setw(12) << "comm_ms"
    << std::setw(13) << "exposed_ms" << std::setw(11) << "overlap_%" << std::setw(9) << "buckets"
    << (severalModes ? "  compile" : "") << "\n";
  for (size_t i = 0; i < swept; ++i) {
    const auto& r = rows[i];
    const auto& s = r.summary;
    const bool isBest = std::any_of(best.begin(), best.end(),
                                    [&](const sim::SweepBest& b) { return b.point == i; });
    o << std::setw(6) << r.layout.nodes << std::setw(7) << r.layout.worldSize() << std::setw(8)
      << formatShortest(r.capMb) << std::setw(7) << (r.findUnused ? "yes" : "no") << std::fixed
      << std::setprecision(3) << std::setw(12) << s.stepTime.toMillis() << std::setw(12)
      << s.comm.toMillis() << std::setw(13) << s.exposedComm.toMillis() << std::setprecision(2)
      << std::setw(11) << s.overlapPercent << std::setw(9) << s.numBuckets
      << (severalModes ? "  " + std::string(sim::compileModeName(r.compile)) : "")
      << (isBest ? "  *" : "") << "\n";
  }
  o << (severalModes ? "\nbest bucket_cap_mb per world size and compile mode (* above):\n"
                     : "\nbest bucket_cap_mb per world size (* above):\n");
  for (const auto& b : best) {
    const auto& r = rows[b.point];
    char line[256];
    std::snprintf(
        line, sizeof(line),
        "  world %5d%s%s: bucket_cap_mb %-5s %10.3f ms/step, %.1f%% %s than %s "
        "(%.3f ms)\n",
        r.layout.worldSize(), r.findUnused ? " find_unused" : "",
        severalModes ? (" " + std::string(sim::compileModeName(r.compile))).c_str() : "",
        formatShortest(r.capMb).c_str(), r.summary.stepTime.toMillis(), std::abs(b.gainPercent),
        b.gainPercent < 0 ? "slower" : "faster",
        rows[b.baseline].capDefault ? "the default bucket_cap_mb=None" : "bucket_cap_mb=25",
        rows[b.baseline].summary.stepTime.toMillis());
    o << line;
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
