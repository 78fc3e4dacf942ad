// nn.DataParallel (single process, one replica per GPU of one node): the baseline that shows why
// DDP wins. Assumptions are listed in ddp_simulator.h at simulateDataParallel().
//
// Timing per iteration, on device 0's clock (the device that also scatters, reduces and steps):
//   scatter (costed as a broadcast of one replica's input bytes; peer copies, category kCopy)
//   → replicate: blocking broadcast of all parameters and buffers from device 0
//   → forward: the host launches layer l on replica g at (l·G + g + 1)·launchOverhead after the
//     forward began (Python threads serialized by the GIL); replica g's kernel starts at
//     max(launch, its previous kernel's end). The loss needs every replica's output: backward
//     starts when the slowest replica finishes forward.
//   → backward: replicas in parallel (no GIL), identical durations
//   → reduce every gradient to device 0 (costed as a broadcast of all gradient bytes), blocking
//   → optimizer on device 0.
// No contention: nothing overlaps. Complexity O(L·G) per iteration.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/engine/accounting.h"
#include "sim/engine/ddp_simulator.h"
#include "traces/args_json.h"

namespace ddpscope::sim {

using traces::Category;

namespace {

// One replica's input batch: fp32 images (3 channels), or int64 token ids.
int64_t inputBytesPerReplica(const models::ModelInputs& inputs) {
  if (inputs.imageSize > 0) return inputs.batch * 3 * inputs.imageSize * inputs.imageSize * 4;
  if (inputs.seqLen > 0) return inputs.batch * inputs.seqLen * 8;
  return inputs.batch * 4;
}

}  // namespace

StatusOr<SimResult> simulateDataParallel(const models::ModelSpec& model, const WorldLayout& layout,
                                         const SimOptions& options, const ComputeModel& compute,
                                         const CommModel& comm) {
  if (layout.nodes != 1) {
    return invalidArgument("nn.DataParallel runs in one process on one node; the layout has " +
                           std::to_string(layout.nodes) + " nodes (use DDP across nodes)");
  }
  if (layout.gpusPerNode < 1) return invalidArgument("world layout: no GPUs");
  if (model.params.empty() || !model.hasLayers()) {
    return invalidArgument("model '" + model.name +
                           "' needs parameters and layers to be simulated");
  }
  if (options.allRanks || options.jitterPercent != 0 || !options.stragglers.empty()) {
    return invalidArgument("all-ranks mode, jitter and stragglers apply to DDP only");
  }
  const int iterations = options.iterations > 0 ? options.iterations : 4;
  const int replicas = layout.gpusPerNode;
  const models::ModelInputs inputs = internal::effectiveInputs(model, options.inputs);
  const std::vector<LayerTimes> times = compute.layerTimes(model, inputs);
  if (times.size() != model.layers.size()) {
    return internalError("compute model returned a wrong number of layer times");
  }
  int64_t paramBytes = 0;
  for (const models::ParamSpec& param : model.params) paramBytes += param.bytes();
  int64_t bufferBytes = 0;
  for (const models::BufferSpec& buffer : model.buffers) bufferBytes += buffer.bytes();

  internal::EstimateCache estimates(comm);
  const int64_t scatterBytes = inputBytesPerReplica(inputs);
  const CollectiveEstimate& scatter = estimates.get(Collective::kBroadcast, scatterBytes);
  const CollectiveEstimate& replicate =
      estimates.get(Collective::kBroadcast, paramBytes + bufferBytes);
  const CollectiveEstimate& reduce = estimates.get(Collective::kBroadcast, paramBytes);
  const Nanos optimizer = compute.optimizerTime(paramBytes);
  const int64_t launchNs = options.dataParallelLaunchOverhead.count();

  SimResult result;
  SimSummary& summary = result.summary;
  summary.worldSize = replicas;
  summary.simulatedRanks = 1;
  summary.workload = describeWorkload(model, layout, options, compute);
  traces::Timeline* timeline = options.recordTrace ? &result.timeline : nullptr;
  if (timeline) {
    timeline->setName(model.name + " DataParallel simulation");
    traces::Args& meta = timeline->mutableMetadata();
    for (const auto& [key, value] : traces::argsFromJson(workloadMetadata(summary.workload))) {
      meta.set(key, value);
    }
    meta.set("iterations", static_cast<int64_t>(iterations));
    meta.set("launch_overhead_us", options.dataParallelLaunchOverhead.toMicros());
    timeline->addRank(0, "device 0 (DataParallel)");
    timeline->addLane(0, "compute", traces::LaneKind::kCompute);
    timeline->addLane(0, "comm", traces::LaneKind::kComm);
    timeline->addLane(0, "host", traces::LaneKind::kHost);
  }
  internal::RankZeroRecorder recorder;
  std::vector<int64_t> deviceFree(static_cast<size_t>(replicas), 0);

  int64_t cursor = 0;
  for (int64_t i = 1; i <= iterations; ++i) {
    recorder.beginIteration();
    IterationSummary it;
    it.index = i;
    const int64_t start = cursor;
    auto commSpan = [&](const char* name, Category category, const CollectiveEstimate& est,
                        int64_t bytes, std::string_view kind) {
      const int64_t dur = est.time.count();
      recorder.add(category, Nanos(cursor), Nanos(dur));
      if (timeline) {
        timeline->addSpan({0, 1}, name, category, Nanos(cursor), Nanos(dur),
                          {{std::string(traces::kArgBytes), bytes},
                           {std::string(traces::kArgIteration), i},
                           {"algorithm", est.algorithm},
                           {"protocol", est.protocol},
                           {"busbw_gbps", est.busbwGBps}});
      }
      it.collectiveSequence.push_back(internal::sequenceEntry(kind, bytes));
      cursor += dur;
    };
    auto kernel = [&](const std::string& name, Category category, int64_t startNs, int64_t dur) {
      recorder.add(category, Nanos(startNs), Nanos(dur));
      if (timeline) {
        timeline->addSpan({0, 0}, name, category, Nanos(startNs), Nanos(dur),
                          {{std::string(traces::kArgIteration), i}});
      }
    };
    commSpan("scatter inputs", Category::kCopy, scatter, scatterBytes, "scatter");
    commSpan("replicate parameters", Category::kBroadcast, replicate, paramBytes + bufferBytes,
             "broadcast");

    // Forward: GIL-serialized launches, replicas otherwise in parallel.
    const int64_t forwardStart = cursor;
    std::fill(deviceFree.begin(), deviceFree.end(), forwardStart);
    int64_t hostNs = forwardStart;
    for (size_t l = 0; l < model.layers.size(); ++l) {
      for (int g = 0; g < replicas; ++g) {
        hostNs += launchNs;
        int64_t& free = deviceFree[static_cast<size_t>(g)];
        const int64_t begin = std::max(hostNs, free);
        free = begin + times[l].forward.count();
        if (g == 0)
          kernel(model.layers[l].name, Category::kForward, begin, times[l].forward.count());
      }
    }
    if (timeline) {
      timeline->addSpan({0, 2}, "parallel_apply (GIL-serialized launches)", Category::kOther,
                        Nanos(forwardStart), Nanos(hostNs - forwardStart),
                        {{std::string(traces::kArgIteration), i}});
    }
    cursor = *std::max_element(deviceFree.begin(), deviceFree.end());
    // Backward: every replica in parallel; device 0's lane shows its kernels.
    for (size_t l = model.layers.size(); l-- > 0;) {
      kernel(model.layers[l].name, Category::kBackward, cursor, times[l].backward.count());
      cursor += times[l].backward.count();
    }
    commSpan("reduce gradients to device 0", Category::kCommOther, reduce, paramBytes, "reduce");
    kernel("optimizer.step", Category::kOptimizer, cursor, optimizer.count());
    cursor += optimizer.count();

    it.collectives = static_cast<int>(it.collectiveSequence.size());
    recorder.finishIteration(Nanos(start), Nanos(cursor), it);
    it.maxRankStepTime = it.stepTime;
    if (timeline) timeline->addIteration(0, i, Nanos(start), Nanos(cursor - start));
    summary.iterations.push_back(std::move(it));
  }
  RETURN_IF_ERROR(internal::finishSummary(summary, 1));
  return result;
}

}  // namespace ddpscope::sim
