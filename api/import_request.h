// TorchImport: `ddpscope import-torch`'s computation from named settings
// (base/setting_values.h): the PyTorch profiler (Kineto) traces of a DDP job, one per rank,
// imported into one ddpscope trace (traces/kineto_import.h), with the model's layers naming the
// compute spans and its bucket plan sizing allreduces the profiler did not size, the job's DDP
// settings and per-rank batch recorded in the metadata. The CLI prints a summary or
// importTorchJson; the Python package's import_torch() returns the JSON. It lives in api/
// because it joins models, ddp and traces: a front end's verb, not the simulator's.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "traces/kineto_import.h"

namespace ddpscope::api {

// "out", "allow-missing-ranks", "batch-per-rank".
std::vector<SettingSpec> importTorchOutputSettingList();
// Every setting importTorchTraces reads: importTorchOutputSettingList(), the model setting,
// every DDP setting (the job's, which the profiler does not record).
std::vector<SettingSpec> importTorchSettingList();

// What the job's DDP sends (traces::PlannedSizes): its steady and construction bucket plans,
// the rebuild's two broadcasts when it rebuilds, its buffer groups when it syncs buffers.
StatusOr<traces::PlannedSizes> plannedSizes(const models::ModelSpec& model,
                                            const ddp::DdpConfig& config);

// The model JSON (models/FORMAT.md) of the model read off a trace (traces/kineto_model.h). The
// trace does not say what PyTorch registered first nor the parameters' names: registration order is
// taken as the layers' forward order, a layer's parameters ordered by rank (a weight matrix before
// its bias vector), then by readiness; they are named "<layer>.weight",
// "<layer>.bias", "<layer>.param<k>" for further ones, "param<i>" when no layer owns one (those
// come last, in reverse ready order, as DDP assumes for a parameter list).
nlohmann::json traceModelJson(const traces::TraceModel& traced);

struct TorchImport {
  std::string output;  // the trace written
  traces::KinetoImportReport report;
  traces::KinetoImportSummary summary;
  // Without a model setting: the model read off the traces (report.traceModel) as the output
  // keeps it (otherData.model_json), when there was one.
  std::optional<models::ModelSpec> modelFromTrace;
};

// Imports `tracePaths` and writes the trace to the "out" setting's path. `progress`
// (optional): called after each file is read.
StatusOr<TorchImport> importTorchTraces(
    const std::vector<std::string>& tracePaths, const SettingValues& values,
    std::function<void(size_t done, size_t total, const std::string& path)> progress = nullptr);

// What `ddpscope import-torch --json` prints (times in ns; unknown bytes null); "model_from_trace":
// {"name", "parameters", "bytes", "layers", "layers_from": "ranges" | "ops"}, or null.
nlohmann::json importTorchJson(const TorchImport& result);

}  // namespace ddpscope::api
