#include "sim/engine/compile_mode.h"

#include <string>
#include <utility>

#include "base/strings.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "sim/engine/compile_script.h"
#include "sim/engine/script.h"

namespace ddpscope::sim {

namespace {

Status checkDdpOptimizerCap(int64_t bucketBytesCap) {
  if (bucketBytesCap >= kCompileFirstBucketBytes) return Status::ok();
  return invalidArgument(
      "--compile ddp-optimizer: bucket_cap_mb must be at least 1 MiB (DDPOptimizer asserts that "
      "its first bucket, 1 MiB, is no larger than the others), got " +
      formatShortest(static_cast<double>(bucketBytesCap) / (1 << 20)) + " MiB");
}

}  // namespace

std::string_view compileModeName(CompileMode mode) {
  switch (mode) {
    case CompileMode::kNone:
      return "none";
    case CompileMode::kDdpOptimizer:
      return "ddp-optimizer";
    case CompileMode::kWholeGraph:
      return "whole-graph";
    case CompileMode::kCompiledAutograd:
      return "compiled-autograd";
  }
  return "none";
}

std::optional<CompileMode> parseCompileMode(std::string_view text) {
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kDdpOptimizer, CompileMode::kWholeGraph,
                           CompileMode::kCompiledAutograd}) {
    if (text == compileModeName(mode)) return mode;
  }
  return std::nullopt;
}

std::string_view compileModeChoices() {
  return "none|ddp-optimizer|whole-graph|compiled-autograd";
}

std::string compileModeText(CompileMode mode, int graphs) {
  const std::string count = graphs > 0 ? std::to_string(graphs) : "?";
  switch (mode) {
    case CompileMode::kNone:
      return "eager (no torch.compile)";
    case CompileMode::kDdpOptimizer:
      return "torch.compile with DDPOptimizer: " + count +
             " sub-graphs split at bucket boundaries; each sub-graph's gradients are ready when "
             "its backward ends";
    case CompileMode::kWholeGraph:
      return "torch.compile, optimize_ddp=False: one graph; every gradient is ready at the end "
             "of the backward (no allreduce overlaps it)";
    case CompileMode::kCompiledAutograd:
      return "torch.compile + compiled autograd, python reducer: one graph; Inductor fuses the "
             "allreduces into buckets (first 1 MiB, then bucket_cap_mb rounded down to MiB)";
  }
  return "";
}

StatusOr<std::vector<int>> ddpOptimizerGraphs(const models::ModelSpec& model,
                                              int64_t bucketBytesCap) {
  RETURN_IF_ERROR(checkDdpOptimizerCap(bucketBytesCap));
  const int numLayers = static_cast<int>(model.layers.size());
  // Buckets are built from the last layer backwards; bucketOf counts them from the back.
  std::vector<int> bucketFromBack(static_cast<size_t>(numLayers), 0);
  int current = 0;
  int64_t currentBytes = 0;
  for (int l = numLayers - 1; l >= 0; --l) {
    const int64_t cap = current == 0 ? kCompileFirstBucketBytes : bucketBytesCap;
    if (currentBytes >= cap) {
      ++current;
      currentBytes = 0;
    }
    for (int p : model.layers[static_cast<size_t>(l)].params) {
      currentBytes += model.params[static_cast<size_t>(p)].bytes();
    }
    bucketFromBack[static_cast<size_t>(l)] = current;
  }
  // A last bucket (the first layers) without parameters joins its neighbour.
  if (current > 0 && currentBytes == 0) {
    for (int& b : bucketFromBack) {
      if (b == current) b = current - 1;
    }
    --current;
  }
  std::vector<int> graphOfLayer(static_cast<size_t>(numLayers), 0);
  for (int l = 0; l < numLayers; ++l) {
    graphOfLayer[static_cast<size_t>(l)] = current - bucketFromBack[static_cast<size_t>(l)];
  }
  return graphOfLayer;
}

std::vector<std::pair<int, int>> inductorFusionGroups(const std::vector<int>& readyOrder,
                                                      const std::vector<int64_t>& paramBytes,
                                                      int64_t bucketCapMib) {
  std::vector<std::pair<int, int>> groups;
  int64_t cap = kCompileFirstBucketBytes;
  int64_t size = 0;
  int first = 0;
  const int n = static_cast<int>(readyOrder.size());
  for (int i = 0; i < n; ++i) {
    size += paramBytes[static_cast<size_t>(readyOrder[static_cast<size_t>(i)])];
    if (size < cap && i != n - 1) continue;
    groups.emplace_back(first, i);
    first = i + 1;
    size = 0;
    cap = bucketCapMib * (int64_t{1} << 20);
  }
  return groups;
}

Status validateCompileMode(CompileMode mode, const ddp::DdpConfig& config) {
  if (mode == CompileMode::kDdpOptimizer)
    RETURN_IF_ERROR(checkDdpOptimizerCap(config.bucketCapBytes()));
  if (mode == CompileMode::kCompiledAutograd && config.commHook.kind != ddp::CommHookKind::kNone) {
    return invalidArgument(
        "--compile compiled-autograd: comm hooks are not modelled with the python reducer (it "
        "calls them per gradient); use --comm-hook none");
  }
  if (mode == CompileMode::kCompiledAutograd && !config.bucketCapMbList.empty()) {
    // torch 2.15 distributed.py: "when using bucket_cap_mb_list, python reducer is not supported".
    return invalidArgument(
        "--compile compiled-autograd: --bucket-cap-mb-list is not supported with the python "
        "reducer (PyTorch 2.15 asserts it); use --bucket-cap-mb");
  }
  return Status::ok();
}

namespace internal {

StatusOr<CompilePlan> makeCompilePlan(const models::ModelSpec& model, const ddp::DdpConfig& config,
                                      CompileMode mode, Nanos graphCallOverhead) {
  RETURN_IF_ERROR(validateCompileMode(mode, config));
  CompilePlan plan;
  plan.mode = mode;
  plan.graphCallHalfNs = graphCallOverhead.count() / 2;
  plan.fusionCapMib = config.bucketCapBytes() >> 20;
  switch (mode) {
    case CompileMode::kNone:
      break;
    case CompileMode::kDdpOptimizer: {
      ASSIGN_OR_RETURN(plan.graphOfLayer, ddpOptimizerGraphs(model, config.bucketCapBytes()));
      break;
    }
    case CompileMode::kWholeGraph:
    case CompileMode::kCompiledAutograd:
      plan.graphOfLayer.assign(model.layers.size(), 0);
      break;
  }
  plan.numGraphs = plan.graphOfLayer.empty() ? 0 : plan.graphOfLayer.back() + 1;
  return plan;
}

Status buildCompiledAutogradScript(const models::ModelSpec& model, const ModelFacts& facts,
                                   const ComputeModel& compute, const ddp::DdpConfig& config,
                                   bool syncBatchNorm, int64_t iteration, const CompilePlan& plan,
                                   UsageClass& cls) {
  Script& script = cls.script;
  script.clear();
  ScriptBuilder& builder = *cls.builder;
  const bool synced = config.syncEnabled(iteration);
  script.synced = synced;
  builder.begin(script);

  const int numLayers = static_cast<int>(model.layers.size());
  const int numParams = static_cast<int>(model.params.size());
  cls.layerUsed.assign(static_cast<size_t>(numLayers), 1);
  cls.readyLayer.assign(static_cast<size_t>(numParams), -1);
  for (int l = 0; l < numLayers; ++l) {
    const models::LayerSpec& layer = model.layers[static_cast<size_t>(l)];
    const bool used = !layer.use || layer.use->usedIn(iteration, cls.representativeRank);
    cls.layerUsed[static_cast<size_t>(l)] = used ? 1 : 0;
    if (!used) continue;
    for (int p : layer.params) {
      if (cls.readyLayer[static_cast<size_t>(p)] < 0) cls.readyLayer[static_cast<size_t>(p)] = l;
    }
  }
  for (int p : facts.orphanParams) cls.readyLayer[static_cast<size_t>(p)] = numLayers;

  // Forward: one compiled graph.
  builder.addOp(OpKind::kHost, kHostGraphCall, plan.graphCallHalfNs);
  for (int l = 0; l < numLayers; ++l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    builder.addOp(OpKind::kForward, l, facts.layerTimes[static_cast<size_t>(l)].forward.count());
    if (syncBatchNorm && facts.syncBnBytes[static_cast<size_t>(l)] > 0) builder.issueSyncBn(l);
  }

  // The gradients in the order the backward graph produces them (the eager hook order); a
  // parameter without a gradient has no hook call in the graph. readyAt[i]: the layer whose
  // backward produces readyOrder[i] (numLayers: after the last one).
  std::vector<int> readyOrder;
  std::vector<int> readyAt;
  if (synced) {
    for (int l = numLayers - 1; l >= 0; --l) {
      if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
      for (int p : model.layerGradReadyOrder(l, config.autocast)) {
        if (cls.readyLayer[static_cast<size_t>(p)] != l) continue;
        readyOrder.push_back(p);
        readyAt.push_back(l);
      }
    }
    for (int p : facts.orphanParams) {
      if (cls.readyLayer[static_cast<size_t>(p)] != numLayers) continue;
      readyOrder.push_back(p);
      readyAt.push_back(numLayers);
    }
  }
  const std::vector<std::pair<int, int>> groups =
      inductorFusionGroups(readyOrder, facts.paramBytes, plan.fusionCapMib);
  std::vector<int> groupCollective;
  size_t nextGroup = 0;
  // flatten + cat, then div, then the fused allreduce, right after the group's last gradient.
  auto issueGroupsReadyAt = [&](int layer) {
    for (; nextGroup < groups.size() &&
           readyAt[static_cast<size_t>(groups[nextGroup].second)] == layer;
         ++nextGroup) {
      const auto [first, last] = groups[nextGroup];
      int64_t bytes = 0;
      for (int i = first; i <= last; ++i) {
        bytes += facts.paramBytes[static_cast<size_t>(readyOrder[static_cast<size_t>(i)])];
      }
      const int32_t bucket = static_cast<int32_t>(nextGroup);
      builder.addOp(OpKind::kCopy, -1, compute.copyTime(bytes).count(), CopyRole::kIntoBucket,
                    bucket);
      builder.addOp(OpKind::kCopy, -1, compute.copyTime(bytes).count(), CopyRole::kScale, bucket);
      CollectiveDesc desc;
      desc.kind = CollectiveKind::kBucket;
      desc.bytes = bytes;
      desc.bucket = bucket;
      groupCollective.push_back(builder.issue(desc));
    }
  };

  // Backward: one compiled graph (compiled autograd) with the fused allreduces inside.
  builder.addOp(OpKind::kHost, kHostGraphCall, plan.graphCallHalfNs);
  for (int l = numLayers - 1; l >= 0; --l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    builder.addOp(OpKind::kBackward, l, facts.layerTimes[static_cast<size_t>(l)].backward.count());
    if (syncBatchNorm && facts.syncBnBytes[static_cast<size_t>(l)] > 0) builder.issueSyncBn(l);
    issueGroupsReadyAt(l);
  }
  issueGroupsReadyAt(numLayers);
  // The waits sit before the copies into param.grad at the end of the graph.
  for (size_t g = 0; g < groups.size(); ++g) {
    builder.addOp(OpKind::kWait, groupCollective[g], 0);
    for (int i = groups[g].first; i <= groups[g].second; ++i) {
      const int p = readyOrder[static_cast<size_t>(i)];
      builder.addOp(OpKind::kCopy, p,
                    compute.copyTime(facts.paramBytes[static_cast<size_t>(p)]).count(),
                    CopyRole::kCopyBack, static_cast<int32_t>(g));
    }
  }
  if (!script.collectives.empty()) {
    builder.addOp(OpKind::kWait, static_cast<int32_t>(script.collectives.size()) - 1, 0);
  }
  if (synced) {
    builder.addOp(OpKind::kOptimizer, 0, compute.optimizerTime(facts.totalParamBytes).count());
  }
  return Status::ok();
}

}  // namespace internal

}  // namespace ddpscope::sim
