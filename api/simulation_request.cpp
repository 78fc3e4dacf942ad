#include "api/simulation_request.h"

#include <algorithm>

#include "api/cluster_settings.h"
#include "api/ddp_flags.h"
#include "api/model_settings.h"
#include "base/strings.h"
#include "io/file_input.h"
#include "models/model_resolver.h"
#include "sim/compute/kernel_bench.h"
#include "sim/engine/compile_mode.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts

namespace {

// --host-profile: replaces the cluster's host profile.
Status applyHostProfileSetting(const SettingValues& args, ClusterSpec& cluster) {
  if (!args.has("host-profile")) return Status::ok();
  StatusOr<HostProfile> profile = loadHostProfile(*args.value("host-profile"));
  if (!profile.isOk()) return profile.status().withContext("--host-profile");
  cluster.host = *std::move(profile);
  return Status::ok();
}

// --kernel-fit-from CLUSTER: the layer kernel fit of another cluster's GPU (a built-in cluster
// or a cluster file whose device carries device.kernel_fit: dgx-h100, hgx-h200, or a cluster
// `calibrate` wrote from a trace) in place of the simulated cluster's, carried to its GPU and
// dtype through the two devices' specs (transferKernelFit); used as it is on the same GPU at
// the fit's dtype. Without measured compute only (the caller checks).
Status applyKernelFitFromSetting(const SettingValues& args, SimulationRequest& req) {
  const std::optional<std::string> source = args.value("kernel-fit-from");
  if (!source) return Status::ok();
  StatusOr<ClusterSpec> from = loadCluster(*source);
  if (!from.isOk()) return from.status().withContext("--kernel-fit-from");
  const DeviceSpec& fitted = from->device;
  if (fitted.kernelFit.empty()) {
    return invalidArgument("--kernel-fit-from: cluster " + from->name + "'s device " + fitted.name +
                           " has no kernel fit (device.kernel_fit: built in on dgx-h100 and "
                           "hgx-h200; `ddpscope calibrate` writes one from a GPU trace)");
  }
  DeviceSpec& device = req.cluster.device;
  if (device.arch == GpuArch::kCpu) {
    return invalidArgument("--kernel-fit-from: cluster " + req.cluster.name +
                           " runs on CPUs; a GPU kernel fit times GPU layers");
  }
  const std::string& dtype = req.options.dtype;
  if (fitted.name == device.name && fitted.kernelFit.dtype == dtype) {
    device.kernelFit = fitted.kernelFit;
    return Status::ok();
  }
  StatusOr<KernelFit> carried = transferKernelFit(fitted, device, dtype);
  if (!carried.isOk()) return carried.status().withContext("--kernel-fit-from " + *source);
  device.kernelFit = *std::move(carried);
  return Status::ok();
}

constexpr const char* kKernelBenchHelp =
    "time the layers a GPU's single-layer benchmark covers from it (kernel-bench.json of the GPU "
    "kit's kernels step, on a GPU of the cluster's architecture, with --dtype bf16 --autocast; "
    "the nearest measured shapes, "
    "scaled by a fitted formula); the rest by the cluster's roofline. With a measured run "
    "(--compute-from, replay) carried from fp32, tf32 or fp16 to bf16 on a GPU of the "
    "benchmark's architecture: its BatchNorm layers, whose kernels at bf16 are PyTorch's own, "
    "not cuDNN's";

// --kernel-bench FILE[,FILE...], read; null when not given.
StatusOr<std::shared_ptr<const KernelBench>> readKernelBench(const SettingValues& args) {
  if (!args.has("kernel-bench")) return std::shared_ptr<const KernelBench>();
  std::vector<std::pair<std::string, std::string>> texts;
  for (const std::string& path : splitString(*args.value("kernel-bench"), ',')) {
    if (path.empty()) return invalidArgument("--kernel-bench: an empty file name");
    StatusOr<std::string> text = io::readMaybeGzippedFile(path);
    if (!text.isOk()) return text.status().withContext("--kernel-bench");
    texts.emplace_back(path, *std::move(text));
  }
  StatusOr<KernelBench> bench = KernelBench::parse(texts);
  if (!bench.isOk()) return bench.status().withContext("--kernel-bench");
  return std::make_shared<const KernelBench>(*std::move(bench));
}

// A benchmark's kernels stand for the simulated GPU's only on the same architecture (the same
// SMs, clocks and tensor cores: an H200's for an H100); carrying one across architectures is not
// built. An error naming both GPUs else (`to`: how the message names the simulated GPU).
Status checkKernelBenchArch(const KernelBench& bench, const DeviceSpec& device,
                            const std::string& to) {
  const std::optional<GpuArch> arch = gpuArchOfName(bench.device());
  if (arch == device.arch) return Status::ok();
  return invalidArgument(
      "--kernel-bench: " + bench.source() + " was measured on " + bench.device() + " (" +
      (arch ? std::string(gpuArchName(*arch))
            : std::string("no built-in GPU's name, architecture unknown")) +
      "); " + to + " " + device.name + " (" + std::string(gpuArchName(device.arch)) +
      "): give a benchmark of that architecture");
}

// --kernel-bench with measured compute (--compute-from, replay): only where the carry to the
// simulated precision changes BatchNorm's kernels (from cuDNN's to PyTorch's own), at the
// benchmark's precision; an error naming why else.
Status checkKernelBenchForCarry(const KernelBench& bench, const SettingValues& args,
                                const replay::MeasuredProfile& profile, const std::string& runDtype,
                                const std::string& dtype, const DeviceSpec& device) {
  const std::string from = runDtype.empty() ? "fp32" : runDtype;
  const bool carried = args.has("cluster") && profile.gpu.has_value();
  if (!carried || batchNormRunsCudnn(from) == batchNormRunsCudnn(dtype)) {
    return invalidArgument(
        "--kernel-bench: with a measured run it times only the BatchNorm layers whose kernels "
        "change where the run's kernels are carried to another precision (PyTorch runs cuDNN's "
        "at fp32, tf32 and fp16 and its own at bf16); this run, at " +
        from + ", is simulated at " + dtype +
        (carried ? std::string() : std::string(" on its own GPU (no --cluster)")) +
        ": leave out --kernel-bench, or give --cluster and a --dtype whose BatchNorm kernels "
        "differ");
  }
  if (bench.dtype() != dtype) {
    return invalidArgument("--kernel-bench: " + bench.source() + " was measured at " +
                           bench.dtype() + "; the run is carried to " + dtype);
  }
  return checkKernelBenchArch(bench, device, "the run is carried to");
}

// --kernel-bench FILE[,FILE...]: the layers the benchmark covers timed from it, the rest by the
// cluster's roofline (and kernel fit).
Status applyKernelBenchSetting(const SettingValues& args, SimulationRequest& req) {
  if (!args.has("kernel-bench")) return Status::ok();
  ASSIGN_OR_RETURN(std::shared_ptr<const KernelBench> read, readKernelBench(args));
  const KernelBench* bench = read.get();
  const SimOptions& o = req.options;
  if (req.cluster.device.arch == GpuArch::kCpu) {
    return invalidArgument("--kernel-bench: cluster " + req.cluster.name +
                           " runs on CPUs; a GPU kernel benchmark times GPU layers");
  }
  if (bench->autocast() && !(o.dtype == bench->dtype() && o.ddp.autocast)) {
    return invalidArgument("--kernel-bench: " + bench->source() + " was measured under " +
                           bench->dtype() + " autocast on " + bench->device() +
                           ": simulate with --dtype " + bench->dtype() +
                           " --autocast (or leave out --kernel-bench)");
  }
  if (!bench->autocast() && o.dtype != bench->dtype()) {
    return invalidArgument("--kernel-bench: " + bench->source() + " was measured at " +
                           bench->dtype() + ": simulate with --dtype " + bench->dtype());
  }
  RETURN_IF_ERROR(checkKernelBenchArch(*bench, req.cluster.device,
                                       "cluster " + req.cluster.name + " simulates"));
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeModel> base,
                   makeRooflineComputeModel(req.cluster.device, o.dtype, o.ddp.autocast));
  req.compute = std::make_shared<BenchComputeModel>(std::move(read), std::move(base));
  return Status::ok();
}

}  // namespace

SettingSpec kernelBenchSettingSpec() {
  return {"kernel-bench", "FILE[,FILE]", kKernelBenchHelp};
}

std::vector<SettingSpec> simulationSettingList(bool sweep, bool computeFrom) {
  std::vector<SettingSpec> out = api::modelSettingList();
  const std::vector<SettingSpec> cluster = clusterSettingList();
  out.insert(out.end(), cluster.begin(), cluster.end());
  auto add = [&out](std::string name, std::string valueName, std::string help) {
    out.push_back({std::move(name), std::move(valueName), std::move(help)});
  };
  add("host-profile", "P",
      "what the host pays per op and DDP per event: a built-in host profile (ddpscope "
      "host-profile list) or a profile JSON file (default: the cluster's)");
  if (computeFrom) {
    add("compute-from", "RUN.json",
        "measured per-layer compute from a run's trace instead of the roofline (a PyTorch GPU "
        "trace imported with its host facts, on a GPU cluster whose host profile charges per "
        "op: its kernels, with the host from the profile); on another GPU than the trace's, "
        "or at another --dtype, each layer's kernels carried there by the two GPUs' rooflines");
    out.push_back(kernelBenchSettingSpec());
    add("kernel-fit-from", "CLUSTER",
        "time the layers by the kernel fit of another cluster's GPU (a built-in cluster or a "
        "cluster file with device.kernel_fit: dgx-h100, hgx-h200, or one calibrate wrote from a "
        "trace), carried to this cluster's GPU and --dtype through the two GPUs' specs: a "
        "FLOP-timed op class keeps its fraction of the peak, a byte-timed one its fraction of the "
        "bandwidth (tensor-core dtypes only: tf32, bf16, fp16; BatchNorm by this GPU's roofline "
        "where the two dtypes run other BatchNorm kernels)");
  }
  if (sweep) {
    add("nodes", "N[,N...]", "node counts to sweep (default 1; gb200-nvl72: 72-GPU racks)");
    add("world-size", "W[,W...]",
        "world sizes to sweep (multiples of GPUs per node; default: --nodes)");
    add("bucket-cap-mb", "X[,X...]", "bucket caps in MiB (default 1,2,5,10,25,50,100,200)");
    add("find-unused", "on|off|both", "find_unused_parameters (default off)");
  } else {
    add("nodes", "N", "number of nodes (default 1; gb200-nvl72: 72-GPU racks)");
    add("world-size", "W",
        "number of ranks (a multiple of the GPUs per node; default: one node's)");
  }
  const std::vector<SettingSpec> ddpSettings = api::ddpSettingList(simulationDdpSettings(sweep));
  out.insert(out.end(), ddpSettings.begin(), ddpSettings.end());
  add("batch", "B", "samples per rank per step (default: the model's)");
  add("seq-len", "T", "tokens per sample for transformers (default: the model's)");
  add("image-size", "PX", "image side for vision models (default: the model's)");
  add("dtype", "DT",
      "compute dtype: fp32, tf32, bf16, fp16 (default: the cluster's device: bf16 where it has "
      "bf16, fp16 on V100, fp32 on CPUs; fp32 with measured compute); fp32 is PyTorch's "
      "default: convolutions in TF32 on GPUs that have it, matrix products in fp32");
  add("iterations", "I", "iterations to simulate (default: enough for the steady state)");
  add("sync-batchnorm", "", "SyncBatchNorm: a blocking allreduce per BatchNorm layer");
  add("contention", "F", "compute slowdown while a collective runs (default: cluster's)");
  add("strategy", "S", "ddp (default) or dp (nn.DataParallel, one node)");
  add("compile", sweep ? "MODE[,MODE...]" : "MODE",
      std::string("how a torch.compile'd model meets DDP: none (eager, default), ddp-optimizer "
                  "(forward split at bucket boundaries; hooks fire between sub-graphs), "
                  "whole-graph (optimize_ddp=False: every allreduce after the backward), "
                  "compiled-autograd (python reducer; Inductor buckets the allreduces)") +
          (sweep ? "; a list sweeps the modes" : ""));
  add("compile-graph-overhead", "US",
      "host time of one compiled (sub-)graph, forward + backward call, in us (default " +
          formatShortest(kGraphCallOverhead.toMicros()) + ", measured)");
  add("all-ranks", "", "simulate every rank (jitter, stragglers) instead of one");
  add("jitter", "PCT", "per-rank, per-iteration compute jitter in % (with --all-ranks; default 0)");
  add("seed", "S", "seed for jitter (default 1)");
  add("stragglers", "R:PCT[,...]", "ranks slower by PCT % (with --all-ranks; default none)");
  return out;
}

StatusOr<std::vector<CompileMode>> parseCompileModes(const std::string& text, bool list) {
  std::vector<CompileMode> modes;
  for (const std::string& part : list ? splitString(text, ',') : std::vector<std::string>{text}) {
    const std::optional<CompileMode> mode = parseCompileMode(part);
    if (!mode) {
      return invalidArgument("--compile: expected " + std::string(compileModeChoices()) +
                             (list ? " (or a comma list of them)" : "") + ", got '" + part + "'");
    }
    if (std::find(modes.begin(), modes.end(), *mode) == modes.end()) modes.push_back(*mode);
  }
  if (modes.empty()) return invalidArgument("--compile: expected a mode, got ''");
  return modes;
}

api::DdpSettingSet simulationDdpSettings(bool sweep) {
  using api::DdpSetting;
  const api::DdpSettingSet all = api::DdpSettingSet::all();
  // A sweep varies bucket_cap_mb (and find_unused) itself; a bucket_cap_mb_list would override
  // every point of the cap axis, so sweep does not take it.
  return sweep ? all.without(DdpSetting::kBucketCapMb)
                     .without(DdpSetting::kFindUnused)
                     .without(DdpSetting::kBucketCapMbList)
               : all;
}

SettingValues simulationSettings(const SimulationChoice& choice) {
  SettingValues values;
  values.set("model", choice.model);
  values.set("cluster", choice.cluster);
  values.set("world-size", std::to_string(choice.worldSize));
  for (const auto& [name, value] : api::ddpSettingValues(choice.ddp)) values.set(name, value);
  return values;
}

SettingValues sweepSettings(const SimulationChoice& choice, const std::vector<double>& capsMb,
                            const std::vector<int>& worldSizes) {
  SettingValues values = simulationSettings(choice);
  std::string caps;
  for (double cap : capsMb) {
    if (!caps.empty()) caps += ',';
    caps += formatShortest(cap);
  }
  values.set("bucket-cap-mb", caps);
  values.set("find-unused", choice.ddp.findUnusedParameters ? "on" : "off");
  if (!worldSizes.empty()) {
    std::string sizes;
    for (int w : worldSizes) {
      if (!sizes.empty()) sizes += ',';
      sizes += std::to_string(w);
    }
    values.set("world-size", sizes);
  }
  return values;
}

namespace {

// The simulator's options the settings name besides model, cluster and DDP (batch, dtype,
// iterations, contention, strategy, compile, all-ranks, jitter, seed, stragglers); with no
// setting given, the defaults every front end starts from.
StatusOr<SimOptions> parseSimOptions(const SettingValues& args, bool sweep) {
  SimOptions o;
  // One simulation (not a sweep's grid) reports DDP's overhead over plain training on the same
  // host: every front end (CLI, Python, GUI) gets the same summary from the same settings.
  o.simulatePlain = !sweep;
  ASSIGN_OR_RETURN(o.inputs.batch, args.positiveInt("batch", 0));
  ASSIGN_OR_RETURN(o.inputs.seqLen, args.positiveInt("seq-len", 0));
  ASSIGN_OR_RETURN(o.inputs.imageSize, args.positiveInt("image-size", 0));
  if (auto dtype = args.value("dtype")) {
    if (*dtype != "fp32" && *dtype != "tf32" && *dtype != "bf16" && *dtype != "fp16") {
      return invalidArgument("--dtype: expected fp32, tf32, bf16 or fp16, got '" + *dtype + "'");
    }
    o.dtype = *dtype;
  }
  if (args.has("iterations")) {
    ASSIGN_OR_RETURN(int64_t it, args.positiveInt("iterations", 4));
    if (it > 10000) return invalidArgument("--iterations: expected at most 10000");
    o.iterations = static_cast<int>(it);
  } else {
    o.iterations = 0;  // automatic: defaultIterations (past the rebuild, two no_sync cycles)
  }
  o.syncBatchNorm = args.has("sync-batchnorm");
  if (auto c = args.value("contention")) {
    auto v = parseDouble(*c);
    if (!v || *v < 0 || *v > 10) {
      return invalidArgument("--contention: expected a slowdown fraction in [0, 10], got '" + *c +
                             "'");
    }
    o.contentionSlowdown = *v;
  }
  std::string strategy = args.value("strategy").value_or("ddp");
  if (strategy == "ddp") {
    o.strategy = Strategy::kDdp;
  } else if (strategy == "dp") {
    o.strategy = Strategy::kDataParallel;
  } else {
    return invalidArgument("--strategy: expected ddp or dp, got '" + strategy + "'");
  }
  if (auto modes = args.value("compile")) {
    ASSIGN_OR_RETURN(const std::vector<CompileMode> parsed, parseCompileModes(*modes, sweep));
    o.compile = parsed.front();  // sweep: the first; the caller sweeps the list
  }
  if (auto us = args.value("compile-graph-overhead")) {
    auto v = parseDouble(*us);
    if (!v || *v < 0 || *v > 1e6) {
      return invalidArgument(
          "--compile-graph-overhead: expected microseconds in [0, 1000000], got '" + *us + "'");
    }
    o.compileGraphOverhead = Nanos::fromMicrosDouble(*v);
  }
  o.allRanks = args.has("all-ranks");
  if (auto j = args.value("jitter")) {
    auto v = parseDouble(*j);
    if (!v || *v < 0 || *v >= 100) {
      return invalidArgument("--jitter: expected a percentage in [0, 100), got '" + *j + "'");
    }
    o.jitterPercent = *v;
  }
  ASSIGN_OR_RETURN(const int64_t seed, args.nonNegativeInt("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  if (auto s = args.value("stragglers")) {
    for (const std::string& part : splitString(*s, ',')) {
      auto colon = part.find(':');
      std::optional<int64_t> rank;
      std::optional<double> pct;
      if (colon != std::string::npos) {
        rank = parseInt64(part.substr(0, colon));
        pct = parseDouble(part.substr(colon + 1));
      }
      if (!rank || !pct || *rank < 0 || *pct <= 0) {
        return invalidArgument("--stragglers: expected RANK:PCT pairs like 3:20, got '" + part +
                               "'");
      }
      o.stragglers.emplace_back(static_cast<int>(*rank), *pct / 100.0);
    }
  }
  if ((o.jitterPercent > 0 || !o.stragglers.empty()) && !o.allRanks) {
    return invalidArgument("--jitter and --stragglers need --all-ranks");
  }
  return o;
}

}  // namespace

StatusOr<SimulationRequest> parseSimulationRequest(const SettingValues& args, bool sweep,
                                                   std::optional<std::string> replayTrace) {
  SimulationRequest req;
  const std::optional<std::string> computeFrom =
      replayTrace ? replayTrace : args.value("compute-from");
  req.computeFrom = computeFrom;
  ASSIGN_OR_RETURN(req.options, parseSimOptions(args, sweep));
  SimOptions& o = req.options;
  if (!computeFrom) {
    ASSIGN_OR_RETURN(o.ddp, api::parseDdpSettings(args, simulationDdpSettings(sweep)));
    ASSIGN_OR_RETURN(req.model, api::loadModelFromSettings(args));
    ASSIGN_OR_RETURN(req.cluster, loadClusterFromSettings(args));
    RETURN_IF_ERROR(applyHostProfileSetting(args, req.cluster));
    if (o.dtype.empty()) o.dtype = defaultDtype(req.cluster.device);
    RETURN_IF_ERROR(applyKernelFitFromSetting(args, req));
    RETURN_IF_ERROR(applyKernelBenchSetting(args, req));
    return req;
  }
  if (args.has("kernel-fit-from")) {
    return invalidArgument(
        "--kernel-fit-from: with measured compute (" + *computeFrom +
        ") the layers take the trace's kernel times; leave out --kernel-fit-from, or "
        "--compute-from to time them by the fit");
  }
  // Measured compute from a trace.
  std::optional<models::ModelSpec> model;
  if (args.has("model")) {
    ASSIGN_OR_RETURN(model, api::loadModelFromSettings(args));
  }
  ASSIGN_OR_RETURN(replay::LoadedProfile loaded, replay::loadProfile(*computeFrom, model));
  req.model = loaded.model;
  if (args.has("cluster")) {
    ASSIGN_OR_RETURN(req.cluster, loadClusterFromSettings(args));
  } else {
    ASSIGN_OR_RETURN(req.cluster, replay::selfCalibratedCluster(loaded.profile, loaded.model));
  }
  RETURN_IF_ERROR(applyHostProfileSetting(args, req.cluster));
  const replay::RunSettings run = loaded.profile.settings;
  // replay: the flags change the run's own DDP settings; --compute-from: they start from
  // DDP's defaults like simulate's.
  ASSIGN_OR_RETURN(o.ddp, api::parseDdpSettings(args, simulationDdpSettings(sweep),
                                                replayTrace ? run.ddp : ddp::DdpConfig()));
  if (o.inputs.batch == 0) o.inputs.batch = run.batchPerRank;
  if (o.inputs.seqLen == 0) o.inputs.seqLen = run.seqLen;
  if (o.inputs.imageSize == 0) o.inputs.imageSize = run.imageSize;
  // The precision the run computed in, where the trace says (an imported GPU trace); fp32 else.
  if (!args.has("dtype")) o.dtype = run.dtype;
  ASSIGN_OR_RETURN(req.kernelBench, readKernelBench(args));
  if (req.kernelBench) {
    RETURN_IF_ERROR(checkKernelBenchForCarry(*req.kernelBench, args, loaded.profile, run.dtype,
                                             o.dtype, req.cluster.device));
  }
  // --compute-from a GPU trace imported with its host facts, on a GPU whose host lane charges
  // per op: the trace's layer spans hold the profiled host's time (the GPU waiting for its
  // launches), which the host lane would charge a second time. There the GPU's time is the
  // trace's kernels (scaled to other inputs by the cluster's compute model) with the op counts
  // the trace counted, and the host's is the cluster's host profile: the job unprofiled on that
  // host (replay's host lane takes the trace's own host instead).
  if (!replayTrace && req.cluster.device.arch != GpuArch::kCpu && req.cluster.host.perOp() &&
      loaded.profile.gpuImport()) {
    // Without facts by layer the only compute is the spans, which would count the host twice:
    // refused, naming why (replay's host lane notes the same reasons).
    auto noHostLane = [&](const std::string& why) {
      return invalidArgument("--compute-from " + *computeFrom + ": cluster " + req.cluster.name +
                             " charges the host per op, and this GPU trace's layer spans already "
                             "hold its profiled host's time; its kernels are needed instead, but " +
                             why +
                             " (import the job's trace with its ddpscope.layer ranges, or give a "
                             "cluster whose host profile has no per-op terms)");
    };
    ASSIGN_OR_RETURN(std::optional<replay::ProfileHostFacts> read,
                     replay::hostFactsOfProfile(loaded.profile, loaded.model));
    if (!read) return noHostLane("it has no host facts");
    StatusOr<models::ModelSpec> counted = replay::withHostFactsOps(loaded.model, read->facts);
    if (!counted.isOk()) return noHostLane(counted.status().message());
    ASSIGN_OR_RETURN(std::unique_ptr<RooflineComputeModel> scaler,
                     RooflineComputeModel::create(req.cluster.device, read->facts.dtype));
    ASSIGN_OR_RETURN(
        std::unique_ptr<replay::KernelCarry> carry,
        replay::KernelCarry::create(read->facts.gpu, read->facts.dtype, req.cluster.device, o.dtype,
                                    *computeFrom, req.kernelBench));
    req.compute =
        replay::hostFactsComputeModel(read->facts, *counted, std::move(scaler),
                                      replay::hostFactsInputs(read->facts), std::move(carry));
    req.model = *std::move(counted);
    req.measured = std::make_shared<const replay::LoadedProfile>(std::move(loaded));
    return req;
  }
  // replay from the trace's own times: its steps hold the buffer broadcast it ran (in the spans
  // and gaps before the first layer), so the host profile's buffer terms are not charged again.
  if (replayTrace) {
    req.cluster.host.ddp.bufferSyncUs = 0;
    req.cluster.host.ddp.bufferCopyUs = 0;
  }
  replay::MeasuredComputeOptions mo;
  mo.contentionSlowdown = o.contentionSlowdown.value_or(req.cluster.contentionSlowdown);
  // Another GPU or precision than the trace's: its kernels are carried there. Without
  // --cluster the cluster is the trace's own machine.
  mo.dtype = o.dtype;
  mo.carryToDevice = args.has("cluster");
  mo.kernelBench = req.kernelBench;
  ASSIGN_OR_RETURN(
      std::unique_ptr<replay::MeasuredComputeModel> compute,
      replay::MeasuredComputeModel::create(loaded.profile, loaded.model, req.cluster.device, mo));
  req.compute = std::move(compute);
  req.measured = std::make_shared<const replay::LoadedProfile>(std::move(loaded));
  return req;
}

StatusOr<SimulationRequest> simulationRequestOf(const SimulationChoice& choice, bool sweep) {
  SimulationRequest req;
  ASSIGN_OR_RETURN(req.options, parseSimOptions(SettingValues(), sweep));
  ddp::DdpConfig config = choice.ddp;
  if (sweep) {
    // A sweep or plan chooses the cap and find_unused_parameters per point, and a
    // bucket_cap_mb_list would override every cap: the base keeps DDP's defaults for the three
    // settings simulationDdpSettings(true) leaves out, as the text path does.
    const ddp::DdpConfig defaults;
    config.bucketCapMb = defaults.bucketCapMb;
    config.bucketCapSetByUser = defaults.bucketCapSetByUser;
    config.findUnusedParameters = defaults.findUnusedParameters;
    config.bucketCapMbList = defaults.bucketCapMbList;
  }
  RETURN_IF_ERROR(ddp::validateDdpConfig(config));
  req.options.ddp = config;
  ASSIGN_OR_RETURN(req.model, models::resolveModel(choice.model));
  ASSIGN_OR_RETURN(req.cluster, loadCluster(choice.cluster));
  req.options.dtype = defaultDtype(req.cluster.device);
  return req;
}

Status checkCapsMb(const std::vector<double>& capsMb, const std::string& forWhat) {
  if (capsMb.empty()) return invalidArgument("bucket_cap_mb: no caps to " + forWhat);
  for (double cap : capsMb) {
    if (!(cap > 0)) {
      return invalidArgument("bucket_cap_mb: expected positive caps, got " + formatShortest(cap));
    }
  }
  return Status::ok();
}

StatusOr<SimResult> runSimulation(const SimulationRequest& request, const WorldLayout& layout) {
  return runSimulation(request, layout, request.options);
}

StatusOr<SimResult> runSimulation(const SimulationRequest& request, const WorldLayout& layout,
                                  const SimOptions& options) {
  return sim::simulate(request.model, request.cluster, layout, options, request.compute.get());
}

}  // namespace ddpscope::api
