// `ddpscope tune-report REPORT.json`: what ddpscope.torch.tune measured in a job and decided
// (api/tune_report.h reads and checks the report).
#include <cstdio>
#include <sstream>
#include <string>

#include "api/tune_report.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"

namespace ddpscope::cli {

Status runTuneReportCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope tune-report", "REPORT.json",
      "Prints the report ddpscope.torch.tune wrote in a training job: every candidate DDP\n"
      "layout with its predicted and measured step (the median over the rounds of each round's\n"
      "median, slowest rank), DDP's own bucket count, the rounds it beat the current settings in\n"
      "and the sign test's p-value; then the decision, its reason and the DDP call to paste.\n"
      "The report's schema is docs/schemas/tune-report.schema.json (docs/tuning.md).");
  parser.positional("REPORT.json", "a report written by ddpscope.torch.tune(report=...)", true);
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::string& path = args.positionals().at(0);
  ASSIGN_OR_RETURN(const api::TuneReport r, api::readTuneReport(path));
  std::ostringstream o;
  o << "tune report " << path << ": " << r.model << ", world size " << r.worldSize << ", "
    << r.backend << " on " << r.device << ", torch " << r.torch << "; steps timed by " << r.timing
    << "\n";
  o << "prediction: " << r.prediction << "\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-34s %7s %12s %12s %8s %7s %8s\n", "candidate", "buckets",
                "predicted_ms", "measured_ms", "gain_%", "won", "p");
  o << line;
  for (const api::TuneReportCandidate& c : r.candidates) {
    const std::string label = c.label.size() > 34 ? c.label.substr(0, 31) + "..." : c.label;
    const std::string buckets = c.buckets ? std::to_string(*c.buckets) : "-";
    char predicted[32] = "-";
    if (c.predictedMs) std::snprintf(predicted, sizeof(predicted), "%.2f", *c.predictedMs);
    char won[32] = "-", p[32] = "-", gain[32] = "-";
    if (!c.current) {
      std::snprintf(won, sizeof(won), "%lld/%lld", static_cast<long long>(c.roundsFaster),
                    static_cast<long long>(r.rounds));
      std::snprintf(p, sizeof(p), "%.4f", c.pValue);
      std::snprintf(gain, sizeof(gain), "%+.1f", c.gainPercent);
    }
    std::snprintf(line, sizeof(line), "%s %-34s %7s %12s %12.2f %8s %7s %8s%s\n",
                  c.chosen ? "*" : " ", label.c_str(), buckets.c_str(), predicted, c.measuredMs,
                  gain, won, p, c.current ? "  (current)" : (c.eligible ? "  (eligible)" : ""));
    o << line;
  }
  o << "\ndecision: " << r.reason << "\n";
  auto oneDecimal = [](double x) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f", x);
    return std::string(text);
  };
  o << "test: " << r.test << ", alpha " << r.alpha << "; noise floor "
    << oneDecimal(r.noiseFloorPercent) << " %\n";
  o << "cost: " << r.stepsTotal << " training steps (" << r.stepsRecord << " recorded, "
    << r.stepsWarmup << " warm-up, " << r.stepsMeasured << " measured), " << oneDecimal(r.seconds)
    << " s\n";
  o << "next time: " << r.paste << "\n";
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
