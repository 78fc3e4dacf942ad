// The DDP iteration simulator: replays training iterations of a model on a WorldLayout of a
// cluster, driving the same ddp::Reducer state machine the runtime uses (launch order,
// rebuilds and find_unused behaviour are PyTorch's by construction); it only adds time.
//
// Per iteration (docs/spec/ddp-semantics.md §3.15, §7): [rebuild: 2 blocking broadcasts] → [buffer
// broadcast] → forward (SyncBatchNorm: a blocking allreduce after each BatchNorm layer) → graph
// traversal on the host (dynamic find_unused, synced steps) → backward, layers reversed, each
// layer's parameters marked ready in its gradReadyOrder at the layer's backward end → Reducer →
// copy/scale kernels on the compute stream (gradient_as_bucket_view: only the scale) → bucket
// collectives, strictly in order, on one serialized comm stream:
// comm_start(b) = max(launch(b), comm_end(b−1)) → used-map allreduce last (find_unused) →
// finalize: per bucket in order the compute stream waits for the bucket's collective and copies
// it back (one kernel per parameter, skipped with gradient_as_bucket_view), then waits for every
// collective of the step (the used map) → optimizer (synced steps only: no_sync micro-steps only
// accumulate). Iteration 1 uses the construction plan; the rebuild happens at iteration 2 (3 with
// static_graph); no_sync K skips the collectives of K−1 of every K steps; comm hooks change bytes
// (ddp::collectiveBytesForBucket; fp16/bf16 add a cast kernel per bucket; PowerSGD issues 3
// sequential collectives per bucket, its matmuls are not modelled). Construction-time syncs
// (parameter broadcast, shape verification) happen before iteration 1 and are not simulated.
//
// How (internal headers of this folder, not public API): script.h turns each iteration into a
// script of compute-stream ops, host ops, collective issues and waits by driving the Reducer —
// its decisions depend only on the order of hooks, not on time — and lists what each op costs;
// replayer.h times the scripts by dependency propagation in lockstep over the collectives (no
// event queue) and states the order rules; accounting.h turns rank 0's spans into the summary.
// Both files state their complexity.
//
// Contention (docs/spec/nccl-cost-model.md §5): while a collective is in flight on a rank, that
// rank's compute-stream kernels (forward, backward, copies, optimizer) progress at 1/(1 + c) of
// their speed, c = the flat contention, or per collective max(contention, k / (SMs − k)) when
// NCCL's k CTAs are counted as holding k of the GPU's SMs (options.smContentionSms). A kernel with
// w ns of work that starts at t is integrated piecewise over the rank's busy intervals: outside
// them it does 1 ns of work per ns, inside them 1/(1 + c) — a kernel straddling a boundary is
// slowed only for the overlapped part. Collectives themselves are not slowed. Host work (graph
// traversal) is not slowed.
//
// All-ranks mode (options.allRanks): every rank replays its own script (ranks whose layers'
// UsePattern.ranks agree share one Reducer and one script) with its compute times scaled by
// 1 + U(−j, +j) per (rank, iteration) (j = jitterPercent / 100; U drawn from a seeded
// std::mt19937_64 as (x >> 11) · 2⁻⁵³, portable across standard libraries) times (1 + s) for a
// straggler. Collective k starts when the last rank has issued it (and collective k−1 has
// ended). An early rank's NCCL kernel starts at its own issue and spins until the last rank
// arrives: its comm span (and the contention it causes) runs from
// max(local issue, end of collective k−1) to the collective's end, as HTA would count it.
// Symmetric fast path (default): only rank 0 is simulated (the same code with one rank).
//
// Host (HostModel; host_profile.h): each rank has a host cursor besides its compute stream. With
// a profile's per-op terms, a layer's forward costs the host its module call and its aten ops
// (moduleUs, forwardOpUs × ops), its backward the autograd nodes and its parameters'
// AccumulateGrad (backwardNodeUs × nodes + accumulateGradUs × parameters), both passes the CUDA
// runtime calls their ops make (launchUs × launches), each step its own
// work (stepUs: zero_grad, the loss, the loop) and the optimizer step optimizerUs; the op counts
// are the model's (models::hostOps). Without them, launching a layer kernel costs it kernelLaunch.
// On GPUs the host runs ahead: DDP's
// autograd hook (grad_hook_us) precedes each copy into a bucket, c10d's allreduce launch
// (allreduce_launch_us) each bucket collective and the used-map allreduce, finalize's stream wait
// (finalize_wait_us) each bucket's wait and copy_back_us each copy back; a kernel starts at
// max(stream free, host done launching it) and a collective's launch at max(stream point, host
// issue) — host costs only show where the host falls behind the device (host-bound). DDP's
// forward wrapper (step_overhead_us) and find_unused's traversal are host work the stream waits
// for (the step starts synchronized). On CPU ranks the host is the stream: every cost adds up.
//
// Invariants: spans on each lane are disjoint (validateNesting passes); iterations of a rank are
// back to back; every collective of an iteration ends before the iteration does; the summary's
// overlap numbers equal traces::computeOverlap on rank 0 of the written timeline for the same
// iteration windows; same inputs → byte-identical trace.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/engine/compile_mode.h"
#include "sim/engine/workload.h"
#include "traces/timeline.h"

namespace ddpscope::sim {

enum class Strategy { kDdp, kDataParallel };

// What a layer's dispatch costs the host under a profile's per-op terms (what the simulation
// charges; 0 without them): forward = its module call + its top-level ops, backward = its
// autograd nodes + one AccumulateGrad per parameter, each pass + its runtime calls
// (models::hostOps under `autocast`).
struct LayerHostUs {
  double forward = 0, backward = 0;
};
LayerHostUs layerHostUs(const HostProfile& profile, const models::LayerSpec& layer, bool autocast);

// The host thread that runs the training loop and autograd (DDP's hooks run on it), and what
// it pays (host_profile.h: per op and DDP's reducer). See "Host" in the header comment.
struct HostModel {
  HostProfile profile;
  // true (GPUs): the host issues work asynchronously and runs ahead of the compute stream;
  // false (CPU ranks): the host thread is the compute stream, its costs add up in series.
  bool runsAhead = true;
  // Host time to launch one forward/backward/optimizer kernel (runsAhead), when the profile has
  // no per-op terms (they include the launches).
  Nanos kernelLaunch;
};

// DDP's host costs of one iteration on rank 0: the time charged per term and how many events.
struct DdpHostCosts {
  Nanos allreduceLaunch, gradHook, copyBack, finalizeWait, stepOverhead;
  Nanos bufferSync, bufferCopy;  // the buffer broadcast: its calls, its copies back
  int launches = 0, hooks = 0, copyBacks = 0, waits = 0, steps = 0, broadcasts = 0, buffers = 0;
  Nanos total() const {
    return allreduceLaunch + gradHook + copyBack + finalizeWait + stepOverhead + bufferSync +
           bufferCopy;
  }
};

// The host's own work in one iteration on rank 0, by the phase of the training step it belongs
// to: forward (zero_grad, the loss and the training loop, DDP's forward wrapper, each layer's
// dispatch, find_unused's traversal), backward (each layer's autograd nodes, DDP's hooks,
// allreduce launches, copy-backs and finalize) and optimizer (its step). Work only: waits for the
// stream are not in it. What a synchronized step's host takes to enqueue each phase (the GPU
// kit's host_ms).
struct HostPhaseWork {
  Nanos forward, backward, optimizer;
  Nanos total() const { return forward + backward + optimizer; }
};

struct SimOptions {
  models::ModelInputs inputs;  // zero fields = the model's defaults
  ddp::DdpConfig ddp;          // worldSize is overwritten from the layout
  // Compute dtype for the roofline: fp32, tf32, bf16, fp16; empty = the cluster device's
  // (defaultDtype: bf16 where it has bf16, fp16 on V100, fp32 on CPUs).
  std::string dtype;
  // Simulated iterations. 0 = automatic: defaultIterations(ddp). An explicit value must be
  // ≥ minIterations(ddp) (InvalidArgument otherwise).
  int iterations = 0;
  bool syncBatchNorm = false;  // SyncBatchNorm: a blocking small allreduce per BN layer
  std::optional<double> contentionSlowdown;  // nullopt = the cluster's value (simulate())
  // SM occupancy by NCCL's CTAs (cluster.h ncclSmContention): > 0 = the GPU's SM count; while a
  // collective whose estimate launches k CTAs is in flight, compute slows by
  // max(contention, k / (smCount − k)) instead of the flat contention. 0 = off. simulate() sets
  // it from a cluster with nccl_sm_contention unless contentionSlowdown overrides the cluster's.
  int smContentionSms = 0;
  Strategy strategy = Strategy::kDdp;
  // All-ranks mode: every rank simulated; each rank's compute is scaled by a seeded factor
  // 1 + U(−jitter, +jitter); stragglers (rank, slowdown fraction, e.g. 0.2 = 20 % slower) are
  // slower every iteration; a collective starts when its last rank arrives. Otherwise one rank is
  // simulated (symmetric) and jitter/stragglers must be left empty (InvalidArgument).
  bool allRanks = false;
  double jitterPercent = 0;  // percent: 5 = ±5 %
  uint64_t seed = 1;
  std::vector<std::pair<int, double>> stragglers;
  bool recordTrace = true;  // false: metrics only (sweeps)
  // Also simulate plain training (no DDP: one process, the same host and device) for
  // SimSummary::plainStep, so that ddpOverhead includes DDP's host costs. Only with a host
  // profile's per-op costs (without them the host costs nothing outside DDP). Costs one more short
  // simulation; off in sweeps.
  bool simulatePlain = false;
  // All-ranks mode without a trace, from 1,024 ranks on: threads that replay chunks of the ranks
  // (0 = std::thread::hardware_concurrency()). The result does not depend on it.
  unsigned threads = 0;
  // Optional: called after each simulated iteration with (iterations done, iterations); the CLI
  // shows progress of long all-ranks simulations with it.
  std::function<void(int done, int total)> progress;
  // torch.compile (compile_mode.h): how a compiled model meets DDP; none = eager.
  CompileMode compile = CompileMode::kNone;
  // Host cost of one compiled (sub-)graph, forward call + backward call (compile modes only).
  Nanos compileGraphOverhead = kGraphCallOverhead;
  // nn.DataParallel only: host time to launch one layer's kernels on one replica (Python threads
  // under the GIL serialize these launches across replicas).
  Nanos dataParallelLaunchOverhead = Nanos::fromMicros(5);
  // DDP's host costs; nullopt = the cluster's (simulate(): its ddp_overheads, runsAhead on GPUs,
  // kernelLaunch = device.launch_overhead_us), none in simulateDdp.
  std::optional<HostModel> host;
};

// One iteration as rank 0 saw it (its window [start, start + stepTime) on the timeline).
struct IterationSummary {
  int64_t index = 0;  // 1-based
  Nanos start;
  Nanos stepTime;             // rank 0: iteration end − start
  Nanos maxRankStepTime;      // slowest simulated rank's step time (== stepTime in the fast path)
  Nanos forward;              // first forward kernel start → last forward kernel end
  Nanos backward;             // first backward kernel start → last backward kernel end
  Nanos optimizer;            // optimizer kernel (0 in a no_sync step)
  Nanos comm;                 // |∪ communication| in the window
  Nanos exposedComm;          // comm not overlapped by computation
  Nanos overlapped;           // |∪ computation ∩ ∪ communication|
  Nanos idle;                 // window − |∪ all device spans (computation, copies, comm)|
  double overlapPercent = 0;  // 100 · overlapped / comm (0 without comm), HTA definition
  bool synced = true;         // false for no_sync steps
  bool rebuilt = false;       // the rebuild broadcasts ran at this iteration's forward
  int collectives = 0;        // collectives issued (bucket parts + used map + bcasts + SyncBN)
  // In issue order, "<kind>:<bytes>" with kind one of allreduce, used_map_allreduce, broadcast,
  // syncbn_allreduce (DataParallel: scatter, broadcast, reduce). E.g. "allreduce:59557792".
  std::vector<std::string> collectiveSequence;
  DdpHostCosts ddpHost;    // DDP's host costs charged this iteration (rank 0)
  Nanos hostStall;         // time rank 0's compute stream waited for the host (host-bound)
  HostPhaseWork hostWork;  // rank 0's host work by phase
};

struct SimSummary {
  // Steady state = the last max(K, 1) iterations (K = no_sync period: one accumulation cycle).
  Nanos stepTime;        // mean of maxRankStepTime over the steady iterations
  Nanos firstIteration;  // iteration 1 (maxRankStepTime)
  // Means over the steady iterations of rank 0's IterationSummary fields.
  Nanos forward, backward, optimizer;
  Nanos comm, exposedComm, overlapped, idle;
  double overlapPercent = 0;  // 100 · Σ overlapped / Σ comm over the steady iterations (rank 0)
  int numBuckets = 0;         // steady-state plan (0 for DataParallel)
  std::vector<int64_t> bucketBytes;
  std::vector<IterationSummary> iterations;
  int64_t firstSteadyIteration = 0;  // 1-based index of the first steady iteration
  int steadyIterations = 0;
  int worldSize = 1;
  int simulatedRanks = 1;             // 1 in the fast path, worldSize in all-ranks mode
  std::vector<std::string> warnings;  // the Reducer's warn-once messages (W2)
  Workload workload;                  // what the numbers assume (workload.h)
  // DDP's costs besides the wire time (docs/spec/bucket-costs.md), steady-state means on rank 0.
  DdpOverheads overheads;     // the per-event terms used (µs)
  bool hostRunsAhead = true;  // HostModel::runsAhead
  std::string hostProfile;    // the host profile's name ("" = the cluster's ddp_overheads only)
  bool hostPerOp = false;     // the profile charges per op (HostProfile::perOp)
  DdpHostCosts ddpHost;       // host time per term per step (counts: the last steady iteration)
  // The counts of ddpHost as means over the steady iterations (with no_sync() a synced step's
  // launches, hooks and waits come once per period, the buffer broadcast in the forward after
  // one), so that count × term = time per step.
  struct DdpHostCounts {
    double launches = 0, hooks = 0, copyBacks = 0, waits = 0, steps = 0, broadcasts = 0,
           buffers = 0;
  } ddpHostPerStep;
  // NCCL's CTAs on the device (options.smContentionSms), over the steady iterations' collectives
  // on rank 0: the fewest and most CTAs a call launched and the compute slowdown they imposed
  // (max(flat, k / (SMs − k))); smCount 0 = not modelled (ctas still reported).
  struct CommDevice {
    int smCount = 0;
    int minCtas = 0, maxCtas = 0;
    double flatContention = 0;
    double minContention = 0, maxContention = 0;
  } commDevice;
  Nanos hostStall;         // compute stream waiting for the host per step (host costs exposed)
  HostPhaseWork hostWork;  // host work per step by phase (means over the steady iterations)
  // Plain training without DDP: with options.simulatePlain, the same model on the same host and
  // device without DDP (forward, backward, optimizer: its steady step); otherwise Σ forward +
  // backward kernels + optimizer (nominal, no contention, no host costs). ddpOverhead =
  // stepTime − plainStep (world size 1: DDP's overhead over plain training).
  Nanos plainStep, ddpOverhead;
  bool plainSimulated = false;
};

struct SimResult {
  SimSummary summary;
  traces::Timeline timeline;  // empty when !options.recordTrace
};

// The workload of a simulation (the cluster's name is the caller's to fill: simulate() does);
// options.dtype as resolved.
Workload describeWorkload(const models::ModelSpec& model, const WorldLayout& layout,
                          const SimOptions& options, const ComputeModel& compute);

// The compute slowdown while a collective runs whose NCCL call launches `ctas` CTAs on a GPU of
// `smCount` SMs: max(contention, ctas / (smCount − ctas)) — compute keeps smCount − ctas SMs
// (CTAs are clamped to smCount − 1). smCount ≤ 0 or ctas ≤ 0: `contention`.
double collectiveContention(double contention, int smCount, int ctas);

// Fewest iterations that reach steady state: rebuildIteration + K (K = no_sync period; the
// rebuild iteration is 0 when buckets are never rebuilt).
int minIterations(const ddp::DdpConfig& config);
// The automatic iteration count: max(4, rebuildIteration + 2K).
int defaultIterations(const ddp::DdpConfig& config);

// Simulates DDP with explicit models (tests pass idealised ones). `contentionSlowdown` is c ≥ 0
// (0.15 = compute 15 % slower while a collective is in flight). comm.worldSize() should equal
// layout.worldSize().
StatusOr<SimResult> simulateDdp(const models::ModelSpec& model, const WorldLayout& layout,
                                const SimOptions& options, const ComputeModel& compute,
                                const CommModel& comm, double contentionSlowdown);

// Simulates single-process nn.DataParallel over the layout's one node (InvalidArgument when
// layout.nodes > 1). Per iteration: scatter the inputs (costed as a broadcast of one replica's
// input bytes), replicate the parameters and buffers from device 0 (a blocking broadcast of all
// of them), forward on every replica with kernel launches serialized by the GIL
// (options.dataParallelLaunchOverhead per layer per replica), backward in parallel (autograd's
// device threads hold no GIL), then the reduction of every gradient to device 0 (costed as a
// broadcast of all gradient bytes: NCCL runs reduce and broadcast as the same pipelined chain)
// with no overlap, then the optimizer on device 0. Each replica gets options.inputs.batch
// samples (the same per-GPU work as DDP). The timeline shows device 0 (pid 0).
StatusOr<SimResult> simulateDataParallel(const models::ModelSpec& model, const WorldLayout& layout,
                                         const SimOptions& options, const ComputeModel& compute,
                                         const CommModel& comm);

// Runs the strategy asked for on the cluster's comm model with `compute` (null = the cluster's
// roofline for options.dtype; a MeasuredComputeModel replays a measured run) and the contention
// options.contentionSlowdown, else the cluster's. The timeline's metadata gains "cluster" (and
// "compute": "measured" when `compute` is given).
StatusOr<SimResult> simulate(const models::ModelSpec& model, const ClusterSpec& cluster,
                             const WorldLayout& layout, const SimOptions& options,
                             const ComputeModel* compute = nullptr);

}  // namespace ddpscope::sim
