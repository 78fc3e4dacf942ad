#include "api/calibrate_request.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/model_settings.h"
#include "ddp/ddp_settings.h"
#include "models/model_resolver.h"
#include "sim/cost/cluster.h"
#include "traces/chrome_reader.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts

std::vector<SettingSpec> calibrateSettingList() {
  return {
      {"out", "PATH", "the cluster JSON to write (also -o)"},
      {"base", "CLUSTER", "built-in cluster or cluster JSON file to start from (default cpu-mpi)"},
      {"name", "NAME", "name of the calibrated cluster (default: the output file's stem)"},
      {"model", "M",
       "the runs' model (a zoo name, shorthand or model JSON file) when their "
       "metadata does not name it"},
      {"image-size", "PX", "the runs' image side when the traces do not record it"},
      {"seq-len", "T", "the runs' tokens per sample when the traces do not record it"}};
}

StatusOr<ClusterCalibration> calibrateCluster(
    const std::vector<std::string>& runs, const SettingValues& values,
    std::function<void(size_t done, size_t total, const std::string& path)> progress) {
  ClusterCalibration result;
  if (runs.empty()) return invalidArgument("missing RUN.json (one or more measured traces)");
  auto out = values.value("out");
  if (!out) return invalidArgument("-o/--out: required (the cluster JSON to write)");
  result.output = *out;
  StatusOr<ClusterText> baseFound = clusterText(values.value("base").value_or("cpu-mpi"));
  if (!baseFound.isOk()) {
    return Status(baseFound.status().code(), "--base: " + baseFound.status().message());
  }
  const ClusterText& baseText = *baseFound;
  ASSIGN_OR_RETURN(ClusterSpec base, parseClusterJson(baseText.json, baseText.origin));
  std::optional<models::ModelSpec> model;
  if (values.has("model")) {
    ASSIGN_OR_RETURN(model, api::loadModelFromSettings(values));
  }
  // The runtime's metadata does not record the image size or sequence length (0 = the model's
  // default); the roofline the compute scale is measured against needs the real ones.
  ASSIGN_OR_RETURN(int64_t imageSize, values.positiveInt("image-size", 0));
  ASSIGN_OR_RETURN(int64_t seqLen, values.positiveInt("seq-len", 0));
  std::vector<replay::LoadedProfile>& loaded = result.runs;
  loaded.reserve(runs.size());
  for (const std::string& run : runs) {
    ASSIGN_OR_RETURN(replay::LoadedProfile p, replay::loadProfile(run, model));
    if (p.profile.settings.imageSize == 0) p.profile.settings.imageSize = imageSize;
    if (p.profile.settings.seqLen == 0) p.profile.settings.seqLen = seqLen;
    loaded.push_back(std::move(p));
    if (progress) progress(loaded.size(), runs.size(), run);
  }
  std::vector<replay::ProfileRef> refs;
  for (const auto& p : loaded) refs.push_back({&p.profile, &p.model});
  ASSIGN_OR_RETURN(result.calibration,
                   replay::calibrate(refs, base.device, replay::NetworkFit::kUnlessOneRank));
  replay::Calibration& cal = result.calibration;
  {
    // DDP's host costs come from the traces' host spans (the profiles keep none of them).
    std::vector<traces::Timeline> timelines;
    timelines.reserve(runs.size());
    for (const std::string& run : runs) {
      ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(run));
      timelines.push_back(std::move(timeline));
    }
    std::vector<const traces::Timeline*> pointers;
    for (const traces::Timeline& t : timelines) pointers.push_back(&t);
    cal.ddp = replay::fitDdpOverheads(pointers);
  }
  // When every run has the same world size (> 1), the contention is refitted to the runs' step
  // times, as `validate` does (sim/replay/replay.h fitContentionToSteps): the per-layer estimate
  // misses that overlapped collectives slow down too on hosts where threads share cores.
  const int world = loaded.front().profile.settings.worldSize;
  const bool oneWorld = world > 1 && std::all_of(loaded.begin(), loaded.end(), [&](const auto& p) {
                          return p.profile.settings.worldSize == world;
                        });
  // A GPU trace's compute is its kernels; its step also waits for the host (Python, every
  // launch, DDP's hooks), which the calibrated cluster does not time unless its host profile
  // does: a refit would charge that wait to contention (HTA's host-bound 2-A100 trace: 1.70,
  // every kernel 170 % slower while a collective runs). Not refitted; replay times the host.
  const bool kernelsMeasured = cal.compute.kernelPasses > 0;
  if (oneWorld && kernelsMeasured) {
    result.stepFitNote =
        "contention not refitted to the runs' step times: their compute is the GPU's kernels, "
        "and a GPU step also waits for the host (Python, launches, DDP's hooks), which a refit "
        "would charge to contention; `ddpscope replay --from-trace` times the trace's host";
  } else if (oneWorld) {
    ClusterSpec calibrated = replay::applyCalibration(base, cal, "calibrated");
    calibrated.gpusPerNode = std::max(calibrated.gpusPerNode, world);
    ASSIGN_OR_RETURN(WorldLayout layout, makeWorldLayout(calibrated, std::nullopt, world));
    ASSIGN_OR_RETURN(result.stepFit, replay::fitContentionToSteps(refs, calibrated, layout));
    cal.contention.slowdown = result.stepFit->contention;
  }
  result.acrossNodesNote = replay::acrossNodesNote(base, cal);
  result.clusterName = values.value("name").value_or(std::filesystem::path(*out).stem().string());
  std::ostringstream desc;
  desc << base.name << " calibrated by ddpscope calibrate on " << runs.size() << " run(s): ";
  if (cal.comm.samples > 0) {
    desc << "alpha-beta fit R^2 " << cal.comm.r2;
  } else if (cal.comm.partialRuns > 0) {
    desc << "runs of some of their ranks (collectives holding the wait for the others), network "
            "model kept from "
         << base.name;
  } else {
    desc << "one-rank runs, network model kept from " << base.name;
  }
  desc << ", contention " << cal.contention.slowdown << ", compute scale " << cal.compute.scale;
  if (!cal.kernels.dtype.empty()) {
    const auto used = std::count_if(cal.kernels.classes.begin(), cal.kernels.classes.end(),
                                    [](const replay::KernelClassFit& f) { return !f.kept; });
    desc << ", kernel fit of " << used << " op class passes at " << cal.kernels.dtype
         << " from the traces' kernels";
  }
  const nlohmann::json baseJson = nlohmann::json::parse(baseText.json, nullptr, false);
  if (baseJson.is_discarded()) return invalidArgument(baseText.origin + ": not valid JSON");
  const nlohmann::json j =
      replay::calibratedClusterJson(baseJson, base, cal, result.clusterName, desc.str());
  const std::string text = j.dump(2) + "\n";
  // The written file must load as it will be loaded later.
  RETURN_IF_ERROR(parseClusterJson(text, *out).status());
  std::ofstream file(*out);
  if (!file) return invalidArgument("-o: cannot write '" + *out + "'");
  file << text;
  if (!file) return internalError("-o: write to '" + *out + "' failed");
  return result;
}

nlohmann::json calibrateJson(const ClusterCalibration& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& p : r.runs) {
    runs.push_back({{"trace", p.profile.origin},
                    {"model", p.model.name},
                    {"world_size", p.profile.settings.worldSize},
                    {"ddp", ddp::ddpSettingsJson(p.profile.settings.ddp)},
                    {"measured_step_ms", p.profile.measuredStep.toMillis()},
                    {"measured_iterations", p.profile.measuredIterations.size()},
                    {"collectives", p.profile.collectives.size()}});
  }
  nlohmann::json out = {{"runs", runs},
                        {"calibration", replay::calibrationJson(r.calibration)},
                        {"contention_refit", nullptr},
                        {"contention_refit_note", r.stepFitNote},
                        {"across_nodes_note", r.acrossNodesNote},
                        {"output", r.output},
                        {"cluster_name", r.clusterName}};
  if (r.stepFit) {
    out["contention_refit"] = {{"contention", r.stepFit->contention},
                               {"mean_abs_error_percent", r.stepFit->meanAbsErrorPercent}};
  }
  return out;
}

}  // namespace ddpscope::api
