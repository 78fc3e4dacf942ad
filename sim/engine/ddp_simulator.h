// The DDP iteration simulator: replays training iterations of a model on a WorldLayout of a
// cluster, driving the same ddp::Reducer state machine the runtime uses (launch order,
// rebuilds and find_unused behaviour are PyTorch's by construction); it only adds time.
//
// Per iteration (ddp-semantics.md §3.15, §7): [buffer broadcast] → forward (+ graph traversal
// with find_unused) → backward emitting per-parameter ready events in the model's
// gradient-ready order → Reducer → copy/scale kernels (skipped with gradient_as_bucket_view)
// → bucket collectives, strictly in order, on one serialized comm stream:
// comm_start(b) = max(launch(b), comm_end(b−1)) → used-map allreduce last (find_unused) →
// finalize (wait, copy back) → optimizer. Iteration 1 uses the construction plan; the rebuild
// (2 small broadcasts) happens at iteration 2 (3 with static_graph); no_sync K skips the
// collectives of K−1 of every K steps; comm hooks change bytes; compute slows by the
// contention factor while a collective is in flight.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/compute/compute_model.h"
#include "traces/timeline.h"

namespace ddpscope::sim {

enum class Strategy { kDdp, kDataParallel };

struct SimOptions {
  models::ModelInputs inputs;      // zero fields = the model's defaults
  ddp::DdpConfig ddp;              // worldSize is overwritten from the layout
  std::string dtype = "bf16";      // compute dtype for the roofline: fp32, tf32, bf16, fp16
  int iterations = 4;              // simulated iterations (≥ 1); steady state = the last one
  bool syncBatchNorm = false;      // SyncBatchNorm: a blocking small allreduce per BN layer
  std::optional<double> contentionSlowdown;  // nullopt = the cluster's value
  Strategy strategy = Strategy::kDdp;
  // All-ranks mode: every rank simulated; each rank's compute is scaled by a seeded factor
  // 1 + U(−jitter, +jitter); stragglers (rank, slowdown fraction) are slower every iteration; a
  // collective starts when its last rank arrives. Otherwise one rank is simulated (symmetric).
  bool allRanks = false;
  double jitterPercent = 0;
  uint64_t seed = 1;
  std::vector<std::pair<int, double>> stragglers;
  bool recordTrace = true;         // false: metrics only (sweeps)
};

struct IterationSummary {
  int64_t index = 0;        // 1-based
  Nanos start;
  Nanos stepTime;
  Nanos forward;            // forward compute span
  Nanos backward;           // backward compute span (first backward op start → last end)
  Nanos comm;               // |∪ communication| in the iteration (rank 0)
  Nanos exposedComm;        // comm not overlapped by compute
  double overlapPercent = 0;
  bool synced = true;       // false for no_sync steps
  int collectives = 0;      // collectives issued in the iteration (bucket + used-map + bcast)
  std::vector<std::string> collectiveSequence;  // e.g. "allreduce:14889448", "broadcast:13"
};

struct SimSummary {
  Nanos stepTime;           // steady state: mean over synced+unsynced steps of the last K
  Nanos firstIteration;     // iteration 1
  Nanos forward, backward, optimizer;
  Nanos comm, exposedComm, overlapped, idle;
  double overlapPercent = 0;  // HTA definition on the steady-state iterations
  int numBuckets = 0;         // steady-state plan
  std::vector<int64_t> bucketBytes;
  std::vector<IterationSummary> iterations;
  int worldSize = 1;
};

struct SimResult {
  SimSummary summary;
  traces::Timeline timeline;  // empty when !options.recordTrace
};

// Simulates with explicit models (tests pass idealised ones).
StatusOr<SimResult> simulateDdp(const models::ModelSpec& model, const WorldLayout& layout,
                                const SimOptions& options, const ComputeModel& compute,
                                const CommModel& comm, double contentionSlowdown);

// Builds the roofline and comm models from the cluster and runs the strategy asked for.
StatusOr<SimResult> simulate(const models::ModelSpec& model, const ClusterSpec& cluster,
                             const WorldLayout& layout, const SimOptions& options);

}  // namespace ddpscope::sim
