// Fuzz target: the PyTorch profiler (Kineto) importer (traces/kineto_import.h) on one rank's trace
// and on several ranks of one job. Input: one option byte, then the per-rank traces separated by
// the line "\n@@RANK@@\n" (at most 4 ranks). Option bits:
//   1  allowMissingRanks
//   2  name compute spans by the layers of tests/data/torch-2.15/ddp_gloo_model.json (the model
//      the committed 2.15 traces profiled), which runs the forward/backward matcher
//   4  size bucket allreduces from that model's bucket plan (default DDP settings)
//   8  without bit 2: read the model off the first trace (traces/kineto_model.h) and name the
//      spans by its layers; a model read must tie its parameters to its layers or to none, and
//      its model JSON must load or be refused with a message
// An accepted import must produce the ranks it reports, and `import-torch`'s summary of it; a
// GPU it names (deviceProperties) has a name, SMs and a compute capability, and reads back.
// Every rank's bytes also go through the host-facts reader (sim/replay/trace_host_facts.h) with
// that model's layer names: an error has a message, facts are one object per step.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/import_request.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "fuzz/fuzz_util.h"
#include "models/model_spec.h"
#include "sim/replay/trace_host_facts.h"
#include "traces/kineto_import.h"
#include "traces/traced_gpu.h"

namespace {

const ddpscope::models::ModelSpec& profiledModel() {
  static const ddpscope::models::ModelSpec model = [] {
    auto m = ddpscope::models::loadModelFile(ddpscope::fuzz::testDataDir() +
                                             "/torch-2.15/ddp_gloo_model.json");
    FUZZ_CHECK(m.isOk(), m.status().message());
    return *std::move(m);
  }();
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  if (size < 1) return 0;
  const uint8_t bits = data[0];
  std::vector<std::string_view> pieces =
      fuzz::splitInput(fuzz::asText(data + 1, size - 1), "\n@@RANK@@\n");
  if (pieces.size() > 4) pieces.resize(4);
  std::vector<traces::KinetoTraceBytes> inputs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    inputs.push_back({"rank" + std::to_string(i) + ".json", pieces[i]});
  }
  traces::KinetoImportOptions options;
  options.allowMissingRanks = (bits & 1) != 0;
  if ((bits & 2) != 0) {
    for (const auto& layer : profiledModel().layers)
      options.layers.push_back({layer.name, layer.type});
  }
  options.readModel = (bits & 2) == 0 && (bits & 8) != 0;
  if ((bits & 4) != 0) {
    auto plan = api::plannedSizes(profiledModel(), ddp::DdpConfig{});
    FUZZ_CHECK(plan.isOk(), plan.status().message());
    options.plan = *plan;
  }
  std::vector<std::string> names;
  for (const auto& layer : profiledModel().layers) names.push_back(layer.name);
  for (std::string_view piece : pieces) {
    auto facts = sim::replay::traceHostFactsSteps(piece, "rank.json", names);
    if (!facts.isOk()) {
      FUZZ_CHECK(!facts.status().message().empty(), "a host-facts error without a message");
      continue;
    }
    FUZZ_CHECK(facts->is_array() && !facts->empty(), "host facts without steps");
    for (const auto& step : *facts) FUZZ_CHECK(step.is_object(), "a step that is not an object");
  }
  traces::KinetoImportReport report;
  auto timeline = traces::importKinetoTraceBytes(inputs, options, &report);
  if (!timeline.isOk()) {
    FUZZ_CHECK(!timeline.status().message().empty(), "an error without a message");
    return 0;
  }
  FUZZ_CHECK(timeline->rankCount() == static_cast<int>(report.ranks.size()),
             "the report's ranks differ from the timeline's");
  FUZZ_CHECK(report.ranks.size() <= inputs.size(), "more ranks than files");
  (void)traces::summarizeImport(*timeline);
  if (report.gpu) {  // read off deviceProperties: named, with SMs, and its metadata reads back
    FUZZ_CHECK(!report.gpu->name.empty() && report.gpu->smCount > 0 && report.gpu->computeMajor > 0,
               "a GPU without a name, SMs or a compute capability");
    auto back = traces::parseTracedGpuJson(traces::tracedGpuJson(*report.gpu), "gpu");
    FUZZ_CHECK(
        back.isOk() && back->name == report.gpu->name && back->smCount == report.gpu->smCount,
        "the GPU's metadata does not read back");
  }
  if (report.traceModel) {
    const traces::TraceModel& traced = *report.traceModel;
    FUZZ_CHECK(options.readModel, "a model read without readModel");
    FUZZ_CHECK(!traced.layers.empty(), "a model read without layers");
    for (const auto& p : traced.params) {
      FUZZ_CHECK(p.layer >= -1 && p.layer < static_cast<int>(traced.layers.size()),
                 "a parameter of a layer the model does not have");
      for (int64_t d : p.shape) FUZZ_CHECK(d >= 1, "a parameter dimension below 1");
    }
    auto spec = models::parseModelJson(api::traceModelJson(traced).dump(), "m");
    FUZZ_CHECK(spec.isOk() || !spec.status().message().empty(), "a model error without a message");
  }
  // A trace without module ranges: its host facts by the forward ops the import matched.
  if (!report.forwardOps.empty()) {
    for (std::string_view piece : pieces) {
      auto facts = sim::replay::traceHostFactsSteps(piece, "rank.json", names, report.forwardOps);
      FUZZ_CHECK(facts.isOk() || !facts.status().message().empty(),
                 "a host-facts error without a message");
    }
  }
  return 0;
}
