// `ddpscope calibrate RUN.json [RUN2.json ...] -o cluster.json [--base CLUSTER]`: fits the
// α–β communication model, the contention factor and the compute scale to measured runs
// (sim/replay/calibrate.h) and writes a cluster JSON that simulate / sweep / replay accept.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "ddp/ddp_settings.h"
#include "sim/cost/cluster.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli {

Status runCalibrateCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope calibrate",
      "RUN.json [RUN2.json ...] -o cluster.json [--base CLUSTER | --base-file F] [--name N]\n"
      "       [--model M | --model-file F]",
      "Fits the cluster model to measured runs (traces of 'ddpscope run', or any trace with the\n"
      "same lanes): the alpha-beta ring model from every collective's duration vs bytes (least\n"
      "squares over all runs and world sizes), the contention factor (how much slower layers run\n"
      "while a collective is in flight, from overlapped vs non-overlapped spans of the same\n"
      "shape), the compute scale (measured / roofline) and DDP's host costs (ddp_overheads: the\n"
      "median host span per allreduce launch, autograd hook, copy-back launch, finalize wait and\n"
      "forward wrapper, where the traces have them). Prints the fit quality and writes a\n"
      "cluster JSON (the base cluster, default cpu-mpi, with the fitted values).");
  parser.positionalList("RUN.json", "measured runs' traces (plain or .gz)", false)
      .option("out", "PATH", "the cluster JSON to write (also -o)")
      .option("base", "CLUSTER", "built-in cluster to start from (default cpu-mpi)")
      .option("base-file", "PATH", "cluster JSON file to start from")
      .option("name", "NAME", "name of the calibrated cluster (default: the output file's stem)")
      .option("model", "NAME", "the runs' model when their metadata does not name it")
      .option("model-file", "PATH", "the runs' model as a JSON file")
      .option("image-size", "PX", "the runs' image side when the traces do not record it")
      .option("seq-len", "T", "the runs' tokens per sample when the traces do not record it")
      .flag("json", "machine-readable output: the runs, the fit and the file written")
      .flag("quiet", "no progress on stderr (shown when loading the runs takes more than 2 s)")
      .epilog(
          "example: ddpscope calibrate run-w2.json run-w4.json -o cpu-calibrated.json\n"
          "         ddpscope simulate --cluster-file cpu-calibrated.json --model mlp-wide "
          "--world-size 4");
  std::vector<std::string> flags = argv;
  for (std::string& a : flags) {
    if (a == "-o") a = "--out";
  }
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(flags));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::vector<std::string>& runs = args.positionals();
  if (runs.empty()) return invalidArgument("missing RUN.json (one or more measured traces)");
  auto out = args.value("out");
  if (!out) return invalidArgument("-o/--out: required (the cluster JSON to write)");
  if (args.has("base") && args.has("base-file")) {
    return invalidArgument("--base and --base-file: give one");
  }
  std::string baseText;
  std::string baseOrigin;
  if (auto file = args.value("base-file")) {
    std::ifstream in(*file);
    if (!in) return notFound("--base-file: cannot read '" + *file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    baseText = ss.str();
    baseOrigin = *file;
  } else {
    const std::string name = args.value("base").value_or("cpu-mpi");
    baseText = std::string(sim::builtinClusterJson(name));
    if (baseText.empty()) {
      return invalidArgument("--base: unknown cluster '" + name + "' (see 'ddpscope clusters')");
    }
    baseOrigin = "cluster:" + name;
  }
  ASSIGN_OR_RETURN(sim::ClusterSpec base, sim::parseClusterJson(baseText, baseOrigin));
  std::optional<models::ModelSpec> model;
  if (args.has("model") || args.has("model-file")) {
    ASSIGN_OR_RETURN(model, loadModelFromFlags(args));
  }
  // The runtime's metadata does not record the image size or sequence length (0 = the model's
  // default); the roofline the compute scale is measured against needs the real ones.
  ASSIGN_OR_RETURN(int64_t imageSize, args.positiveInt("image-size", 0));
  ASSIGN_OR_RETURN(int64_t seqLen, args.positiveInt("seq-len", 0));
  std::vector<sim::replay::LoadedProfile> loaded;
  loaded.reserve(runs.size());
  {
    Progress progress =
        Progress::forCommand("calibrate: loading runs", runs.size(), io.err, args.has("quiet"));
    for (const std::string& run : runs) {
      ASSIGN_OR_RETURN(sim::replay::LoadedProfile p, sim::replay::loadProfile(run, model));
      if (p.profile.settings.imageSize == 0) p.profile.settings.imageSize = imageSize;
      if (p.profile.settings.seqLen == 0) p.profile.settings.seqLen = seqLen;
      loaded.push_back(std::move(p));
      progress.update(loaded.size(), run);
    }
  }
  const bool json = args.has("json");
  std::ostringstream report;  // the human report; printed unless --json
  nlohmann::json jsonRuns = nlohmann::json::array();
  std::vector<sim::replay::ProfileRef> refs;
  char line[512];
  report << "runs:\n";
  for (const auto& p : loaded) {
    refs.push_back({&p.profile, &p.model});
    jsonRuns.push_back({{"trace", p.profile.origin},
                        {"model", p.model.name},
                        {"world_size", p.profile.settings.worldSize},
                        {"ddp", ddp::ddpSettingsJson(p.profile.settings.ddp)},
                        {"measured_step_ms", p.profile.measuredStep.toMillis()},
                        {"measured_iterations", p.profile.measuredIterations.size()},
                        {"collectives", p.profile.collectives.size()}});
    std::snprintf(line, sizeof(line),
                  "  %-40s %-14s %d rank(s), cap %g MiB%s, step %.3f ms (median of %zu), %zu "
                  "collectives\n",
                  p.profile.origin.c_str(), p.model.name.c_str(), p.profile.settings.worldSize,
                  p.profile.settings.ddp.bucketCapMb,
                  p.profile.settings.ddp.findUnusedParameters ? ", find_unused" : "",
                  p.profile.measuredStep.toMillis(), p.profile.measuredIterations.size(),
                  p.profile.collectives.size());
    report << line;
  }
  ASSIGN_OR_RETURN(sim::replay::Calibration cal, sim::replay::calibrate(refs, base.device));
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
    cal.ddp = sim::replay::fitDdpOverheads(pointers);
  }
  // When every run has the same world size (> 1), the contention is refitted to the runs' step
  // times, as `validate` does (sim/replay/replay.h fitContentionToSteps): the per-layer estimate
  // misses that overlapped collectives slow down too on hosts where threads share cores.
  const int world = loaded.front().profile.settings.worldSize;
  const bool oneWorld = world > 1 && std::all_of(loaded.begin(), loaded.end(), [&](const auto& p) {
                          return p.profile.settings.worldSize == world;
                        });
  std::optional<sim::replay::StepContentionFit> stepFit;
  if (oneWorld) {
    sim::ClusterSpec calibrated = sim::replay::applyCalibration(base, cal, "calibrated");
    calibrated.gpusPerNode = std::max(calibrated.gpusPerNode, world);
    ASSIGN_OR_RETURN(sim::WorldLayout layout,
                     sim::makeWorldLayout(calibrated, std::nullopt, world));
    ASSIGN_OR_RETURN(stepFit, sim::replay::fitContentionToSteps(refs, calibrated, layout));
    cal.contention.slowdown = stepFit->contention;
  }
  report << sim::replay::formatCalibration(cal);
  if (stepFit) {
    std::snprintf(line, sizeof(line),
                  "  contention refitted to the runs' step times: %.2f (mean |step error| %.2f "
                  "%%)\n",
                  stepFit->contention, stepFit->meanAbsErrorPercent);
    report << line;
  }
  const std::string name = args.value("name").value_or(std::filesystem::path(*out).stem().string());
  std::ostringstream desc;
  desc << base.name << " calibrated by ddpscope calibrate on " << runs.size()
       << " run(s): alpha-beta fit R^2 " << cal.comm.r2 << ", contention "
       << cal.contention.slowdown << ", compute scale " << cal.compute.scale;
  const nlohmann::json baseJson = nlohmann::json::parse(baseText, nullptr, false);
  if (baseJson.is_discarded()) return invalidArgument(baseOrigin + ": not valid JSON");
  const nlohmann::json j =
      sim::replay::calibratedClusterJson(baseJson, base, cal, name, desc.str());
  const std::string text = j.dump(2) + "\n";
  // The written file must load as it will be loaded later.
  RETURN_IF_ERROR(sim::parseClusterJson(text, *out).status());
  std::ofstream file(*out);
  if (!file) return invalidArgument("-o: cannot write '" + *out + "'");
  file << text;
  if (!file) return internalError("-o: write to '" + *out + "' failed");
  if (json) {
    nlohmann::json result = {{"runs", jsonRuns},
                             {"calibration", sim::replay::calibrationJson(cal)},
                             {"contention_refit", nullptr},
                             {"output", *out},
                             {"cluster_name", name}};
    if (stepFit) {
      result["contention_refit"] = {{"contention", stepFit->contention},
                                    {"mean_abs_error_percent", stepFit->meanAbsErrorPercent}};
    }
    io.out << result.dump(2) << "\n";
    return Status::ok();
  }
  io.out << report.str() << "wrote " << *out << " (use: --cluster-file " << *out << ")\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
