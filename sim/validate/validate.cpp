#include "sim/validate/validate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/median.h"
#include "ddp/ddp_config.h"
#include "ddp/ddp_settings.h"
#include "models/model_resolver.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"
#include "traces/args_json.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_import.h"

namespace ddpscope::sim::validate {

namespace fs = std::filesystem;

Status importTorchRun(const PlannedRun& run, int warmup) {
  const GridConfig& c = run.config;
  std::vector<std::string> paths;
  for (int r = 0; r < c.world; ++r) {
    // As the job writes it, or gzipped (the committed test fixture).
    const std::string path = run.torchPrefix.string() + "-rank" + std::to_string(r) + ".json";
    if (fs::exists(path)) {
      paths.push_back(path);
    } else if (fs::exists(path + ".gz")) {
      paths.push_back(path + ".gz");
    } else {
      return invalidArgument(path + ": the torch job wrote no profiler trace for rank " +
                             std::to_string(r) + "; see " + run.log.string());
    }
  }
  ASSIGN_OR_RETURN(models::ModelSpec model, models::resolveModel(c.model.model));
  traces::KinetoImportOptions options;
  for (const auto& layer : model.layers) options.layers.push_back({layer.name, layer.type});
  ASSIGN_OR_RETURN(traces::Timeline timeline, traces::importKinetoTraces(paths, options));
  // What the profiler does not record (the keys `import-torch` writes from its flags).
  traces::Args& meta = timeline.mutableMetadata();
  meta.set("model", c.model.model);
  meta.set("world_size", static_cast<int64_t>(c.world));
  meta.set("batch_per_rank", c.model.batchPerRank);
  meta.set("global_batch", c.model.batchPerRank * c.world);
  if (c.model.imageSize > 0) meta.set("image_size", c.model.imageSize);
  meta.set("warmup", static_cast<int64_t>(warmup));
  ddp::DdpConfig settings;
  if (c.cap != ddp::DdpConfig::kDefaultBucketCapMb) settings.setBucketCapMb(c.cap);
  settings.findUnusedParameters = c.findUnused;
  settings.worldSize = c.world;
  for (const auto& [key, value] : traces::argsFromJson(ddp::ddpSettingsJson(settings))) {
    meta.set(key, value);
  }
  return traces::writeChromeTrace(timeline, run.trace.string());
}

StatusOr<std::string> torchJobVersion(const PlannedRun& run) {
  const std::string path = run.torchPrefix.string() + "-job.json";
  std::ifstream in(path);
  if (!in) return invalidArgument(path + ": cannot read the torch job's report");
  const nlohmann::json job = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!job.is_object() || !job.contains("torch") || !job["torch"].is_string()) {
    return invalidArgument(path + ": torch: expected the job's torch version (a string)");
  }
  return job["torch"].get<std::string>();
}

StatusOr<Nanos> trainRuns(const RunPlan& plan, const Runner& runner, const TrainOptions& options) {
  const Nanos start = steadyNow();
  const int total = static_cast<int>(plan.runs.size());
  int done = 0;
  for (const PlannedRun& run : plan.runs) {
    const bool reused = options.reuse && fs::exists(run.trace);
    if (!reused) {
      if (plan.engine == Engine::kTorch) {
        std::error_code ec;
        fs::create_directories(run.torchPrefix.parent_path(), ec);
      }
      ASSIGN_OR_RETURN(int code, runner(run.runArgs, run.log));
      if (plan.engine == Engine::kTorch) {
        if (code != 0) {
          return internalError("the torch job failed for " + run.config.name() + " (exit " +
                               std::to_string(code) + "); see " + run.log.string());
        }
        RETURN_IF_ERROR(importTorchRun(run, plan.warmup));
      } else if (code != 0 || !fs::exists(run.trace)) {
        return internalError("ddpscope run failed for " + run.config.name() + " (exit " +
                             std::to_string(code) + "); see " + run.log.string());
      }
    }
    ++done;
    if (options.progress) options.progress({&run, done, total, steadyNow() - start, reused});
  }
  return steadyNow() - start;
}

namespace {

// profiles[name][r]: repeat r of a configuration.
using Profiles = std::map<std::string, std::vector<replay::LoadedProfile>>;

StatusOr<Profiles> loadProfiles(const RunPlan& plan) {
  Profiles profiles;
  for (const PlannedRun& run : plan.runs) {
    const std::string trace = run.trace.string();
    ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(trace));
    ASSIGN_OR_RETURN(replay::RunSettings settings, replay::readRunSettings(timeline, trace));
    ASSIGN_OR_RETURN(models::ModelSpec model, replay::modelForTrace(settings, trace));
    ASSIGN_OR_RETURN(replay::MeasuredProfile profile, replay::buildProfile(timeline, model, trace));
    // The runtime's metadata does not record the image size: give it from the grid.
    if (run.config.model.imageSize > 0) profile.settings.imageSize = run.config.model.imageSize;
    profiles[run.config.name()].push_back(
        replay::LoadedProfile{std::move(model), std::move(profile)});
  }
  return profiles;
}

// World 1 has no collectives: cpu-mpi as is, without contention. Larger worlds: the α–β model
// fitted on the calibration runs of that world, then the contention fitted to their step times;
// the calibrated cluster file is written into `outDir`.
StatusOr<WorldCalibration> calibrateWorld(const std::vector<GridConfig>& configs,
                                          const Profiles& profiles, const ClusterSpec& base, int w,
                                          const fs::path& outDir) {
  std::vector<replay::ProfileRef> refs;
  for (const GridConfig& c : configs) {
    if (c.world != w || !c.calibration) continue;
    for (const auto& p : profiles.at(c.name())) refs.push_back({&p.profile, &p.model});
  }
  WorldCalibration result;
  result.world = w;
  result.cluster = base;
  result.cluster.gpusPerNode = std::max(result.cluster.gpusPerNode, w);
  result.cluster.contentionSlowdown = 0;
  if (w == 1) return result;
  ASSIGN_OR_RETURN(replay::Calibration cal, replay::calibrate(refs, base.device));
  ClusterSpec cluster = replay::applyCalibration(base, cal, "cpu-calibrated-w" + std::to_string(w));
  // The contention is then fitted to the calibration runs' step times (measured compute
  // as measured): on a CPU host the per-layer estimate misses that overlapped collectives
  // slow down too (sim/replay/replay.h fitContentionToSteps).
  ASSIGN_OR_RETURN(WorldLayout calLayout, makeWorldLayout(cluster, std::nullopt, w));
  ASSIGN_OR_RETURN(replay::StepContentionFit fit,
                   replay::fitContentionToSteps(refs, cluster, calLayout));
  cal.contention.slowdown = fit.contention;
  cluster.contentionSlowdown = fit.contention;
  std::ostringstream text;
  text << "world " << w << ": " << replay::formatCalibration(cal);
  char fitLine[160];
  std::snprintf(fitLine, sizeof(fitLine),
                "  contention fitted to the calibration runs' step times: %.2f (mean |error| "
                "%.2f %%)\n",
                fit.contention, fit.meanAbsErrorPercent);
  text << fitLine;
  const std::string baseText(builtinClusterJson("cpu-mpi"));
  const nlohmann::json j = replay::calibratedClusterJson(
      nlohmann::json::parse(baseText), base, cal, cluster.name,
      "cpu-mpi calibrated by ddpscope validate on this host at world size " + std::to_string(w));
  result.clusterFile = outDir / (cluster.name + ".json");
  std::ofstream(result.clusterFile) << j.dump(2) << "\n";
  result.cluster = std::move(cluster);
  result.text = text.str();
  return result;
}

// One prediction per repeat of the (model, world)'s compute run (its measured compute),
// averaged: the compute measurement's own noise then enters every prediction of the
// (model, world) less.
StatusOr<Nanos> predict(const GridConfig& c, const Grid& grid, const Profiles& profiles,
                        const ClusterSpec& cluster) {
  const double computeCap =
      *std::max_element(grid.calibrationCaps.begin(), grid.calibrationCaps.end());
  const GridConfig computeRun{c.model, c.world, computeCap, false, true};
  ASSIGN_OR_RETURN(WorldLayout layout, makeWorldLayout(cluster, std::nullopt, c.world));
  int64_t predictedSum = 0;
  const auto& calRuns = profiles.at(computeRun.name());
  for (const auto& calProfile : calRuns) {
    replay::MeasuredComputeOptions mo;
    mo.contentionSlowdown = 0;  // measured compute as measured (see fitContentionToSteps)
    ASSIGN_OR_RETURN(std::unique_ptr<replay::MeasuredComputeModel> compute,
                     replay::MeasuredComputeModel::create(calProfile.profile, calProfile.model,
                                                          cluster.device, mo));
    SimOptions o = replay::ownSettingsOptions(calProfile.profile);
    // The run's own cap setting (the compute run may have another): cap 25 is run without
    // the flag, i.e. left at DDP's default.
    if (c.cap != ddp::DdpConfig::kDefaultBucketCapMb) {
      o.ddp.setBucketCapMb(c.cap);
    } else {
      o.ddp.bucketCapMb = ddp::DdpConfig::kDefaultBucketCapMb;
      o.ddp.bucketCapSetByUser = false;
    }
    o.ddp.findUnusedParameters = c.findUnused;
    ASSIGN_OR_RETURN(replay::StepPrediction prediction,
                     replay::predictStep(calProfile.model, cluster, layout, o, compute.get(),
                                         calProfile.profile.rankMaxFactor));
    predictedSum += prediction.step.count();
  }
  return Nanos(predictedSum / static_cast<int64_t>(calRuns.size()));
}

}  // namespace

StatusOr<Report> analyzeRuns(const Grid& grid, const RunPlan& plan) {
  ASSIGN_OR_RETURN(Profiles profiles, loadProfiles(plan));
  Report report;
  report.grid = grid.name;
  report.engine = grid.engine;
  if (grid.engine == Engine::kTorch && !plan.runs.empty()) {
    ASSIGN_OR_RETURN(report.torchVersion, torchJobVersion(plan.runs.front()));
  }
  ASSIGN_OR_RETURN(ClusterSpec base, loadBuiltinCluster("cpu-mpi"));
  std::map<int, ClusterSpec> clusters;
  for (int w : grid.worlds) {
    ASSIGN_OR_RETURN(WorldCalibration cal,
                     calibrateWorld(plan.configs, profiles, base, w, plan.outDir));
    clusters.emplace(w, cal.cluster);
    report.calibrations.push_back(std::move(cal));
  }
  std::vector<std::vector<Nanos>> runsPerConfig;  // measured step of each run, per config
  for (const GridConfig& c : plan.configs) {
    ASSIGN_OR_RETURN(Nanos predicted, predict(c, grid, profiles, clusters.at(c.world)));
    std::vector<Nanos> steps;
    for (const auto& p : profiles.at(c.name())) steps.push_back(p.profile.measuredStep);
    runsPerConfig.push_back(steps);
    const Nanos measured = median(std::move(steps));
    report.rows.push_back(Row{c, static_cast<int>(runsPerConfig.back().size()), measured, predicted,
                              errorPercent(predicted, measured)});
  }
  report.summary = summarize(report.rows);
  report.noise = noiseFloor(runsPerConfig);
  return report;
}

StatusOr<Report> runValidation(const Grid& grid, const RunPlan& plan, const Runner& runner,
                               const TrainOptions& options) {
  ASSIGN_OR_RETURN(Nanos runTime, trainRuns(plan, runner, options));
  ASSIGN_OR_RETURN(Report report, analyzeRuns(grid, plan));
  report.runTime = runTime;
  return report;
}

}  // namespace ddpscope::sim::validate
