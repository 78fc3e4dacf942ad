#include "sim/engine/workload.h"

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "ddp/ddp_settings.h"
#include "sim/engine/accounting.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim {

Workload describeWorkload(const models::ModelSpec& model, const WorldLayout& layout,
                          const SimOptions& options, const ComputeModel& compute) {
  Workload w;
  w.model = model.name;
  w.modelSource = model.origin;
  w.parameters = model.numParams();
  w.parameterTensors = model.numTensors();
  w.gradientBytes = model.totalBytes();
  const models::ModelInputs inputs = internal::effectiveInputs(model, options.inputs);
  w.batchPerRank = inputs.batch;
  w.globalBatch = inputs.batch * layout.worldSize();
  w.seqLen = inputs.seqLen;
  w.imageSize = inputs.imageSize;
  w.dtype = options.dtype;
  w.compute = compute.describe();
  w.optimizer = compute.optimizer();
  w.strategy =
      options.strategy == Strategy::kDataParallel ? "DataParallel" : "DistributedDataParallel";
  w.ddp = options.ddp;
  w.ddp.worldSize = layout.worldSize();
  w.compile = options.compile;
  if (options.compile == CompileMode::kDdpOptimizer) {
    auto graphs = ddpOptimizerGraphs(model, options.ddp.bucketCapBytes());
    if (graphs.isOk() && !graphs->empty()) w.compiledGraphs = graphs->back() + 1;
  } else if (options.compile != CompileMode::kNone) {
    w.compiledGraphs = 1;
  }
  w.nodes = layout.nodes;
  w.gpusPerNode = layout.gpusPerNode;
  w.worldSize = layout.worldSize();
  return w;
}

namespace {

// "  label      text" with the text wrapped at spaces to 100 columns, continuation lines indented
// under the text.
std::string labelled(std::string_view label, const std::string& text) {
  constexpr size_t kWidth = 100;
  constexpr size_t kIndent = 13;
  std::string out = "  " + std::string(label);
  out.resize(kIndent, ' ');
  size_t column = kIndent;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view word(text.data() + start, end - start);
    if (column > kIndent && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(kIndent, ' ');
      column = kIndent;
    } else if (column > kIndent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    start = end + 1;
  }
  return out + "\n";
}

}  // namespace

std::string workloadText(const Workload& w) {
  std::string inputs = "batch " + std::to_string(w.batchPerRank) + " per rank, " +
                       std::to_string(w.globalBatch) + " global";
  if (w.seqLen > 0) inputs += "; sequence length " + std::to_string(w.seqLen);
  if (w.imageSize > 0) {
    inputs += "; images " + std::to_string(w.imageSize) + "x" + std::to_string(w.imageSize);
  }
  std::string out = "workload (what the numbers assume):\n";
  out += labelled("model", w.model + " (" + w.modelSource + "): " + formatThousands(w.parameters) +
                               " parameters in " + std::to_string(w.parameterTensors) +
                               " tensors, " + formatBytes(w.gradientBytes) + " of gradients");
  out += labelled("inputs", inputs);
  out += labelled("compute", w.dtype + "; " + w.compute);
  out += labelled("optimizer", w.optimizer);
  out +=
      labelled("strategy", w.strategy == "DataParallel" ? w.strategy : ddp::ddpSettingsText(w.ddp));
  if (w.strategy != "DataParallel")
    out += labelled("compile", compileModeText(w.compile, w.compiledGraphs));
  out += labelled("cluster", w.cluster + ": " + std::to_string(w.nodes) + " node(s) x " +
                                 std::to_string(w.gpusPerNode) + " = " +
                                 std::to_string(w.worldSize) + " ranks");
  return out;
}

namespace {

nlohmann::json workloadFields(const Workload& w) {
  return {{"model", w.model},
          {"model_source", w.modelSource},
          {"parameters", w.parameters},
          {"parameter_tensors", w.parameterTensors},
          {"gradient_bytes", w.gradientBytes},
          {"batch_per_rank", w.batchPerRank},
          {"global_batch", w.globalBatch},
          {"seq_len", w.seqLen},
          {"image_size", w.imageSize},
          {"dtype", w.dtype},
          {"compute", w.compute},
          {"optimizer", w.optimizer},
          {"strategy", w.strategy},
          {"compile", compileModeName(w.compile)},
          {"compiled_graphs", w.compiledGraphs},
          {"cluster", w.cluster},
          {"nodes", w.nodes},
          {"gpus_per_node", w.gpusPerNode},
          {"world_size", w.worldSize}};
}

}  // namespace

nlohmann::json workloadJson(const Workload& w) {
  nlohmann::json out = workloadFields(w);
  out["ddp"] = ddp::ddpSettingsJson(w.ddp);
  return out;
}

nlohmann::json workloadMetadata(const Workload& w) {
  nlohmann::json out = workloadFields(w);
  if (w.compile == CompileMode::kNone) {
    // Eager traces stay as they were before --compile existed.
    out.erase("compile");
    out.erase("compiled_graphs");
  }
  out.update(ddp::ddpSettingsJson(w.ddp));
  return out;
}

}  // namespace ddpscope::sim
