// `ddpscope validate [--python PYTHON] [--grid full|ci] [--out DIR] [--reuse]`: the validation
// harness's command line. The harness itself (grid, run plan, calibration per world size, held-out
// predictions, noise floor, report and result files) is sim/validate/validate.h; this file parses
// the flags, trains each planned run with `ddpscope run` (this binary, in a child process) or,
// with --python, the embedded torch_ddp_job.py under that python, and prints the report.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "api/validate_request.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process.h"
#include "cli/progress.h"

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

// One thread per rank, whatever the caller's environment says.
const std::vector<ChildEnv> kTorchEnv = {
    {"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"MKL_NUM_THREADS", "1"}};

// --python PYTHON: a path (with a '/') as given, else the first executable of that name on PATH.
StatusOr<std::string> resolvePython(const std::string& python) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (python.empty()) return invalidArgument("--python: expected the path of a python with torch");
  if (python.find('/') != std::string::npos) {
    if (!executable(python)) {
      return invalidArgument("--python: '" + python + "' is not an executable file");
    }
    return python;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(begin, end - begin)) / python;
    if (end > begin && executable(candidate)) return candidate.string();
    begin = end + 1;
  }
  return invalidArgument("--python: no executable '" + python + "' on PATH");
}

// The last non-empty line of a log, for an error message.
std::string lastLine(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// Writes the embedded job script into `dir` and checks that `python` runs it with a torch that
// has the Kineto profiler (the script's --check). Returns the script's path.
StatusOr<fs::path> prepareTorchJob(const std::string& python, const fs::path& dir) {
  const fs::path script = dir / "torch_ddp_job.py";
  {
    std::ofstream out(script);
    out << sim::validate::torchJobScript();
    if (!out) return invalidArgument("--out: cannot write '" + script.string() + "'");
  }
  const fs::path log = dir / "torch-check.log";
  ASSIGN_OR_RETURN(int code,
                   runChildProcess({python, script.string(), "--check"}, kTorchEnv, log.string()));
  if (code != 0) {
    const std::string why = lastLine(log);
    return invalidArgument("--python: '" + python + "' cannot run the PyTorch job (exit " +
                           std::to_string(code) + (why.empty() ? "" : ": " + why) + "); see " +
                           log.string());
  }
  return script;
}

// The command's flags and help.
ArgParser makeValidateParser() {
  ArgParser parser(
      "ddpscope validate", "[--python PYTHON] [--grid full|ci] [--out DIR] [--reuse] [--json]",
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
      "worlds 1 and 2, caps 5 and 25, once each) that runs in about a minute.\n"
      "\n"
      "Beside the MAPE it prints the p95 error and the host's noise floor: how far two runs of\n"
      "the same configuration lie apart (its repeats, and the noise runs: each model's cap-25\n"
      "run at the largest world size trained again, spread evenly over the grid so drift hits\n"
      "every configuration alike). A MAPE near the noise floor is host noise, not model error.\n"
      "\n"
      "--python PYTHON trains with real PyTorch DDP instead (gloo, CPU, one process and one "
      "thread\n"
      "per rank; a python whose torch has the Kineto profiler, e.g. torch from PyPI): the\n"
      "embedded torch_ddp_job.py (written into DIR) trains models mlp-wide and resnet18 (32x32\n"
      "images) at world sizes 1 and 2, bucket_cap_mb 1, 5, 25, 100, find_unused off/on, once\n"
      "each, plus 4 noise runs per model, profiles every iteration (record_shapes=True) and its\n"
      "per-rank traces are imported as 'import-torch --model' does; calibration and predictions\n"
      "as above. '--grid ci' with --python: mlp-wide, caps 5 and 25, 2 noise runs.");
  parser.option("python", "PYTHON", "train with real PyTorch DDP under this python (see above)")
      .option("grid", "full|ci", "which grid (default full)")
      .option("out", "DIR", "traces, logs, calibrated clusters and results (default validate-out)")
      .flag("reuse", "reuse traces already in DIR instead of running them again")
      .option("repeat", "R", "train each configuration R times (default: full 2, ci 1)")
      .option("noise-runs", "N",
              "noise runs per model (default: runtime grids 0, their repeats give the floor; "
              "--python full 4, ci 2)")
      .option("mpirun", "PATH", "the mpirun to use (passed to ddpscope run; not with --python)")
      .flag("quiet", "no progress on stderr (one line per trained configuration otherwise)")
      .flag("json",
            "print validate.json (MAPE, p95, noise floor, worst, rows) on stdout instead of the "
            "report")
      .option("csv", "PATH", "also write validate.csv (one row per configuration) to PATH")
      .deprecatedAlias("torch", "python");
  return parser;
}

// --NAME N: an integer from `least` to `most`; nullopt when the flag is absent.
StatusOr<std::optional<int>> validateCountFlag(const ParsedArgs& args, const std::string& name,
                                               long least, long most) {
  const std::optional<std::string> text = args.value(name);
  if (!text) return std::optional<int>();
  char* end = nullptr;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || value < least || value > most) {
    return invalidArgument("--" + name + ": expected an integer from " + std::to_string(least) +
                           " to " + std::to_string(most) + ", got '" + *text + "'");
  }
  return std::optional<int>(static_cast<int>(value));
}

// What the flags ask for, checked: the grid, who trains it and where its files go.
struct ValidateSetup {
  std::string gridName;              // full or ci
  std::optional<std::string> torch;  // --python as given: train with real PyTorch DDP
  std::string python;                // --python resolved to an executable
  sim::validate::Grid grid;          // with --noise-runs and --repeat applied
  fs::path dir;                      // --out, created
};

// The grid, the python (--python) and the output folder (created) from the flags.
StatusOr<ValidateSetup> readValidateSetup(const ParsedArgs& args) {
  ValidateSetup setup;
  setup.gridName = args.value("grid").value_or("full");
  if (setup.gridName != "full" && setup.gridName != "ci") {
    return invalidArgument("--grid: expected full or ci, got '" + setup.gridName + "'");
  }
  setup.torch = args.value("python");
  if (setup.torch && args.has("mpirun")) {
    return invalidArgument("--mpirun: only for ddpscope's runtime; --python runs gloo jobs");
  }
  if (setup.torch) {
    ASSIGN_OR_RETURN(setup.python, resolvePython(*setup.torch));
  }
  const bool full = setup.gridName == "full";
  if (setup.torch) {
    setup.grid = full ? sim::validate::torchFullGrid() : sim::validate::torchCiGrid();
  } else {
    setup.grid = full ? sim::validate::fullGrid() : sim::validate::ciGrid();
  }
  ASSIGN_OR_RETURN(const std::optional<int> noiseRuns,
                   validateCountFlag(args, "noise-runs", 0, 50));
  if (noiseRuns) setup.grid.noiseRuns = *noiseRuns;
  ASSIGN_OR_RETURN(const std::optional<int> repeats, validateCountFlag(args, "repeat", 1, 20));
  if (repeats) setup.grid.repeats = *repeats;
  setup.dir = args.value("out").value_or("validate-out");
  std::error_code ec;
  fs::create_directories(setup.dir, ec);
  if (ec) {
    return invalidArgument("--out: cannot create '" + setup.dir.string() + "': " + ec.message());
  }
  return setup;
}

// The harness's runner: `ddpscope run` (this binary), or with --python the embedded job script
// under that python (written into the output folder and checked first).
StatusOr<sim::validate::Runner> validateRunner(const ValidateSetup& setup) {
  if (!setup.torch) return sim::validate::Runner(spawnRun);
  ASSIGN_OR_RETURN(const fs::path script, prepareTorchJob(setup.python, setup.dir));
  return sim::validate::Runner(
      [python = setup.python, script](const std::vector<std::string>& runArgs,
                                      const fs::path& log) -> StatusOr<int> {
        std::vector<std::string> command = {python, script.string()};
        command.insert(command.end(), runArgs.begin(), runArgs.end());
        return runChildProcess(std::move(command), kTorchEnv, log.string());
      });
}

// One line saying what will run: configurations, repeats, noise runs, grid, trainer,
// iterations and the output folder.
void printValidatePlan(const ValidateSetup& setup, const sim::validate::RunPlan& plan,
                       std::ostream& out) {
  const sim::validate::Grid& grid = setup.grid;
  out << "running " << plan.configs.size() << " configurations x " << grid.repeats << " + "
      << (plan.runs.size() - plan.configs.size() * grid.repeats) << " noise runs ("
      << setup.gridName << " grid, "
      << (setup.torch ? "real PyTorch DDP under " + setup.python : "ddpscope run") << ", "
      << grid.warmup << " warm-up + " << grid.iterations << " iterations each) into "
      << setup.dir.string() << "\n";
}

// Trains the plan's runs (--reuse: keeps traces already there; progress on `err` unless
// --quiet), then calibrates and predicts: the harness's report.
StatusOr<sim::validate::Report> trainAndValidate(const ParsedArgs& args,
                                                 const sim::validate::Grid& grid,
                                                 const sim::validate::RunPlan& plan,
                                                 const sim::validate::Runner& runner,
                                                 std::ostream& err) {
  sim::validate::TrainOptions trainOptions;
  trainOptions.reuse = args.has("reuse");
  Progress progress = Progress::forCommand("validate", plan.runs.size(), err, args.has("quiet"));
  trainOptions.progress = [&progress](const sim::validate::RunProgress& p) {
    progress.update(static_cast<size_t>(p.done),
                    p.run ? p.run->trace.filename().string() : std::string());
  };
  return sim::validate::runValidation(grid, plan, runner, trainOptions);
}

// validate.csv and validate.json into `dir`, and with --csv the CSV to that path too.
Status writeValidateResults(const ParsedArgs& args, const sim::validate::Report& report,
                            const fs::path& dir) {
  sim::validate::writeResultFiles(report, dir);
  if (auto csv = args.value("csv")) {
    std::ofstream file(*csv);
    sim::validate::writeCsv(report, file);
    if (!file) return invalidArgument("--csv: cannot write '" + *csv + "'");
  }
  return Status::ok();
}

// The report's first part: the torch version (--python), each world size's calibration and the
// table of measured and predicted steps per configuration.
void printValidateTable(const sim::validate::Report& report, std::ostream& out) {
  char line[256];
  if (!report.torchVersion.empty())
    out << "real PyTorch DDP: torch " << report.torchVersion << "\n";
  for (const sim::validate::WorldCalibration& cal : report.calibrations) out << cal.text;
  std::snprintf(line, sizeof(line), "\n%-10s %5s %6s %6s %12s %12s %9s\n", "model", "world", "cap",
                "f_unus", "measured ms", "predicted ms", "error");
  out << line;
  for (const sim::validate::Row& r : report.rows) {
    std::snprintf(line, sizeof(line), "%-10s %5d %6g %6s %12.3f %12.3f %+8.2f%%%s\n",
                  r.config.model.label.c_str(), r.config.world, r.config.cap,
                  r.config.findUnused ? "on" : "off", r.measured.toMillis(), r.predicted.toMillis(),
                  r.errorPercent, r.config.calibration ? "  (calibration run)" : "");
    out << line;
  }
}

// The report's summary: held-out MAPE and p95, the noise floor, MAPE per world size, the worst
// configuration, the time the runs took and where the results are.
void printValidateSummary(const sim::validate::Report& report, const fs::path& dir,
                          std::ostream& out) {
  char line[256];
  const sim::validate::Summary& s = report.summary;
  std::snprintf(line, sizeof(line),
                "\nheld-out MAPE %.2f %%, p95 error %.2f %% over %zu configurations (calibration "
                "runs replayed: %.2f %%)\n",
                s.heldOutMapePercent, s.heldOutP95Percent, s.heldOut, s.inSampleMapePercent);
  out << line;
  const sim::validate::NoiseFloor& n = report.noise;
  if (n.pairs > 0) {
    const std::optional<double> ratio = sim::validate::mapeOverNoise(report);
    char ratioText[64] = "n/a (a zero noise floor)";
    if (ratio) std::snprintf(ratioText, sizeof(ratioText), "%.2fx", *ratio);
    std::snprintf(line, sizeof(line),
                  "noise floor (two runs of one configuration): MAPE %.2f %%, p95 %.2f %% over "
                  "%zu runs of %zu configurations; held-out MAPE = %s the noise floor\n",
                  n.mapePercent, n.p95Percent, n.runs, n.configurations, ratioText);
  } else {
    std::snprintf(line, sizeof(line),
                  "noise floor: unknown (no configuration ran twice: --repeat 2 or --noise-runs "
                  "N)\n");
  }
  out << line;
  for (const sim::validate::WorldMape& w : s.perWorld) {
    std::snprintf(line, sizeof(line), "  world %d: MAPE %.2f %% (%d)\n", w.world, w.mapePercent,
                  w.configurations);
    out << line;
  }
  if (s.worst) {
    std::snprintf(line, sizeof(line), "worst: %s  measured %.3f ms, predicted %.3f ms (%+.2f %%)\n",
                  s.worst->config.name().c_str(), s.worst->measured.toMillis(),
                  s.worst->predicted.toMillis(), s.worst->errorPercent);
    out << line;
  }
  std::snprintf(line, sizeof(line), "runs took %.1f s; results in %s\n", report.runTime.toSeconds(),
                (dir / "validate.csv").string().c_str());
  out << line;
}

}  // namespace

Status runValidateCommand(const std::vector<std::string>& argv, CommandIo io) {
  const ArgParser parser = makeValidateParser();
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const ValidateSetup setup, readValidateSetup(args));
  sim::validate::RunPlanOptions planOptions;
  planOptions.outDir = setup.dir;
  planOptions.mpirun = args.value("mpirun");
  const sim::validate::RunPlan plan = sim::validate::planRuns(setup.grid, planOptions);
  ASSIGN_OR_RETURN(const sim::validate::Runner runner, validateRunner(setup));

  const bool json = args.has("json");
  // The plan goes to stderr with --json (stdout is then the result alone).
  printValidatePlan(setup, plan, json ? io.err : io.out);
  io.out.flush();
  ASSIGN_OR_RETURN(const sim::validate::Report report,
                   trainAndValidate(args, setup.grid, plan, runner, io.err));

  RETURN_IF_ERROR(writeValidateResults(args, report, setup.dir));
  if (json) {
    sim::validate::writeJson(report, io.out);
    return Status::ok();
  }
  printValidateTable(report, io.out);
  printValidateSummary(report, setup.dir, io.out);
  return Status::ok();
}

}  // namespace ddpscope::cli
