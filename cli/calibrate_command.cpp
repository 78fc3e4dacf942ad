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

#include "api/calibrate_request.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli {

Status runCalibrateCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope calibrate",
      "RUN.json [RUN2.json ...] -o cluster.json [--base CLUSTER|FILE] [--name N]\n"
      "       [--model M]",
      "Fits the cluster model to measured runs (traces of 'ddpscope run', or any trace with the\n"
      "same lanes): the alpha-beta ring model from every collective's duration vs bytes (least\n"
      "squares over all runs and world sizes; it times collectives inside one node: across\n"
      "nodes a base with NCCL's model keeps its own network's terms, and a ring that crosses\n"
      "nodes takes the slower), the contention factor (how much slower layers run\n"
      "while a collective is in flight, from overlapped vs non-overlapped spans of the same\n"
      "shape), the compute scale (measured / predicted by the base's compute model: its roofline\n"
      "or kernel fit) and DDP's host costs (ddp_overheads: the median host span per allreduce\n"
      "launch, autograd hook, copy-back launch, finalize wait and forward wrapper, where the\n"
      "traces have them). A GPU trace imported from PyTorch's profiler (import-torch --model)\n"
      "is measured by its layers' kernels, at the precision the trace shows, and also fits the\n"
      "GPU's kernel classes (device.kernel_fit: per op class and pass a floor plus FLOPs or\n"
      "bytes at a rate, from 3 layers up; residuals printed). Prints the fit quality and writes\n"
      "a cluster JSON (the base cluster, default cpu-mpi, with the fitted values).");
  parser.positionalList("RUN.json", "measured runs' traces (plain or .gz)", false)
      .options(api::calibrateSettingList())
      .flag("json", "machine-readable output: the runs, the fit and the file written")
      .flag("quiet", "no progress on stderr (shown when loading the runs takes more than 2 s)")
      .epilog(
          "example: ddpscope calibrate run-w2.json run-w4.json -o cpu-calibrated.json\n"
          "         ddpscope simulate --cluster cpu-calibrated.json --model mlp-wide "
          "--world-size 4\n"
          "         ddpscope import-torch rank0.json.gz --model gpt2-small --batch-per-rank 8 "
          "-o gpu.json\n"
          "         ddpscope calibrate gpu.json --seq-len 512 --base dgx-h100 -o my-h100.json");
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  const std::vector<std::string>& runs = args.positionals();
  StatusOr<api::ClusterCalibration> calibrated = [&] {
    Progress progress =
        Progress::forCommand("calibrate: loading runs", runs.size(), io.err, args.has("quiet"));
    return api::calibrateCluster(
        runs, args,
        [&progress](size_t done, size_t, const std::string& run) { progress.update(done, run); });
  }();
  ASSIGN_OR_RETURN(const api::ClusterCalibration result, std::move(calibrated));
  if (args.has("json")) {
    io.out << api::calibrateJson(result).dump(2) << "\n";
    return Status::ok();
  }
  std::ostringstream report;
  char line[512];
  report << "runs:\n";
  for (const auto& p : result.runs) {
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
  report << sim::replay::formatCalibration(result.calibration);
  if (!result.acrossNodesNote.empty()) report << result.acrossNodesNote << "\n";
  if (const auto& stepFit = result.stepFit) {
    std::snprintf(line, sizeof(line),
                  "  contention refitted to the runs' step times: %.2f (mean |step error| %.2f "
                  "%%)\n",
                  stepFit->contention, stepFit->meanAbsErrorPercent);
    report << line;
  } else if (!result.stepFitNote.empty()) {
    report << "  " << result.stepFitNote << "\n";
  }
  const std::string* out = &result.output;
  io.out << report.str() << "wrote " << *out << " (use: --cluster " << *out << ")\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
