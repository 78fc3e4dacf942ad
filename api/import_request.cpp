#include "api/import_request.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "api/ddp_flags.h"
#include "api/model_settings.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_settings.h"
#include "io/file_input.h"
#include "models/model_resolver.h"
#include "models/model_spec.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/trace_host_facts.h"
#include "traces/args_json.h"
#include "traces/chrome_writer.h"
#include "traces/timeline.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts
namespace {

// JSON: a number, or null when unknown.
nlohmann::json bytesJson(const std::vector<std::optional<int64_t>>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& b : list) out.push_back(b ? nlohmann::json(*b) : nlohmann::json(nullptr));
  return out;
}

// The host facts of the first rank's GPU trace (sim/replay/trace_host_facts.h), for replay's
// host lane: {"steps": the per-step facts} as JSON text in the metadata ("host_facts", with the
// trace it came from in "host_facts_trace"). A CPU trace has none (its host is its device, measured
// as it is); a GPU trace whose facts cannot be read gets a note saying why.
void addHostFacts(const traces::KinetoImportReport& report, const models::ModelSpec& model,
                  traces::Timeline& timeline, std::vector<std::string>& notes) {
  if (report.files.empty()) return;
  const std::string& path = report.files.front();  // the lowest rank's (ranks ascend)
  StatusOr<std::string> text = io::readMaybeGzippedFile(path);
  if (!text.isOk()) {
    notes.push_back("host facts not read: " + text.status().message());
    return;
  }
  if (text->find("\"kernel\"") == std::string::npos) return;  // not a GPU trace
  std::vector<std::string> names;
  for (const models::LayerSpec& layer : model.layers) names.push_back(layer.name);
  StatusOr<nlohmann::json> steps =
      replay::traceHostFactsSteps(*text, path, names, report.forwardOps);
  if (!steps.isOk()) {
    notes.push_back("host facts not read (replay has no host lane for this trace): " +
                    steps.status().message());
    return;
  }
  replay::HostFacts facts;
  facts.model = model.name;
  facts.trace = path;
  Status covered = replay::addHostFactsSteps(*steps, path, "steps", facts);
  if (covered.isOk()) covered = replay::withHostFactsOps(model, facts).status();
  if (!covered.isOk()) {
    notes.push_back(
        "host facts not by layer (replay has no host lane for this trace): " + covered.message() +
        ": the job's forward needs a ddpscope.layer:<module path> range per module "
        "call, as the GPU kit's torch_job.py records them");
    return;
  }
  timeline.mutableMetadata().set("host_facts", nlohmann::json{{"steps", *steps}}.dump());
  timeline.mutableMetadata().set("host_facts_trace", path);
  notes.push_back("host facts of " + std::to_string(steps->size()) +
                  " profiled step(s) read from " + path +
                  ": replay predicts the unprofiled step and its what-ifs from them");
}

}  // namespace

nlohmann::json traceModelJson(const traces::TraceModel& traced) {
  const std::string& file = traced.file;
  const size_t layerCount = traced.layers.size();
  std::vector<std::vector<size_t>> owned(layerCount);  // per layer: ready indices
  std::vector<size_t> unowned;
  for (size_t i = 0; i < traced.params.size(); ++i) {
    const int layer = traced.params[i].layer;
    if (layer >= 0 && static_cast<size_t>(layer) < layerCount) {
      owned[static_cast<size_t>(layer)].push_back(i);
    } else {
      unowned.push_back(i);
    }
  }
  std::vector<std::string> nameOf(traced.params.size());
  nlohmann::json params = nlohmann::json::array();
  auto addParam = [&](size_t ready, std::string name) {
    const traces::TraceModelParam& p = traced.params[ready];
    params.push_back({{"name", name}, {"shape", p.shape}, {"dtype", p.dtype}});
    nameOf[ready] = std::move(name);
  };
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < layerCount; ++l) {
    std::vector<size_t> module = owned[l];
    std::stable_sort(module.begin(), module.end(), [&](size_t a, size_t b) {
      return traced.params[a].shape.size() > traced.params[b].shape.size();
    });
    nlohmann::json moduleNames = nlohmann::json::array();
    for (size_t k = 0; k < module.size(); ++k) {
      const std::string suffix = k == 0 ? "weight" : k == 1 ? "bias" : "param" + std::to_string(k);
      addParam(module[k], traced.layers[l].name + "." + suffix);
      moduleNames.push_back(nameOf[module[k]]);
    }
    nlohmann::json readyNames = nlohmann::json::array();
    for (size_t ready : owned[l]) readyNames.push_back(nameOf[ready]);
    nlohmann::json layer = {{"name", traced.layers[l].name}, {"type", traced.layers[l].type}};
    if (!module.empty()) {
      layer["params"] = std::move(moduleNames);
      layer["grad_ready_order"] = std::move(readyNames);
    }
    layers.push_back(std::move(layer));
  }
  for (auto it = unowned.rbegin(); it != unowned.rend(); ++it) {
    addParam(*it, "param" + std::to_string(*it));
  }
  return {{"name", "trace:" + std::filesystem::path(file).filename().string()},
          {"description",
           "read from " + file + " (ProfilerStep#" + std::to_string(traced.iteration) +
               ", layers from " +
               (traced.fromRanges ? "its ddpscope.layer: ranges" : "its forward ops") + ")"},
          {"parameters", std::move(params)},
          {"layers", std::move(layers)}};
}

StatusOr<traces::PlannedSizes> plannedSizes(const models::ModelSpec& model,
                                            const ddp::DdpConfig& config) {
  traces::PlannedSizes sizes;
  ASSIGN_OR_RETURN(ddp::BucketPlan steady, ddp::steadyStatePlan(model, config));
  ASSIGN_OR_RETURN(ddp::BucketPlan initial, ddp::constructionPlan(model, config));
  sizes.bucketBytes = steady.bucketBytes();
  sizes.initialBucketBytes = initial.bucketBytes();
  if (ddp::rebuildIteration(config) > 0) {
    const ddp::RebuildSync sync = ddp::rebuildSyncSizes(steady);
    sizes.rebuildBroadcastBytes = {sync.indicesBytes(), sync.countsBytes()};
  }
  if (config.broadcastBuffers) {
    sizes.bufferBroadcastBytes = ddp::coalescedBroadcastBytes(ddp::buffersAsTensors(model.buffers));
  }
  std::ostringstream origin;
  origin << "model '" << model.name << "' (bucket_cap_mb " << config.bucketCapMb << ", semantics "
         << ddp::semanticsProfileName(config.profile) << ")";
  sizes.origin = origin.str();
  return sizes;
}

std::vector<SettingSpec> importTorchOutputSettingList() {
  return {{"out", "RUN.json", "where to write the imported trace (-o works too)"},
          {"allow-missing-ranks", "", "import a subset of the job's ranks instead of failing"},
          {"batch-per-rank", "B",
           "record the job's per-rank batch size in the trace (default: read off the first "
           "convolution's, embedding's or linear's input when the trace has record_shapes)"}};
}

std::vector<SettingSpec> importTorchSettingList() {
  std::vector<SettingSpec> out = importTorchOutputSettingList();
  const std::vector<SettingSpec> model = api::modelSettingList();
  out.insert(out.end(), model.begin(), model.end());
  const std::vector<SettingSpec> ddpSettings = api::ddpSettingList(api::DdpSettingSet::all());
  out.insert(out.end(), ddpSettings.begin(), ddpSettings.end());
  return out;
}

namespace {

// When the trace's forward called the model's layers in another order than the model lists
// them (replay::runLayerOrder): what moved (`note`) and the model in the run's order (nullopt
// when it cannot be reordered). Both empty otherwise, or when the trace has no measured step.
struct RunOrder {
  std::string note;
  std::optional<models::ModelSpec> model;
};
RunOrder runOrderOf(const traces::Timeline& timeline, const models::ModelSpec& model,
                    const std::string& output) {
  StatusOr<replay::MeasuredProfile> profile = replay::buildProfile(timeline, model, output);
  if (!profile.isOk()) return {};
  const std::vector<int> order = replay::runLayerOrder(model, *profile);
  if (order.empty()) return {};
  RunOrder out{replay::layerOrderNote(model, profile->forwardOrder), std::nullopt};
  if (StatusOr<models::ModelSpec> reordered = model.withLayerOrder(order); reordered.isOk()) {
    out.model = std::move(reordered).value();
  }
  return out;
}

// Whether `planned` (DDP's plan) gives the imported steady buckets, byte for byte.
bool planGivesBuckets(const std::vector<int64_t>& planned,
                      const traces::KinetoImportSummary& summary) {
  if (planned.size() != summary.bucketBytes.size()) return false;
  for (size_t b = 0; b < planned.size(); ++b) {
    if (summary.bucketBytes[b] != planned[b]) return false;
  }
  return true;
}

}  // namespace

StatusOr<TorchImport> importTorchTraces(
    const std::vector<std::string>& tracePaths, const SettingValues& values,
    std::function<void(size_t done, size_t total, const std::string& path)> progress) {
  TorchImport result;
  const std::optional<std::string> output = values.value("out");
  if (!output || output->empty()) {
    return invalidArgument("-o/--out: expected the path of the trace to write (see --help)");
  }
  result.output = *output;

  std::optional<ddp::DdpConfig> jobSettings;
  if (api::anyDdpSetting(values, api::DdpSettingSet::all())) {
    ASSIGN_OR_RETURN(jobSettings, api::parseDdpSettings(values, api::DdpSettingSet::all()));
  }
  traces::KinetoImportOptions options;
  options.allowMissingRanks = values.has("allow-missing-ranks");
  // With the model, compute spans are named by its layers (what replay / calibrate need).
  std::optional<models::ModelSpec> model;
  if (values.has("model")) {
    ASSIGN_OR_RETURN(model, api::loadModelFromSettings(values));
    for (const auto& layer : model->layers) options.layers.push_back({layer.name, layer.type});
    if (options.layers.empty()) {
      return invalidArgument(model->origin +
                             ": the model lists no layers: compute spans cannot be named by layer");
    }
    // What DDP sends, for traces without message sizes.
    ASSIGN_OR_RETURN(options.plan, plannedSizes(*model, jobSettings.value_or(ddp::DdpConfig{})));
  }
  // Without it, the model read off the trace when it was recorded with record_shapes=True.
  options.readModel = !model;
  options.progress = std::move(progress);
  ASSIGN_OR_RETURN(traces::Timeline timeline,
                   traces::importKinetoTraces(tracePaths, options, &result.report));
  // A forward that called the model's layers in another order than the model lists them readied
  // the gradients, and so built DDP's buckets, in that order: the bytes a trace without message
  // sizes takes from the plan, and the count of collectives that differ from it, come from the
  // plan in the run's order (a second import with that plan; the first one found the order).
  RunOrder runOrder;
  if (model) runOrder = runOrderOf(timeline, *model, *output);
  if (runOrder.model) {
    ASSIGN_OR_RETURN(options.plan,
                     plannedSizes(*runOrder.model, jobSettings.value_or(ddp::DdpConfig{})));
    options.plan.origin += ", its layers in the run's forward order";
    options.progress = nullptr;
    result.report = traces::KinetoImportReport{};
    ASSIGN_OR_RETURN(timeline, traces::importKinetoTraces(tracePaths, options, &result.report));
  }
  if (const std::optional<traces::TracedGpu>& gpu = result.report.gpu) {
    result.report.notes.push_back("kernels ran on " + gpu->describe() +
                                  ": replay and --compute-from on a cluster of another GPU carry "
                                  "them there");
  }
  // Run settings the profiler does not record, for replay / calibrate (otherData keys of
  // `ddpscope run` traces).
  if (auto name = values.value("model")) timeline.mutableMetadata().set("model", *name);
  if (const std::optional<traces::TraceModel>& traced = result.report.traceModel) {
    const std::string& file = traced->file;
    const std::string text = traceModelJson(*traced).dump();
    StatusOr<models::ModelSpec> read = models::parseModelJson(text, file + " (its model)");
    if (read.isOk()) {
      model = std::move(*read);
      result.modelFromTrace = model;
      timeline.mutableMetadata().set("model_json", text);
      result.report.notes.push_back(
          "model read from the trace (record_shapes): " + std::to_string(model->numTensors()) +
          " parameters, " + std::to_string(model->totalBytes()) + " B, in " +
          std::to_string(model->layers.size()) + " layers from " +
          (traced->fromRanges ? "its ddpscope.layer: ranges" : "its forward ops") +
          "; replay, calibrate and plan need no --model");
    } else {
      result.report.notes.push_back("the model read from the trace is not valid: " +
                                    read.status().message());
    }
  }
  if (model) addHostFacts(result.report, *model, timeline, result.report.notes);
  if (jobSettings) {
    for (const auto& [key, value] : traces::argsFromJson(ddp::ddpSettingsJson(*jobSettings))) {
      timeline.mutableMetadata().set(key, value);
    }
  }
  // The batch and shapes replay, calibrate and --compute-from scale FLOPs by: --batch-per-rank,
  // else the first model op's input in the trace (record_shapes), else unknown (the model's).
  const traces::KinetoImportReport::TraceInputs& seen = result.report.inputs;
  traces::Args& meta = timeline.mutableMetadata();
  if (values.has("batch-per-rank")) {
    ASSIGN_OR_RETURN(int64_t batch, values.positiveInt("batch-per-rank", 1));
    meta.set("batch_per_rank", batch);
    if (seen.batch && *seen.batch != batch) {
      result.report.notes.push_back("--batch-per-rank " + std::to_string(batch) +
                                    " differs from the trace's first " + seen.op +
                                    ": the given batch is kept");
    }
  } else if (seen.batch) {
    meta.set("batch_per_rank", *seen.batch);
  }
  if (seen.seqLen) meta.set("seq_len", *seen.seqLen);
  if (seen.imageSize) meta.set("image_size", *seen.imageSize);
  if (seen.batch) {
    std::string read = "batch " + std::to_string(*seen.batch);
    if (seen.seqLen) read += ", " + std::to_string(*seen.seqLen) + " tokens";
    if (seen.imageSize) read += ", image " + std::to_string(*seen.imageSize) + " px";
    result.report.notes.push_back("inputs per rank read from the trace's first " + seen.op + ": " +
                                  read);
  } else if (!values.has("batch-per-rank") && meta.getString("layer_spans")) {
    result.report.notes.push_back(
        "batch per rank unknown (no input shapes: profile with record_shapes=True, or give "
        "--batch-per-rank): replay, calibrate and --compute-from take the model's default");
  }
  RETURN_IF_ERROR(traces::writeChromeTrace(timeline, *output));
  result.summary = traces::summarizeImport(timeline);
  // What moved, and whether in the run's order DDP's plan (the second import's) is the trace's.
  if (!runOrder.note.empty()) {
    if (runOrder.model && planGivesBuckets(options.plan.bucketBytes, result.summary)) {
      runOrder.note += "; in the trace's order DDP's bucket plan is the trace's " +
                       std::to_string(result.summary.bucketBytes.size()) +
                       " buckets, byte for byte";
    }
    result.report.notes.push_back(std::move(runOrder.note));
  }
  return result;
}

nlohmann::json importTorchJson(const TorchImport& result) {
  const traces::KinetoImportReport& report = result.report;
  const traces::KinetoImportSummary& summary = result.summary;
  nlohmann::json out;
  out["output"] = result.output;
  out["world_size"] = report.worldSize;
  out["ranks"] = report.ranks;
  out["files"] = report.files;
  out["iterations"] = summary.iterationCount;
  out["bucket_bytes"] = bytesJson(summary.bucketBytes);
  out["collectives_with_unknown_bytes"] = report.collectivesWithUnknownBytes;
  out["collectives_sized_from_plan"] = report.collectivesSizedFromPlan;
  out["buckets_consistent"] = summary.bucketsConsistent;
  out["median_step_ns"] = summary.medianStep.count();
  out["median_comm_ns"] = summary.medianComm.count();
  out["median_exposed_comm_ns"] = summary.medianExposedComm.count();
  out["overlap_percent"] = summary.overlapPercent;
  nlohmann::json hta = nlohmann::json::object();
  for (const auto& [rank, stats] : report.htaOverlap) {
    hta[std::to_string(rank)] =
        stats.hasCommunication ? nlohmann::json(std::round(stats.overlapPercent * 100.0) / 100.0)
                               : nlohmann::json(nullptr);
  }
  out["hta_overlap_percent"] = std::move(hta);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& it : summary.iterations) {
    rows.push_back({{"rank", it.rank},
                    {"iteration", it.index},
                    {"step_ns", it.step.count()},
                    {"bucket_bytes", bytesJson(it.bucketBytes)}});
  }
  out["per_iteration"] = std::move(rows);
  out["model_from_trace"] = nullptr;
  if (result.modelFromTrace && report.traceModel) {
    const models::ModelSpec& m = *result.modelFromTrace;
    out["model_from_trace"] = {{"name", m.name},
                               {"parameters", m.numTensors()},
                               {"bytes", m.totalBytes()},
                               {"layers", m.layers.size()},
                               {"layers_from", report.traceModel->fromRanges ? "ranges" : "ops"}};
  }
  out["gpu"] = nullptr;
  if (const std::optional<traces::TracedGpu>& gpu = report.gpu) {
    out["gpu"] = {{"name", gpu->name},
                  {"compute_capability",
                   std::to_string(gpu->computeMajor) + "." + std::to_string(gpu->computeMinor)},
                  {"sm_count", gpu->smCount},
                  {"memory_bytes", gpu->memoryBytes}};
  }
  out["notes"] = report.notes;
  return out;
}

}  // namespace ddpscope::api
