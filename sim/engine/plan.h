// The bucket planner: the best per-bucket layout for a model on a cluster, and the DDP keyword
// arguments that produce exactly that layout. The one implementation behind `ddpscope plan` and
// the plan benchmark.
//
// What PyTorch can express. In steady state (after the rebuild) DDP's buckets are contiguous runs
// of the gradient-ready order (ddp/bucket_plan.h rebuiltPlan): the Reducer appends gradients in
// ready order and closes a bucket once its bytes reach its limit (test after adding). With
// torch 2.15's bucket_cap_mb_list=[m1, m2, ...] (list[int], MiB) bucket k's limit is mk·2^20
// bytes (the cursor sticks at the last entry). So a run of gradients with B bytes whose last
// gradient has b bytes can be a closed (non-final) bucket iff some integer m ≥ 1 has
// B − b < m·2^20 ≤ B, i.e. floor(B / 2^20) ≥ 1 and floor(B / 2^20)·2^20 > B − b; the final run
// is always reachable (its limit only has to exceed B − b). Not every partition qualifies (a run
// under 1 MiB cannot close; a run that already passed a MiB boundary before its last gradient
// cannot either), so the DP below searches only reachable runs — nothing is rounded afterwards —
// and runPlan() checks that ddp::steadyStatePlan with the emitted list rebuilds the planned
// layout.
//
// The DP's objective (exact for the model it optimizes). Inputs: ready[j], the time gradient j
// (in ready order) has been copied into its bucket, from the nominal backward timeline on the
// compute stream (ComputeModel layer backward times, one copyTime(param bytes) kernel per
// gradient, no contention), E = that backward's end; per collective of w wire bytes, its time
// d(w) (the cluster comm model's allreduce estimate, per-collective fixed costs included, plus
// DDP's allreduce launch cost) and the compute slowdown c(w) while it runs (the cluster's
// contention, or NCCL's CTAs holding SMs). The planner's model of one step's backward:
//   - one serialized comm stream: start(k) = max(ready[last(k)] + D(k−1), end(k−1)),
//     end(k) = start(k) + d(k);
//   - contention: compute loses c/(1+c) of the time a collective overlaps it; bucket k is
//     charged as overlapping the backward from its gradients' ready time, δ(k) =
//     c(k)/(1+c(k)) · min(d(k), E − ready[last(k)]), and D(k) = δ(1) + … + δ(k) delays every
//     later gradient (and the backward's end);
//   - the objective is T = max(end(last bucket), E + D(last)): when the last allreduce and the
//     slowed backward are both done.
// δ(k) depends only on the bucket's own gradients, and start/end are nondecreasing in (end(k−1),
// D(k−1)), so a state (end, D) that is no later in both than another has no worse completion: the
// DP keeps, per prefix of the ready order, the Pareto front of (end, D) over reachable partitions
// of that prefix, extends every state by every reachable next bucket, and takes the least T at
// the end. That is exact for the model (the exhaustive test checks it): O(P² · F) cost terms for
// P gradients and fronts of at most F states (F = 1 without contention, where the DP is the
// classic min-end recurrence f(j) = min_i max(ready[j−1], f(i)) + d(i, j)). What the model leaves
// out (the forward, the optimizer, host costs other than the launch, finalize's per-bucket waits,
// contention of a collective delayed past the backward's end) is why the reported numbers come
// from a full simulation of the chosen layout, not from the DP.
//
// Scope: single-dtype models with dense gradients whose buckets are rebuilt (not
// find_unused_parameters without static_graph), comm hooks whose wire bytes add up per gradient
// (none, allreduce, fp16, bf16, mixed precision; not PowerSGD), no set_last_bucket_cap. Other
// requests get InvalidArgument naming what is unsupported.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/sweep.h"

namespace ddpscope::sim {

inline constexpr int64_t kPlanMiB = int64_t{1} << 20;

// The DP's inputs, one entry per gradient in gradient-ready order.
struct GradientTimeline {
  std::vector<int> order;          // parameter indices
  std::vector<int64_t> bytes;      // the gradient's bytes in the bucket
  std::vector<int64_t> wireBytes;  // bytes its share of the collective moves (comm hook)
  std::vector<Nanos> readyNs;      // copied into its bucket, from backward start (nondecreasing)
  Nanos backwardEndNs;             // the last backward kernel and copy end
  int size() const { return static_cast<int>(order.size()); }
};

// A bucket collective in the planner's model: its duration (the comm model's estimate plus DDP's
// launch cost) and the compute slowdown c while it runs (0.15 = 15 % slower).
struct CollectiveCost {
  Nanos time;
  double contention = 0;
};
using AllreduceCost = std::function<CollectiveCost(int64_t wireBytes)>;

// The planner's cost of a bucket collective on `cluster` at `layout` (owns the comm model): the
// comm model's allreduce estimate plus the cluster's allreduce_launch_us, and the contention
// simulate() applies (options.contentionSlowdown, else the cluster's; NCCL's CTAs holding SMs
// where the cluster or options say so).
StatusOr<AllreduceCost> clusterAllreduceCost(const ClusterSpec& cluster, const WorldLayout& layout,
                                             const SimOptions& options);

// The bucket_cap_mb_list entry (MiB) that closes a run of `runBytes` at its last gradient of
// `lastBytes`, or 0 when no integer MiB can (see the header comment).
int64_t closingCapMib(int64_t runBytes, int64_t lastBytes);
// The entry for the final run: the least MiB that does not close it before its last gradient.
int64_t finalCapMib(int64_t runBytes, int64_t lastBytes);

struct PlannedBucket {
  int first = 0, last = 0;  // positions in GradientTimeline order, inclusive
  int64_t bytes = 0, wireBytes = 0;
  int64_t capMib = 0;  // its bucket_cap_mb_list entry
  Nanos readyNs, startNs, endNs;
  Nanos delayNs;  // δ: compute time lost to contention with this collective (planner's model)
};

struct BucketLayout {
  std::vector<PlannedBucket> buckets;  // in reduction order
  Nanos commEndNs;                     // end of the last collective
  Nanos computeDelayNs;                // D: the backward's total delay from contention
  Nanos objectiveNs;                   // T = max(commEndNs, backward end + computeDelayNs)
  std::vector<int64_t> capsMib() const;
};

// Evaluates the DP's objective for explicit run ends (`ends[k]` = one past bucket k's last
// position; the last must be timeline.size()). Marks reachability in `reachable` if given.
BucketLayout evaluateLayout(const GradientTimeline& timeline, const AllreduceCost& cost,
                            const std::vector<int>& ends, bool* reachable = nullptr);

// The exact DP over reachable contiguous partitions (header comment). InvalidArgument on an
// empty timeline.
StatusOr<BucketLayout> planBucketLayout(const GradientTimeline& timeline,
                                        const AllreduceCost& cost);

// The DP's inputs for a model under `options` with `compute` (header comment). Errors for what
// the planner does not cover (Scope).
StatusOr<GradientTimeline> gradientTimeline(const models::ModelSpec& model,
                                            const SimOptions& options, const ComputeModel& compute);

enum class PlanObjective { kStep, kExposed };
// "step" | "exposed".
StatusOr<PlanObjective> parsePlanObjective(const std::string& text);
const char* planObjectiveName(PlanObjective objective);
// The metric a summary is judged by (step time or exposed communication).
Nanos objectiveValue(const SimSummary& summary, PlanObjective objective);

struct PlanSearch {
  const models::ModelSpec* model = nullptr;
  const ClusterSpec* cluster = nullptr;
  const ComputeModel* compute = nullptr;  // null = the cluster's roofline
  SimOptions base;                        // the user's settings; the bucket cap is planned
  WorldLayout layout;
  std::vector<double> uniformCapsMb = {1, 2, 5, 10, 25, 50, 100, 200};  // the sweep's caps
  PlanObjective objective = PlanObjective::kStep;
  unsigned threads = 0;  // the uniform sweep's threads (0 = all cores)
};

// A DDP keyword argument that may help, with the full simulation with and without it.
struct PlanFlag {
  std::string kwarg;  // e.g. "static_graph=True"
  SimSummary without, with;
  double gainPercent = 0;  // 100 · (without − with) / without, by the objective
  // Why the flag cannot change the steady-state step (empty when it can): static_graph=True
  // with find_unused_parameters=False (kStaticGraphNoSteadyEffect).
  std::string note;
  // In the recommended call: it helps by the objective and nothing says it cannot.
  bool included() const { return gainPercent > 0 && note.empty(); }
};

// static_graph=True at steady state when find_unused_parameters=False, from torch 2.15's
// torch/nn/parallel/distributed.py (_pre_forward, _post_forward, _DDPSink) and the Reducer
// (mark_variable_ready, finalize_backward; ddp/reducer.cpp follows them), checked on real torch
// 2.15 by tests/data/torch-2.15/static_graph_ops.py: every iteration after the first calls
// prepare_for_backward([]) either way, wraps no output in DDPSink, issues the same collectives
// of the same sizes (no used-map allreduce: only dynamic find-unused has one) and has the same
// buckets. What static_graph changes is iteration 1 (hooks only count; every allreduce waits
// for the end of the backward), that a parameter may fire its hook several times (reentrant
// checkpointing), and one host read of the used map per parameter in finalize (select + item;
// ~4 µs each under the profiler on the CPU measured): a small cost the simulator does not
// model. So it never gains at steady state; the plan says so instead of offering it.
extern const char* const kStaticGraphNoSteadyEffect;

// One bucket's allreduce in the full simulation of the planned list (rank 0, last steady
// iteration), times from that iteration's first backward kernel.
struct SimulatedBucket {
  int bucket = 0;
  Nanos startNs, endNs;
};

struct PlanResult {
  SweepResult uniform;  // one layout: the uniform caps plus the default (bucket_cap_mb=None)
  size_t defaultPoint = 0, bestUniformPoint = 0;
  double uniformGainPercent = 0;  // best uniform over default, by the objective
  // torch 2.15 only (bucket_cap_mb_list); false with semantics 1.13.
  bool listSupported = false;
  GradientTimeline timeline;
  BucketLayout layout;  // the DP's layout (when listSupported)
  SimSummary planned;   // full simulation of bucket_cap_mb_list = layout.capsMib()
  // Its last steady iteration: each bucket's allreduce and the backward's end, from the
  // backward's start.
  std::vector<SimulatedBucket> plannedAllreduces;
  Nanos plannedBackwardEndNs;
  double gainOverDefaultPercent = 0, gainOverUniformPercent = 0;
  // The recommended call: the list (2.15) when it beats the best uniform cap by the objective,
  // else the best uniform cap; then the helping flags.
  bool recommendList = false;
  std::vector<PlanFlag> flags;
  SimOptions recommended;  // the options the recommendation (with its flags) simulates
};

// Sweeps the uniform caps, runs the DP, simulates its layout (checking that the emitted list
// rebuilds it through ddp::steadyStatePlan: Internal otherwise) and each helping flag.
StatusOr<PlanResult> runPlan(const PlanSearch& request);

// "bucket_cap_mb_list=[1, 25, 30]" or "bucket_cap_mb=25" plus ", static_graph=True" ...
std::string planDdpKwargs(const PlanResult& result);

}  // namespace ddpscope::sim
