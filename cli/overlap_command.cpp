#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "traces/chrome_reader.h"
#include "traces/overlap.h"
#include "traces/timeline.h"

namespace ddpscope::cli {
namespace {

void printStatsRow(std::ostream& o, const std::string& label, const traces::OverlapStats& s) {
  o << std::left << std::setw(12) << label << std::right << std::fixed << std::setprecision(3)
    << std::setw(13) << s.compute.toMillis() << std::setw(13) << s.comm.toMillis() << std::setw(14)
    << s.overlapped.toMillis() << std::setw(14) << s.exposedComm.toMillis() << std::setprecision(2)
    << std::setw(11) << traces::formatPercent(s) << "\n";
}

}  // namespace

Status runOverlapCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope overlap", "TRACE.json [--json] [--iterations]",
      "Compute/communication overlap per rank with Holistic Trace Analysis' definition:\n"
      "overlap % = 100 x |union(compute) ∩ union(comm)| / |union(comm)| over the whole trace;\n"
      "exposed comm = |union(comm)| - overlapped. Reads ddpscope traces and PyTorch profiler\n"
      "(Kineto) traces, plain or .gz. On a profiler trace the per-rank headline is Holistic\n"
      "Trace Analysis 0.5.0's get_comm_comp_overlap exactly: GPU kernels only (n/a on CPU\n"
      "traces), its µs rounding and kernel-name classes, and with two or more ProfilerSteps\n"
      "only the kernels launched before the last ProfilerStep starts (HTA drops the last\n"
      "profiled step). --iterations rows are each ProfilerStep window, unfiltered.");
  parser.positional("TRACE.json", "a Chrome trace (bare array or {\"traceEvents\": [...]})", true)
      .flag("iterations", "also print each iteration (from iteration / ProfilerStep markers)")
      .flag("json", "machine-readable output (times in ns)");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::string& path = args.positionals().at(0);
  ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(path));
  std::vector<traces::RankOverlap> ranks = traces::computeOverlap(timeline);

  if (args.has("json")) {
    const nlohmann::json out = traces::overlapJson(path, ranks);
    io.out << out.dump(2) << "\n";
    return Status::ok();
  }

  std::ostringstream o;
  o << "trace " << path << ": " << ranks.size() << " rank(s)\n";
  o << std::left << std::setw(12) << "rank" << std::right << std::setw(13) << "compute_ms"
    << std::setw(13) << "comm_ms" << std::setw(14) << "overlapped_ms" << std::setw(14)
    << "exposed_ms" << std::setw(11) << "overlap_%"
    << "\n";
  for (const auto& r : ranks) {
    printStatsRow(o, std::to_string(r.rank), r.total);
    if (args.has("iterations")) {
      for (const auto& it : r.iterations) {
        printStatsRow(o, "  iter " + std::to_string(it.index), it.stats);
      }
    }
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
