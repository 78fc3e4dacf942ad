// `ddpscope validate [--grid full|ci] [--out DIR] [--reuse]`: the validation harness's command
// line. The harness itself (grid, run plan, calibration per world size, held-out predictions,
// report and result files) is sim/validate/validate.h; this file parses the flags, trains each
// planned run with `ddpscope run` (this binary, in a child process) and prints the report.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process.h"
#include "cli/progress.h"
#include "sim/validate/grid.h"
#include "sim/validate/report.h"
#include "sim/validate/validate.h"

namespace ddpscope::cli {
namespace {

namespace fs = std::filesystem;

// The harness's runner: `ddpscope run <runArgs>` (this binary) with stdout/stderr to `log`;
// returns the exit code.
StatusOr<int> spawnRun(const std::vector<std::string>& runArgs, const fs::path& log) {
  ASSIGN_OR_RETURN(const std::string self, selfExecutable());
  std::vector<std::string> command = {self, "run"};
  command.insert(command.end(), runArgs.begin(), runArgs.end());
  return runChildProcess(std::move(command), {}, log.string());
}

}  // namespace

Status runValidateCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope validate", "[--grid full|ci] [--out DIR] [--reuse]",
      "The validation harness: trains for real on this machine (ddpscope run, CPU runtime under\n"
      "MPI) over a grid — models mlp-wide, resnet18 (32x32 images), a 2-layer GPT-2; world sizes\n"
      "1, 2, 4; bucket_cap_mb 1, 5, 25, 100; find_unused off/on — calibrates per world size on\n"
      "the cap-25 find_unused-off runs (communication: alpha-beta fit of their collectives;\n"
      "contention: fitted to their step times; compute: each run's measured layers) and\n"
      "predicts every other configuration from its settings alone. Prints measured vs\n"
      "predicted steady-state step time, the error per configuration,\n"
      "the MAPE over the held-out configurations and the worst one. The full grid trains each\n"
      "configuration twice (--repeat): measured steps are the median of the repeats, predictions\n"
      "the mean over the calibration run's repeats. '--grid ci' is a reduced grid (2 models,\n"
      "worlds 1 and 2, caps 5 and 25, once each) that runs in about a minute.");
  parser.option("grid", "full|ci", "which grid (default full)")
      .option("out", "DIR", "traces, logs, calibrated clusters and results (default validate-out)")
      .flag("reuse", "reuse traces already in DIR instead of running them again")
      .option("repeat", "R", "train each configuration R times (default: full 2, ci 1)")
      .option("mpirun", "PATH", "the mpirun to use (passed to ddpscope run)")
      .flag("quiet", "no progress on stderr (one line per trained configuration otherwise)")
      .flag("json", "print validate.json (MAPE, worst, rows) on stdout instead of the report")
      .option("csv", "PATH", "also write validate.csv (one row per configuration) to PATH");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::string gridName = args.value("grid").value_or("full");
  if (gridName != "full" && gridName != "ci") {
    return invalidArgument("--grid: expected full or ci, got '" + gridName + "'");
  }
  sim::validate::Grid grid =
      gridName == "full" ? sim::validate::fullGrid() : sim::validate::ciGrid();
  if (auto r = args.value("repeat")) {
    char* end = nullptr;
    const long value = std::strtol(r->c_str(), &end, 10);
    if (r->empty() || *end != '\0' || value < 1 || value > 20) {
      return invalidArgument("--repeat: expected an integer from 1 to 20, got '" + *r + "'");
    }
    grid.repeats = static_cast<int>(value);
  }
  const fs::path dir = args.value("out").value_or("validate-out");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalidArgument("--out: cannot create '" + dir.string() + "': " + ec.message());
  sim::validate::RunPlanOptions planOptions;
  planOptions.outDir = dir;
  planOptions.mpirun = args.value("mpirun");
  const sim::validate::RunPlan plan = sim::validate::planRuns(grid, planOptions);

  const bool json = args.has("json");
  // The plan goes to stderr with --json (stdout is then the result alone).
  (json ? io.err : io.out) << "running " << plan.configs.size() << " configurations x "
                           << grid.repeats << " (" << gridName << " grid, " << grid.warmup
                           << " warm-up + " << grid.iterations << " iterations each) into "
                           << dir.string() << "\n";
  io.out.flush();
  sim::validate::TrainOptions trainOptions;
  trainOptions.reuse = args.has("reuse");
  Progress progress = Progress::forCommand("validate", plan.runs.size(), io.err, args.has("quiet"));
  trainOptions.progress = [&progress](const sim::validate::RunProgress& p) {
    progress.update(static_cast<size_t>(p.done),
                    p.run ? p.run->trace.filename().string() : std::string());
  };
  ASSIGN_OR_RETURN(sim::validate::Report report,
                   sim::validate::runValidation(grid, plan, spawnRun, trainOptions));

  sim::validate::writeResultFiles(report, dir);
  if (auto csv = args.value("csv")) {
    std::ofstream file(*csv);
    sim::validate::writeCsv(report, file);
    if (!file) return invalidArgument("--csv: cannot write '" + *csv + "'");
  }
  if (json) {
    sim::validate::writeJson(report, io.out);
    return Status::ok();
  }
  char line[256];
  for (const sim::validate::WorldCalibration& cal : report.calibrations) io.out << cal.text;
  std::snprintf(line, sizeof(line), "\n%-10s %5s %6s %6s %12s %12s %9s\n", "model", "world", "cap",
                "f_unus", "measured ms", "predicted ms", "error");
  io.out << line;
  for (const sim::validate::Row& r : report.rows) {
    std::snprintf(line, sizeof(line), "%-10s %5d %6g %6s %12.3f %12.3f %+8.2f%%%s\n",
                  r.config.model.label.c_str(), r.config.world, r.config.cap,
                  r.config.findUnused ? "on" : "off", r.measured.toMillis(), r.predicted.toMillis(),
                  r.errorPercent, r.config.calibration ? "  (calibration run)" : "");
    io.out << line;
  }
  const sim::validate::Summary& s = report.summary;
  std::snprintf(line, sizeof(line),
                "\nheld-out MAPE %.2f %% over %zu configurations (calibration runs replayed: "
                "%.2f %%)\n",
                s.heldOutMapePercent, s.heldOut, s.inSampleMapePercent);
  io.out << line;
  for (const sim::validate::WorldMape& w : s.perWorld) {
    std::snprintf(line, sizeof(line), "  world %d: MAPE %.2f %% (%d)\n", w.world, w.mapePercent,
                  w.configurations);
    io.out << line;
  }
  if (s.worst) {
    std::snprintf(line, sizeof(line), "worst: %s  measured %.3f ms, predicted %.3f ms (%+.2f %%)\n",
                  s.worst->config.name().c_str(), s.worst->measured.toMillis(),
                  s.worst->predicted.toMillis(), s.worst->errorPercent);
    io.out << line;
  }
  std::snprintf(line, sizeof(line), "runs took %.1f s; results in %s\n", report.runTime.toSeconds(),
                (dir / "validate.csv").string().c_str());
  io.out << line;
  return Status::ok();
}

}  // namespace ddpscope::cli
