// `ddpscope validate [--grid full|ci] [--out DIR]`: the validation harness. Trains for real on
// this machine ('ddpscope run': MPI ranks of the CPU runtime) over a grid of models, world sizes,
// bucket caps and find_unused settings; calibrates on one part and predicts the held-out rest
// with replay's machinery; prints measured vs predicted steady-state step time per
// configuration, the MAPE and the worst configuration.
//
// Calibration, per world size W: the runs at the grid's calibration cap (25, DDP's default) with
// find_unused off (one per model). The α–β comm model is fitted on those runs of W
// pooled over the models (sim/replay/calibrate.h), the contention factor to their step times
// (replay.h fitContentionToSteps), the compute of each (model, W) is its own calibration run's
// MeasuredComputeModel and its slowest-rank factor (sim/replay/replay.h predictStep). Every other
// configuration is held out: only its settings (cap, find_unused) are used for the prediction, its
// trace only for the measured step time. Calibrating per world size is deliberate: on a host with
// fewer cores than ranks (world 4 on 2 cores) compute and communication both slow down with W,
// which a per-rank model cannot know.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "base/median.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "ddp/ddp_config.h"
#include "sim/cost/cluster.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli {
namespace {

namespace fs = std::filesystem;

struct GridModel {
  std::string label;  // file-name friendly
  std::string model;  // --model value
  int64_t batchPerRank = 8;
  std::vector<std::string> extra;  // more worker flags
};

struct GridConfig {
  const GridModel* model = nullptr;
  int world = 1;
  double cap = 25;
  bool findUnused = false;
  bool isCalibration = false;  // one of the grid's calibration runs
  bool calibration() const { return isCalibration; }
  std::string name() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s-w%d-cap%g-fu%s", model->label.c_str(), world, cap,
                  findUnused ? "on" : "off");
    return buf;
  }
};

struct Grid {
  std::vector<GridModel> models;
  std::vector<int> worlds;
  std::vector<double> caps;
  std::vector<bool> findUnused;
  // Runs with these caps and find_unused off are the calibration part; the compute of every
  // prediction comes from the one with the largest cap (its buckets overlap least, so its layer
  // times are closest to the uncontended ones).
  std::vector<double> calibrationCaps;
  // Each configuration is trained `repeats` times (all configurations once, then again, so slow
  // drifts of the host spread over the grid); its measured step is the median of the runs'
  // medians, and the calibration uses every repeat of the calibration runs.
  int repeats = 1;
  int iterations = 10;
  int warmup = 2;
};

Grid makeGrid(bool full) {
  Grid g;
  g.models.push_back({"mlp-wide", "mlp-wide", 16, {}});
  if (full) g.models.push_back({"resnet18", "resnet18", 4, {"--image-size", "32"}});
  g.models.push_back({"gpt2-tiny", "gpt2:layers=2,embd=128,heads=4,vocab=2048,seq=64", 4, {}});
  if (full) {
    g.worlds = {1, 2, 4};
    g.caps = {1, 5, 25, 100};
    // DDP's default cap is the calibration point; caps 1, 5, 100 and every find_unused run are
    // predicted. (Calibrating on the extremes 1 and 100 instead identifies the contention more
    // stably but predicted the middle caps no better: 5.3-5.5 % vs 5.1-5.2 % held-out MAPE on
    // the same measured grids.)
    g.calibrationCaps = {25};
    g.repeats = 2;
    g.iterations = 15;
  } else {
    g.worlds = {1, 2};
    g.caps = {5, 25};
    g.calibrationCaps = {25};
    g.iterations = 10;
  }
  g.findUnused = {false, true};
  return g;
}

// Runs `ddpscope run` (this binary) with stdout/stderr to `log`; returns the exit code.
StatusOr<int> spawnRun(const std::vector<std::string>& args, const fs::path& log) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return internalError("cannot find this executable (/proc/self/exe)");
  std::vector<std::string> command = {self.string()};
  command.insert(command.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid < 0) return internalError("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> cargv;
    for (std::string& s : command) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return internalError("waitpid failed");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct Row {
  GridConfig config;
  Nanos measured;
  Nanos predicted;
  double errorPercent = 0;
};

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
      .option("mpirun", "PATH", "the mpirun to use (passed to ddpscope run)");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::string gridName = args.value("grid").value_or("full");
  if (gridName != "full" && gridName != "ci") {
    return invalidArgument("--grid: expected full or ci, got '" + gridName + "'");
  }
  Grid grid = makeGrid(gridName == "full");
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
  auto tracePath = [&](const GridConfig& c, int repeat) {
    return dir /
           (c.name() + (repeat == 0 ? std::string() : "-r" + std::to_string(repeat + 1)) + ".json");
  };

  std::vector<GridConfig> configs;
  for (const GridModel& m : grid.models) {
    for (int w : grid.worlds) {
      for (double cap : grid.caps) {
        for (bool fu : grid.findUnused) {
          const bool calibration =
              !fu && std::find(grid.calibrationCaps.begin(), grid.calibrationCaps.end(), cap) !=
                         grid.calibrationCaps.end();
          configs.push_back({&m, w, cap, fu, calibration});
        }
      }
    }
  }
  // 1. Measure.
  const auto t0 = std::chrono::steady_clock::now();
  io.out << "running " << configs.size() << " configurations x " << grid.repeats << " (" << gridName
         << " grid, " << grid.warmup << " warm-up + " << grid.iterations
         << " iterations each) into " << dir.string() << "\n";
  io.out.flush();
  for (int repeat = 0; repeat < grid.repeats; ++repeat) {
    for (const GridConfig& c : configs) {
      const fs::path trace = tracePath(c, repeat);
      if (args.has("reuse") && fs::exists(trace)) continue;
      std::vector<std::string> run = {"run", "--nproc", std::to_string(c.world)};
      if (auto mpirun = args.value("mpirun")) {
        run.push_back("--mpirun");
        run.push_back(*mpirun);
      }
      char cap[32];
      std::snprintf(cap, sizeof(cap), "%g", c.cap);
      for (const std::string& a :
           {std::string("--"), std::string("--model"), c.model->model, std::string("--batch"),
            std::to_string(c.model->batchPerRank * c.world), std::string("--iterations"),
            std::to_string(grid.iterations), std::string("--warmup"), std::to_string(grid.warmup),
            std::string("--trace"), trace.string()}) {
        run.push_back(a);
      }
      // Cap 25 is DDP's default, left unset (an explicit bucket_cap_mb changes the limits in
      // current PyTorch); the others are given.
      if (c.cap != ddp::DdpConfig::kDefaultBucketCapMb) {
        run.push_back("--bucket-cap-mb");
        run.push_back(cap);
      }
      run.insert(run.end(), c.model->extra.begin(), c.model->extra.end());
      if (c.findUnused) run.push_back("--find-unused");
      fs::path log = trace;
      log.replace_extension(".log");
      ASSIGN_OR_RETURN(int code, spawnRun(run, log));
      if (code != 0 || !fs::exists(trace)) {
        return internalError("ddpscope run failed for " + c.name() + " (exit " +
                             std::to_string(code) + "); see " + log.string());
      }
    }
  }
  const double runSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // 2. Profiles. The runtime's metadata does not record the image size: give it from the grid.
  // profiles[name][r]: repeat r of a configuration.
  std::map<std::string, std::vector<sim::replay::LoadedProfile>> profiles;
  for (int repeat = 0; repeat < grid.repeats; ++repeat) {
    for (const GridConfig& c : configs) {
      const fs::path trace = tracePath(c, repeat);
      ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(trace.string()));
      ASSIGN_OR_RETURN(sim::replay::RunSettings settings,
                       sim::replay::readRunSettings(timeline, trace.string()));
      ASSIGN_OR_RETURN(models::ModelSpec model,
                       sim::replay::modelForTrace(settings, trace.string()));
      ASSIGN_OR_RETURN(sim::replay::MeasuredProfile profile,
                       sim::replay::buildProfile(timeline, model, trace.string()));
      for (size_t i = 0; i + 1 < c.model->extra.size(); ++i) {
        if (c.model->extra[i] == "--image-size") {
          profile.settings.imageSize = std::stoll(c.model->extra[i + 1]);
        }
      }
      profiles[c.name()].push_back(
          sim::replay::LoadedProfile{std::move(model), std::move(profile)});
    }
  }
  auto measuredStep = [&](const GridConfig& c) {
    std::vector<Nanos> steps;
    for (const auto& p : profiles.at(c.name())) steps.push_back(p.profile.measuredStep);
    return median(std::move(steps));
  };

  // 3. Calibrate per world size.
  ASSIGN_OR_RETURN(sim::ClusterSpec base, sim::loadBuiltinCluster("cpu-mpi"));
  std::map<int, sim::ClusterSpec> clusters;
  std::ostringstream calReport;
  for (int w : grid.worlds) {
    std::vector<sim::replay::ProfileRef> refs;
    for (const GridConfig& c : configs) {
      if (c.world != w || !c.calibration()) continue;
      for (const auto& p : profiles.at(c.name())) refs.push_back({&p.profile, &p.model});
    }
    sim::ClusterSpec cluster = base;
    cluster.gpusPerNode = std::max(cluster.gpusPerNode, w);
    cluster.contentionSlowdown = 0;
    if (w > 1) {
      ASSIGN_OR_RETURN(sim::replay::Calibration cal, sim::replay::calibrate(refs, base.device));
      cluster = sim::replay::applyCalibration(base, cal, "cpu-calibrated-w" + std::to_string(w));
      // The contention is then fitted to the calibration runs' step times (measured compute
      // as measured): on a CPU host the per-layer estimate misses that overlapped collectives
      // slow down too (sim/replay/replay.h fitContentionToSteps).
      ASSIGN_OR_RETURN(sim::WorldLayout calLayout, sim::makeWorldLayout(cluster, std::nullopt, w));
      ASSIGN_OR_RETURN(sim::replay::StepContentionFit fit,
                       sim::replay::fitContentionToSteps(refs, cluster, calLayout));
      cal.contention.slowdown = fit.contention;
      cluster.contentionSlowdown = fit.contention;
      calReport << "world " << w << ": " << sim::replay::formatCalibration(cal);
      char fitLine[160];
      std::snprintf(fitLine, sizeof(fitLine),
                    "  contention fitted to the calibration runs' step times: %.2f (mean |error| "
                    "%.2f %%)\n",
                    fit.contention, fit.meanAbsErrorPercent);
      calReport << fitLine;
      const std::string baseText(sim::builtinClusterJson("cpu-mpi"));
      const nlohmann::json j = sim::replay::calibratedClusterJson(
          nlohmann::json::parse(baseText), base, cal, cluster.name,
          "cpu-mpi calibrated by ddpscope validate on this host at world size " +
              std::to_string(w));
      std::ofstream(dir / (cluster.name + ".json")) << j.dump(2) << "\n";
    }
    clusters.emplace(w, cluster);
  }

  // 4. Predict.
  std::vector<Row> heldOut, inSample;
  for (const GridConfig& c : configs) {
    const double computeCap =
        *std::max_element(grid.calibrationCaps.begin(), grid.calibrationCaps.end());
    const GridConfig cal{c.model, c.world, computeCap, false, true};
    const sim::ClusterSpec& cluster = clusters.at(c.world);
    ASSIGN_OR_RETURN(sim::WorldLayout layout, sim::makeWorldLayout(cluster, std::nullopt, c.world));
    // One prediction per repeat of the calibration run (its measured compute), averaged: the
    // compute measurement's own noise then enters every prediction of the (model, world) less.
    int64_t predictedSum = 0;
    const auto& calRuns = profiles.at(cal.name());
    for (const auto& calProfile : calRuns) {
      sim::replay::MeasuredComputeOptions mo;
      mo.contentionSlowdown = 0;  // measured compute as measured (see fitContentionToSteps)
      ASSIGN_OR_RETURN(std::unique_ptr<sim::replay::MeasuredComputeModel> compute,
                       sim::replay::MeasuredComputeModel::create(
                           calProfile.profile, calProfile.model, cluster.device, mo));
      sim::SimOptions o = sim::replay::ownSettingsOptions(calProfile.profile);
      // The run's own cap setting (the compute run may have another): cap 25 is run without
      // the flag, i.e. left at DDP's default.
      if (c.cap != ddp::DdpConfig::kDefaultBucketCapMb) {
        o.ddp.setBucketCapMb(c.cap);
      } else {
        o.ddp.bucketCapMb = ddp::DdpConfig::kDefaultBucketCapMb;
        o.ddp.bucketCapSetByUser = false;
      }
      o.ddp.findUnusedParameters = c.findUnused;
      ASSIGN_OR_RETURN(sim::replay::StepPrediction prediction,
                       sim::replay::predictStep(calProfile.model, cluster, layout, o, compute.get(),
                                                calProfile.profile.rankMaxFactor));
      predictedSum += prediction.step.count();
    }
    const Nanos predicted(predictedSum / static_cast<int64_t>(calRuns.size()));
    Row row{c, measuredStep(c), predicted, 0};
    row.errorPercent = 100.0 * static_cast<double>((row.predicted - row.measured).count()) /
                       static_cast<double>(row.measured.count());
    (c.calibration() ? inSample : heldOut).push_back(row);
  }

  // 5. Report.
  char line[256];
  io.out << calReport.str();
  std::snprintf(line, sizeof(line), "\n%-10s %5s %6s %6s %12s %12s %9s\n", "model", "world", "cap",
                "f_unus", "measured ms", "predicted ms", "error");
  io.out << line;
  nlohmann::json rows = nlohmann::json::array();
  std::ofstream csv(dir / "validate.csv");
  csv << "model,world,bucket_cap_mb,find_unused,calibration,measured_ms,predicted_ms,error_"
         "percent\n";
  auto emit = [&](const Row& r, bool calibration) {
    std::snprintf(line, sizeof(line), "%-10s %5d %6g %6s %12.3f %12.3f %+8.2f%%%s\n",
                  r.config.model->label.c_str(), r.config.world, r.config.cap,
                  r.config.findUnused ? "on" : "off", r.measured.toMillis(), r.predicted.toMillis(),
                  r.errorPercent, calibration ? "  (calibration run)" : "");
    io.out << line;
    csv << r.config.model->label << "," << r.config.world << "," << r.config.cap << ","
        << (r.config.findUnused ? 1 : 0) << "," << (calibration ? 1 : 0) << ","
        << r.measured.toMillis() << "," << r.predicted.toMillis() << "," << r.errorPercent << "\n";
    rows.push_back({{"model", r.config.model->label},
                    {"world_size", r.config.world},
                    {"bucket_cap_mb", r.config.cap},
                    {"find_unused", r.config.findUnused},
                    {"calibration", calibration},
                    {"measured_ms", r.measured.toMillis()},
                    {"predicted_ms", r.predicted.toMillis()},
                    {"error_percent", r.errorPercent}});
  };
  for (const GridConfig& c : configs) {
    for (const Row& r : inSample) {
      if (r.config.name() == c.name()) emit(r, true);
    }
    for (const Row& r : heldOut) {
      if (r.config.name() == c.name()) emit(r, false);
    }
  }
  double mape = 0;
  const Row* worst = nullptr;
  std::map<int, std::pair<double, int>> perWorld;
  for (const Row& r : heldOut) {
    mape += std::abs(r.errorPercent);
    perWorld[r.config.world].first += std::abs(r.errorPercent);
    perWorld[r.config.world].second += 1;
    if (!worst || std::abs(r.errorPercent) > std::abs(worst->errorPercent)) worst = &r;
  }
  if (!heldOut.empty()) mape /= static_cast<double>(heldOut.size());
  double inSampleMape = 0;
  for (const Row& r : inSample) inSampleMape += std::abs(r.errorPercent);
  if (!inSample.empty()) inSampleMape /= static_cast<double>(inSample.size());
  std::snprintf(line, sizeof(line),
                "\nheld-out MAPE %.2f %% over %zu configurations (calibration runs replayed: "
                "%.2f %%)\n",
                mape, heldOut.size(), inSampleMape);
  io.out << line;
  for (const auto& [w, s] : perWorld) {
    std::snprintf(line, sizeof(line), "  world %d: MAPE %.2f %% (%d)\n", w, s.first / s.second,
                  s.second);
    io.out << line;
  }
  if (worst) {
    std::snprintf(line, sizeof(line), "worst: %s  measured %.3f ms, predicted %.3f ms (%+.2f %%)\n",
                  worst->config.name().c_str(), worst->measured.toMillis(),
                  worst->predicted.toMillis(), worst->errorPercent);
    io.out << line;
  }
  std::snprintf(line, sizeof(line), "runs took %.1f s; results in %s\n", runSeconds,
                (dir / "validate.csv").string().c_str());
  io.out << line;
  nlohmann::json summary = {{"grid", gridName},
                            {"mape_percent", mape},
                            {"in_sample_mape_percent", inSampleMape},
                            {"held_out", heldOut.size()},
                            {"worst", worst ? worst->config.name() : ""},
                            {"rows", rows}};
  std::ofstream(dir / "validate.json") << summary.dump(2) << "\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
