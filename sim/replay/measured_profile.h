// MeasuredProfile: what a measured run (a Chrome trace with our lanes) says about compute and
// communication, in the terms the simulator costs them in.
//
// Input: any Timeline whose ranks carry
//   - a compute lane (LaneKind::kCompute) with one span per layer forward (category forward,
//     named by the layer: "layer1.0.conv1") and backward (category backward, named by the layer,
//     optionally suffixed " (backward)"), and optionally an optimizer span;
//   - comm lanes (LaneKind::kComm) with one span per collective (allreduce, used_map_allreduce,
//     broadcast, ...) carrying the arg "bytes";
//   - copy spans (category copy) on any lane: copies into buckets carry "bytes" (a copy-in
//     sample); spans named "...back..." or without bytes are the copy-back of finalize;
//   - iteration windows (category iteration, "ProfilerStep#N").
// The runtime (ddpscope run) writes exactly this; `import-torch` maps PyTorch traces onto it.
//
// Attribution (per rank, per measured iteration), chosen so that the simulator's iteration
// (Σ forward, backward with copies, comm, copy-back, optimizer) adds up to the measured window:
//   forward(l)  = end(l) − end(previous forward span), the first from the iteration start
//                 (so the time before the first layer and between layers is counted);
//   backward(l) = end(l) − end(previous compute span) − Σ copy-ins that ran in between (the
//                 first backward span absorbs the loss and find_unused's graph traversal);
//   tail        = iteration end − max(end of the last backward span, of any copy, of any
//                 collective): optimizer step, zero_grad and the rest of the step;
//   copy-in     = a + b · bytes, least squares over the copy-into-bucket spans;
//   copy-back   = Σ copy-back spans of the iteration (the runtime copies every bucket back after
//                 all collectives finished).
// Each layer sample also records the fraction of its attributed interval during which a
// collective was in flight on that rank (`commOverlap`), for the contention fit and de-rating.
//
// Measured iterations: index > max(warmup, rebuild iteration) — the warm-up of the run
// (metadata "warmup") and the iterations before the bucket rebuild (iteration 1 uses the
// construction plan; the rebuild happens at iteration 2, 3 with static_graph) are left out;
// an imported PyTorch profile (metadata source "pytorch-profiler", ProfilerStep#N counted from
// the profiler's start) leaves out only the iterations up to the last one with more broadcasts
// than its last (the rebuild's), none when its steps look alike; `skipIterations` overrides. The
// measured step time is the median over measured iterations of the slowest rank's window (the
// runtime summary's definition).
//
// Complexity: O(S log S) for S spans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "traces/timeline.h"
#include "traces/traced_gpu.h"

namespace ddpscope::sim::replay {

// The run's settings, from the trace metadata (otherData) written by ddpscope run.
struct RunSettings {
  std::string model;           // "model": zoo name or shorthand ("" when absent)
  std::string modelJson;       // "model_json": the model read off a profiled trace ("" when absent)
  int worldSize = 0;           // "world_size" (else the number of ranks in the trace)
  int64_t globalBatch = 0;     // "global_batch" (0 = unknown)
  int64_t batchPerRank = 0;    // "batch_per_rank" or global_batch / world_size (0 = unknown)
  int64_t seqLen = 0;          // "seq_len" (0 = the model's default)
  int64_t imageSize = 0;       // "image_size" (0 = the model's default)
  int64_t warmup = 0;          // "warmup"
  bool syncBatchNorm = false;  // "sync_batchnorm"
  std::string dtype = "fp32";  // "dtype": the matrix-product precision the run computed in
  ddp::DdpConfig ddp;          // bucket_cap_mb, find_unused_parameters, static_graph, ...
};
// Reads RunSettings from a timeline's metadata; `origin` names the trace in errors.
StatusOr<RunSettings> readRunSettings(const traces::Timeline& timeline, const std::string& origin);

// The model a trace was recorded with: --model wins, else metadata "model" (a
// zoo name or a shorthand), else "model_json" (the model `ddpscope import-torch` read off a trace
// recorded with record_shapes=True). Error when none is known.
StatusOr<models::ModelSpec> modelForTrace(const RunSettings& settings, const std::string& origin);

// One attributed layer time of one rank in one iteration.
struct LayerSample {
  int rank = 0;
  int64_t iteration = 0;
  Nanos time;
  double commOverlap = 0;  // fraction of the interval with a collective in flight, [0, 1]
  // A GPU trace imported from PyTorch's profiler (traces::kArgKernelNs): the layer's kernels'
  // summed time. `time` also holds the gaps where the GPU waited for the host, which replay at
  // the run's own settings needs; what the device computed is this (calibrate fits to it).
  std::optional<Nanos> kernels;

  // The device's time for the layer: its kernels where the trace measured them, else `time`
  // (runtime traces: the span is the computation).
  Nanos deviceTime() const { return kernels.value_or(time); }
};

// A collective matched across ranks by (iteration, issue ordinal on the rank's comm lanes).
struct CollectiveSample {
  traces::Category category = traces::Category::kAllreduce;
  std::string name;
  int64_t bytes = 0;
  int64_t iteration = 0;
  Nanos start;  // latest start over ranks (when the last rank joined)
  Nanos end;    // latest end over ranks
  // end − start (≥ 0), less the time it shared with the rank's other collectives: a stretch
  // where k collectives were in flight counts 1/k (the mean over ranks of that share). Gloo
  // runs two collectives at once on separate threads; the simulator's one serialized comm
  // stream then takes each one's own cost, not its time stretched by the other.
  Nanos duration;
  bool measured = false;  // in a measured iteration
};

struct MeasuredProfile {
  std::string origin;  // the trace path
  RunSettings settings;
  int numRanks = 0;
  // A trace of some of the job's ranks (import-torch --allow-missing-ranks): each collective is
  // timed from the ranks present, so its time holds their wait for the missing ones.
  bool someRanksOnly() const { return numRanks > 0 && numRanks < settings.worldSize; }
  std::vector<int64_t> measuredIterations;
  Nanos measuredStep;                 // median over measured iterations of max over ranks
  std::vector<Nanos> iterationSteps;  // per measured iteration: max over ranks
  // Per layer (model order), all samples of measured iterations over all ranks.
  std::vector<std::vector<LayerSample>> forward;
  std::vector<std::vector<LayerSample>> backward;
  std::vector<LayerSample> tail;      // per (rank, measured synced iteration)
  std::vector<LayerSample> copyBack;  // per (rank, measured iteration with a copy-back)
  // Copy-in fit: time = copyInterceptNs + copyNsPerByte · bytes (least squares; 0 samples = 0).
  double copyInterceptNs = 0;
  double copyNsPerByte = 0;
  int copySamples = 0;
  std::vector<CollectiveSample> collectives;  // every iteration window, all kinds with bytes
  // Collective spans without a "bytes" arg (an imported PyTorch trace without message sizes):
  // their size is unknown, so no cost model may be fitted to this profile's collectives.
  int64_t collectivesWithUnknownBytes = 0;
  // How much the slowest rank's step exceeds a typical rank's: median over measured iterations
  // of max_r step(r, i), divided by the mean over ranks of median_i step(r, i) (1 with one rank).
  // The simulator's symmetric fast path predicts a typical rank; noise that is independent per
  // rank (a loaded host's scheduling) makes the slowest rank of each iteration slower.
  double rankMaxFactor = 1;
  // A GPU trace imported with --model: the host facts of its first rank's profiled steps
  // (metadata "host_facts": {"steps": trace_host_facts.h's array}, as text) and the trace they
  // came from.
  std::string hostFacts, hostFactsTrace;
  // The GPU an imported GPU trace's kernels ran on (metadata "gpu", from its deviceProperties);
  // empty for a CPU trace and for imports that do not say.
  std::optional<traces::TracedGpu> gpu;
  // The layers (model indices) in the order the lowest rank's last measured forward ran them,
  // each at its first span; layers without a forward span of their own are left out.
  std::vector<int> forwardOrder;
  // loadProfile: when the run's forward ran layers in another order than the model lists them,
  // what moved ("the run's forward ran 8 layers in another order than model 'resnet50' lists
  // them, first layer1.0.downsample.0 before layer1.0.conv1: ..."); empty otherwise.
  std::string layerOrderNote;

  // Whether this is an imported GPU trace: a layer sample with its kernels' time, or host facts.
  bool gpuImport() const {
    for (const auto& pass : {&forward, &backward}) {
      for (const auto& samples : *pass) {
        for (const LayerSample& s : samples) {
          if (s.kernels) return true;
        }
      }
    }
    return !hostFacts.empty();
  }
};

struct ProfileOptions {
  std::optional<int64_t> skipIterations;  // leave out iterations ≤ this (default: see above)
};

// Builds the profile of `timeline` for `model`. Errors (InvalidArgument, naming `origin`): no
// iteration windows, no measured iterations left, a forward/backward span naming no layer of
// the model, a layer that never ran forward in any measured iteration.
StatusOr<MeasuredProfile> buildProfile(const traces::Timeline& timeline,
                                       const models::ModelSpec& model, const std::string& origin,
                                       const ProfileOptions& options = {});

// `profile` as if `iteration` (one of its measured iterations) were its only measured one: the
// layer, tail and copy-back samples of that iteration (a layer without a sample in it keeps all
// of its samples), its collectives as the measured ones, its step as the measured step. The
// copy-in fit, the slowest-rank factor and everything read from the metadata stay the
// profile's. Replay runs each measured step on its own this way (api/replay_request.h).
MeasuredProfile oneIteration(const MeasuredProfile& profile, int64_t iteration);

// The model's layers in the order `profile`'s run ran them (profile.forwardOrder): the run's
// layers in their order, each layer without a span of its own (a functional op such as a
// residual add) right after the last of its producers (its "inputs", else the previous listed
// layer). Empty when the layers the run has spans of ran in the model's order.
std::vector<int> runLayerOrder(const models::ModelSpec& model, const MeasuredProfile& profile);
// What moved between the model's listed order and a run's forward (`ran`: model indices in the
// run's order): how many layers lie outside the longest run of them in listed order, and the
// first ("the run's forward called 8 of its 158 layers elsewhere than model 'resnet50' lists
// them (first layer1.0.downsample.0 before layer1.0.conv1); ..."). Empty when none moved.
std::string layerOrderNote(const models::ModelSpec& model, const std::vector<int>& ran);

// Reads a Chrome trace and builds its profile; the model comes from `model` when given, else
// from the metadata. When the run's forward called the layers in another order
// (runLayerOrder), the model comes back in the run's order, the profile's per-layer samples
// with it, and profile.layerOrderNote says what moved: autograd readies gradients in reverse
// forward order, so the buckets DDP rebuilt follow the run's order, not the listed one.
struct LoadedProfile {
  models::ModelSpec model;
  MeasuredProfile profile;
};
StatusOr<LoadedProfile> loadProfile(const std::string& tracePath,
                                    const std::optional<models::ModelSpec>& model,
                                    const ProfileOptions& options = {});

}  // namespace ddpscope::sim::replay
