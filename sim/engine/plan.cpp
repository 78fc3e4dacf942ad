#include "sim/engine/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "base/strings.h"
#include "ddp/bucket_plan.h"
#include "sim/cost/comm_model.h"
#include "sim/engine/accounting.h"

namespace ddpscope::sim {
namespace {

std::string joinInts(const std::vector<int64_t>& values, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += sep;
    out += std::to_string(values[i]);
  }
  return out;
}

}  // namespace

const char* const kStaticGraphNoSteadyEffect =
    "no steady-state gain: with find_unused_parameters=False, torch 2.15 issues the same "
    "collectives on the same buckets with or without it (no DDPSink, no used-map allreduce); it "
    "delays iteration 1's allreduces to the end of its backward and adds one used-map read per "
    "parameter at finalize (a small host cost not simulated). Set it for activation "
    "checkpointing or parameters used twice in one backward, not for speed";

int64_t closingCapMib(int64_t runBytes, int64_t lastBytes) {
  const int64_t mib = runBytes / kPlanMiB;  // the largest limit the run still reaches
  if (mib < 1) return 0;
  return mib * kPlanMiB > runBytes - lastBytes ? mib : 0;  // not reached one gradient earlier
}

int64_t finalCapMib(int64_t runBytes, int64_t lastBytes) {
  return std::max<int64_t>(1, (runBytes - lastBytes) / kPlanMiB + 1);
}

std::vector<int64_t> BucketLayout::capsMib() const {
  std::vector<int64_t> out;
  out.reserve(buckets.size());
  for (const PlannedBucket& b : buckets) out.push_back(b.capMib);
  return out;
}

namespace {

// δ of a bucket whose last gradient is ready at `readyNs` (plan.h): the compute time lost while
// its collective overlaps the backward, counted from the ready time.
int64_t contentionDelayNs(const CollectiveCost& cost, Nanos readyNs, Nanos backwardEndNs) {
  if (cost.contention <= 0) return 0;
  const int64_t overlap = std::min(cost.time.count(), (backwardEndNs - readyNs).count());
  if (overlap <= 0) return 0;
  return std::llround(static_cast<double>(overlap) * cost.contention / (1 + cost.contention));
}

}  // namespace

BucketLayout evaluateLayout(const GradientTimeline& timeline, const AllreduceCost& cost,
                            const std::vector<int>& ends, bool* reachable) {
  BucketLayout out;
  bool ok = !ends.empty() && ends.back() == timeline.size();
  int first = 0;
  Nanos streamFree = Nanos::zero();
  Nanos delay = Nanos::zero();
  for (size_t k = 0; k < ends.size(); ++k) {
    PlannedBucket b;
    b.first = first;
    b.last = ends[k] - 1;
    if (b.last < b.first || b.last >= timeline.size()) {
      ok = false;
      break;
    }
    for (int j = b.first; j <= b.last; ++j) {
      b.bytes += timeline.bytes[j];
      b.wireBytes += timeline.wireBytes[j];
    }
    const int64_t lastBytes = timeline.bytes[b.last];
    const bool final = k + 1 == ends.size();
    b.capMib = final ? finalCapMib(b.bytes, lastBytes) : closingCapMib(b.bytes, lastBytes);
    if (b.capMib == 0) ok = false;
    const CollectiveCost c = cost(b.wireBytes);
    b.readyNs = timeline.readyNs[b.last];
    b.startNs = std::max(b.readyNs + delay, streamFree);
    b.endNs = b.startNs + c.time;
    b.delayNs = Nanos(contentionDelayNs(c, b.readyNs, timeline.backwardEndNs));
    streamFree = b.endNs;
    delay += b.delayNs;
    out.buckets.push_back(b);
    first = ends[k];
  }
  out.commEndNs = streamFree;
  out.computeDelayNs = delay;
  out.objectiveNs = std::max(streamFree, timeline.backwardEndNs + delay);
  if (reachable != nullptr) *reachable = ok;
  return out;
}

namespace {

// One state of the DP's Pareto front for a prefix: the comm stream's free time and the compute
// delay so far, and how it was reached (the previous prefix end and its state's index there).
struct FrontState {
  int64_t endNs = 0;
  int64_t delayNs = 0;
  int fromPrefix = -1;
  int fromState = -1;
};

// Keeps the states no other state beats in both endNs and delayNs, sorted by endNs (delayNs
// then strictly decreasing). Ties keep the first inserted (deterministic).
void pruneToFront(std::vector<FrontState>& states) {
  std::stable_sort(states.begin(), states.end(), [](const FrontState& a, const FrontState& b) {
    return a.endNs != b.endNs ? a.endNs < b.endNs : a.delayNs < b.delayNs;
  });
  size_t kept = 0;
  for (const FrontState& s : states) {
    if (kept > 0 && s.delayNs >= states[kept - 1].delayNs) continue;
    states[kept++] = s;
  }
  states.resize(kept);
}

}  // namespace

StatusOr<BucketLayout> planBucketLayout(const GradientTimeline& timeline,
                                        const AllreduceCost& cost) {
  const int n = timeline.size();
  if (n == 0) return invalidArgument("plan: the model has no gradients to bucket");
  // Prefix sums of bytes and wire bytes: run (i, j] has prefix[j] − prefix[i].
  std::vector<int64_t> bytes(n + 1, 0), wire(n + 1, 0);
  for (int j = 0; j < n; ++j) {
    bytes[j + 1] = bytes[j] + timeline.bytes[j];
    wire[j + 1] = wire[j] + timeline.wireBytes[j];
  }
  // front[j]: the Pareto front of (comm end, compute delay) over reachable partitions of the
  // first j gradients into whole buckets.
  std::vector<std::vector<FrontState>> front(n + 1);
  front[0].push_back({0, 0, -1, -1});
  const int64_t backwardEnd = timeline.backwardEndNs.count();
  for (int j = 1; j <= n; ++j) {
    const Nanos ready = timeline.readyNs[j - 1];
    const int64_t lastBytes = timeline.bytes[j - 1];
    const bool final = j == n;
    std::vector<FrontState>& out = front[j];
    for (int i = j - 1; i >= 0; --i) {
      if (front[i].empty()) continue;
      if (!final && closingCapMib(bytes[j] - bytes[i], lastBytes) == 0) continue;
      const CollectiveCost c = cost(wire[j] - wire[i]);
      const int64_t delta = contentionDelayNs(c, ready, timeline.backwardEndNs);
      for (int s = 0; s < static_cast<int>(front[i].size()); ++s) {
        const FrontState& prev = front[i][s];
        const int64_t start = std::max(ready.count() + prev.delayNs, prev.endNs);
        out.push_back({start + c.time.count(), prev.delayNs + delta, i, s});
      }
    }
    pruneToFront(out);
  }
  if (front[n].empty()) return internalError("plan: no reachable partition (cannot happen)");
  int bestState = 0;
  int64_t bestObjective = std::numeric_limits<int64_t>::max();
  for (int s = 0; s < static_cast<int>(front[n].size()); ++s) {
    const FrontState& st = front[n][s];
    const int64_t objective = std::max(st.endNs, backwardEnd + st.delayNs);
    if (objective < bestObjective) {
      bestObjective = objective;
      bestState = s;
    }
  }
  std::vector<int> ends;
  for (int j = n, s = bestState; j > 0;) {
    ends.push_back(j);
    const FrontState& st = front[j][s];
    j = st.fromPrefix;
    s = st.fromState;
  }
  std::reverse(ends.begin(), ends.end());
  bool reachable = false;
  BucketLayout out = evaluateLayout(timeline, cost, ends, &reachable);
  if (!reachable || out.objectiveNs.count() != bestObjective) {
    return internalError("plan: the DP's layout does not evaluate to its own objective");
  }
  return out;
}

namespace {

// Which layer makes each parameter ready: its earliest-executed owner (model_spec.h).
std::vector<int> readyLayers(const models::ModelSpec& model) {
  std::vector<int> owner(model.params.size(), -1);
  for (int l = static_cast<int>(model.layers.size()) - 1; l >= 0; --l) {
    for (int p : model.layers[l].params) owner[p] = l;
  }
  return owner;
}

Status checkScope(const models::ModelSpec& model, const SimOptions& options) {
  if (options.strategy != Strategy::kDdp) return invalidArgument("plan: needs --strategy ddp");
  if (options.compile != CompileMode::kNone) {
    return invalidArgument("plan: --compile is not supported (plans eager DDP buckets)");
  }
  if (options.ddp.setLastBucketCap) {
    return invalidArgument("plan: set_last_bucket_cap is not supported");
  }
  if (!ddp::rebuildEligible(options.ddp)) {
    return invalidArgument(
        "plan: find_unused_parameters=True without static_graph never rebuilds buckets in "
        "gradient-ready order; plan with --static-graph or without --find-unused");
  }
  if (model.params.empty())
    return invalidArgument("plan: model '" + model.name + "' has no params");
  for (const models::ParamSpec& p : model.params) {
    if (p.sparseGrad) {
      return invalidArgument("plan: parameter '" + p.name +
                             "' has a sparse gradient (its own bucket); not supported");
    }
    if (p.dtype != model.params[0].dtype) {
      return invalidArgument("plan: parameters of several dtypes ('" + model.params[0].name +
                             "' and '" + p.name + "') are bucketed per dtype; not supported");
    }
  }
  return Status::ok();
}

// The last synced iteration the simulation runs (the comm hook's bytes can depend on it).
int64_t steadySyncedIteration(const SimOptions& options) {
  const int iterations =
      options.iterations > 0 ? options.iterations : defaultIterations(options.ddp);
  return std::max<int64_t>(1, iterations / std::max<int64_t>(1, options.ddp.noSyncPeriod));
}

double gainPercent(Nanos base, Nanos value) {
  if (base.count() == 0) return 0;
  return 100.0 * static_cast<double>((base - value).count()) / static_cast<double>(base.count());
}

// The allreduce of each bucket and the backward's end in `iteration` on rank 0 of `timeline`,
// relative to the iteration's first backward kernel.
void plannedTimes(const traces::Timeline& timeline, const IterationSummary& iteration,
                  PlanResult& out) {
  if (timeline.rankCount() == 0) return;
  const Nanos begin = iteration.start, end = iteration.start + iteration.stepTime;
  std::optional<Nanos> backwardStart;
  Nanos backwardEnd;
  for (const traces::Lane& lane : timeline.rank(0).lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.start < begin || span.start >= end) continue;
      if (span.category == traces::Category::kBackward) {
        if (!backwardStart || span.start < *backwardStart) backwardStart = span.start;
        backwardEnd = std::max(backwardEnd, span.end());
      }
    }
  }
  if (!backwardStart) return;
  out.plannedBackwardEndNs = backwardEnd - *backwardStart;
  for (const traces::Lane& lane : timeline.rank(0).lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.start < begin || span.start >= end) continue;
      if (span.category != traces::Category::kAllreduce) continue;
      const std::optional<int64_t> bucket = span.args.getInt(traces::kArgBucket);
      if (!bucket) continue;
      out.plannedAllreduces.push_back(
          {static_cast<int>(*bucket), span.start - *backwardStart, span.end() - *backwardStart});
    }
  }
  std::sort(out.plannedAllreduces.begin(), out.plannedAllreduces.end(),
            [](const SimulatedBucket& a, const SimulatedBucket& b) { return a.bucket < b.bucket; });
}

}  // namespace

StatusOr<GradientTimeline> gradientTimeline(const models::ModelSpec& model,
                                            const SimOptions& options,
                                            const ComputeModel& compute) {
  RETURN_IF_ERROR(checkScope(model, options));
  GradientTimeline t;
  t.order = model.gradReadyOrder(options.ddp.autocast);
  const int64_t synced = steadySyncedIteration(options);
  // With gradient_as_bucket_view and a comm hook the Reducer neither copies nor scales.
  const bool perGradientKernel =
      !(options.ddp.gradientAsBucketView && options.ddp.commHook.present());
  const std::vector<int> owner = readyLayers(model);
  std::vector<Nanos> readyAt(model.params.size(), Nanos::zero());
  std::vector<bool> seen(model.params.size(), false);
  Nanos stream = Nanos::zero();
  auto makeReady = [&](int p) {
    if (perGradientKernel) stream += compute.copyTime(model.params[p].bytes());
    readyAt[p] = stream;
    seen[p] = true;
  };
  if (model.hasLayers()) {
    const std::vector<LayerTimes> times =
        compute.layerTimes(model, internal::effectiveInputs(model, options.inputs));
    for (int l = static_cast<int>(model.layers.size()) - 1; l >= 0; --l) {
      stream += times[l].backward;
      for (int p : model.layerGradReadyOrder(l, options.ddp.autocast)) {
        if (owner[p] == l && !seen[p]) makeReady(p);
      }
    }
  }
  for (int p : t.order) {
    if (!seen[p]) makeReady(p);  // owned by no layer: last, in the model's ready order
  }
  t.backwardEndNs = stream;
  Nanos prev = Nanos::zero();
  for (int p : t.order) {
    const models::ParamSpec& spec = model.params[p];
    ddp::Bucket single;
    single.params = {p};
    single.offsets = {0};
    single.numel = spec.numel();
    single.bytes = spec.bytes();
    single.dtype = spec.dtype;
    const std::vector<int64_t> wire =
        ddp::collectiveBytesForBucket(single, model.params, options.ddp, synced);
    if (wire.size() != 1) {
      return invalidArgument(
          "plan: the comm hook issues several collectives per bucket (PowerSGD); not supported");
    }
    prev = std::max(prev, readyAt[p]);  // the Reducer sees them in this order
    t.bytes.push_back(spec.bytes());
    t.wireBytes.push_back(wire[0]);
    t.readyNs.push_back(prev);
  }
  return t;
}

StatusOr<AllreduceCost> clusterAllreduceCost(const ClusterSpec& cluster, const WorldLayout& layout,
                                             const SimOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CommModel> owned, makeCommModel(cluster, layout));
  const std::shared_ptr<const CommModel> comm = std::move(owned);
  const Nanos launch = Nanos::fromMicrosDouble(cluster.host.ddp.allreduceLaunchUs);
  // The contention simulate() applies (ddp_simulator.h "Contention").
  const double flat = options.contentionSlowdown.value_or(cluster.contentionSlowdown);
  const int smCount = options.smContentionSms > 0 ? options.smContentionSms
                      : cluster.ncclSmContention && !options.contentionSlowdown
                          ? cluster.device.smCount
                          : 0;
  return AllreduceCost([comm, launch, flat, smCount](int64_t wireBytes) {
    const CollectiveEstimate e = comm->estimate(Collective::kAllreduce, wireBytes);
    return CollectiveCost{e.time + launch, collectiveContention(flat, smCount, e.ctas)};
  });
}

StatusOr<PlanObjective> parsePlanObjective(const std::string& text) {
  if (text == "step") return PlanObjective::kStep;
  if (text == "exposed") return PlanObjective::kExposed;
  return invalidArgument("--objective: expected step or exposed, got '" + text + "'");
}

const char* planObjectiveName(PlanObjective objective) {
  return objective == PlanObjective::kStep ? "step" : "exposed";
}

Nanos objectiveValue(const SimSummary& summary, PlanObjective objective) {
  return objective == PlanObjective::kStep ? summary.stepTime : summary.exposedComm;
}

StatusOr<PlanResult> runPlan(const PlanSearch& request) {
  if (request.model == nullptr || request.cluster == nullptr) {
    return invalidArgument("plan: a model and a cluster are required");
  }
  const models::ModelSpec& model = *request.model;
  const ClusterSpec& cluster = *request.cluster;
  RETURN_IF_ERROR(checkScope(model, request.base));
  PlanResult out;

  // 1. The uniform caps and the default (bucket_cap_mb left out).
  SweepGrid sweep;
  sweep.model = &model;
  sweep.cluster = &cluster;
  sweep.compute = request.compute;
  sweep.base = request.base;
  sweep.layouts = {request.layout};
  sweep.capsMb = request.uniformCapsMb;
  sweep.findUnused = {request.base.ddp.findUnusedParameters};
  sweep.threads = request.threads;
  ASSIGN_OR_RETURN(out.uniform, runSweep(sweep));
  out.defaultPoint = out.uniform.best.at(0).baseline;
  out.bestUniformPoint = 0;
  for (size_t i = 0; i < request.uniformCapsMb.size(); ++i) {
    if (objectiveValue(out.uniform.points[i].summary, request.objective) <
        objectiveValue(out.uniform.points[out.bestUniformPoint].summary, request.objective)) {
      out.bestUniformPoint = i;
    }
  }
  const SimSummary& def = out.uniform.points[out.defaultPoint].summary;
  const SweepPoint& uniform = out.uniform.points[out.bestUniformPoint];
  out.uniformGainPercent = gainPercent(objectiveValue(def, request.objective),
                                       objectiveValue(uniform.summary, request.objective));
  out.recommended = sweepPointOptions(request.base, uniform);
  SimSummary recommendedSummary = uniform.summary;

  // 2. The DP's layout (bucket_cap_mb_list exists from torch 2.4; profile 2.15 here).
  out.listSupported = request.base.ddp.profile == ddp::SemanticsProfile::kV2_15;
  if (out.listSupported) {
    SimOptions timed = request.base;
    if (timed.dtype.empty()) timed.dtype = defaultDtype(cluster.device);
    std::unique_ptr<ComputeModel> roofline;
    const ComputeModel* compute = request.compute;
    if (compute == nullptr) {
      ASSIGN_OR_RETURN(roofline,
                       makeRooflineComputeModel(cluster.device, timed.dtype, timed.ddp.autocast));
      compute = roofline.get();
    }
    ASSIGN_OR_RETURN(out.timeline, gradientTimeline(model, timed, *compute));
    ASSIGN_OR_RETURN(const AllreduceCost cost,
                     clusterAllreduceCost(cluster, request.layout, request.base));
    ASSIGN_OR_RETURN(out.layout, planBucketLayout(out.timeline, cost));

    SimOptions planned = request.base;
    planned.ddp.bucketCapMbList = out.layout.capsMib();
    planned.recordTrace = false;
    // Proof of reachability: PyTorch's assignment with the emitted list rebuilds the layout.
    ASSIGN_OR_RETURN(const ddp::BucketPlan plan, ddp::steadyStatePlan(model, planned.ddp));
    bool same = plan.numBuckets() == static_cast<int>(out.layout.buckets.size());
    for (int k = 0; same && k < plan.numBuckets(); ++k) {
      const PlannedBucket& b = out.layout.buckets[k];
      const std::vector<int> want(out.timeline.order.begin() + b.first,
                                  out.timeline.order.begin() + b.last + 1);
      same = plan.buckets[k].params == want;
    }
    if (!same) {
      return internalError("plan: bucket_cap_mb_list=[" + joinInts(planned.ddp.bucketCapMbList) +
                           "] does not rebuild the planned layout: " + plan.toString());
    }
    SimOptions traced = planned;
    traced.recordTrace = true;
    ASSIGN_OR_RETURN(SimResult sim,
                     simulate(model, cluster, request.layout, traced, request.compute));
    out.planned = std::move(sim.summary);
    // The simulator rebuilds from the Reducer's recorded ready order; a model whose recorded
    // order differs from its declared one (conditionally used layers) would get other buckets.
    std::vector<int64_t> plannedBytes;
    for (const PlannedBucket& b : out.layout.buckets) plannedBytes.push_back(b.bytes);
    if (out.planned.bucketBytes != plannedBytes) {
      return invalidArgument(
          "plan: the simulated steady-state buckets differ from the planned layout (the "
          "gradient-ready order DDP records differs from the model's; conditionally used "
          "layers?); not supported");
    }
    plannedTimes(sim.timeline, out.planned.iterations.back(), out);
    const Nanos plannedValue = objectiveValue(out.planned, request.objective);
    out.gainOverDefaultPercent = gainPercent(objectiveValue(def, request.objective), plannedValue);
    out.gainOverUniformPercent =
        gainPercent(objectiveValue(uniform.summary, request.objective), plannedValue);
    if (plannedValue < objectiveValue(uniform.summary, request.objective)) {
      out.recommendList = true;
      out.recommended = planned;
      recommendedSummary = out.planned;
    }
  }

  // 3. Flags that help, each simulated with and without on top of what is recommended so far.
  bool anyUnused = false;
  for (const models::LayerSpec& layer : model.layers) {
    // A pattern with period 1 on every rank runs every iteration: nothing is unused.
    anyUnused |= layer.use.has_value() && (layer.use->period != 1 || !layer.use->ranks.empty());
  }
  struct Candidate {
    const char* kwarg;
    bool applies;
    void (*apply)(ddp::DdpConfig&);
  };
  const ddp::DdpConfig& cfg = request.base.ddp;
  const Candidate candidates[] = {
      {"find_unused_parameters=False", !anyUnused && cfg.findUnusedParameters,
       [](ddp::DdpConfig& c) { c.findUnusedParameters = false; }},
      {"static_graph=True", !anyUnused && !cfg.staticGraph,
       [](ddp::DdpConfig& c) { c.staticGraph = true; }},
      {"gradient_as_bucket_view=True", !cfg.gradientAsBucketView,
       [](ddp::DdpConfig& c) { c.gradientAsBucketView = true; }},
  };
  for (const Candidate& c : candidates) {
    if (!c.applies) continue;
    SimOptions with = out.recommended;
    with.recordTrace = false;
    c.apply(with.ddp);
    ASSIGN_OR_RETURN(SimResult sim,
                     simulate(model, cluster, request.layout, with, request.compute));
    PlanFlag flag;
    flag.kwarg = c.kwarg;
    flag.without = recommendedSummary;
    flag.with = std::move(sim.summary);
    flag.gainPercent = gainPercent(objectiveValue(flag.without, request.objective),
                                   objectiveValue(flag.with, request.objective));
    if (with.ddp.staticGraph && !with.ddp.findUnusedParameters &&
        !out.recommended.ddp.staticGraph) {
      flag.note = kStaticGraphNoSteadyEffect;
    }
    if (flag.included()) {
      out.recommended = with;
      recommendedSummary = flag.with;
    }
    out.flags.push_back(std::move(flag));
  }
  return out;
}

std::string planDdpKwargs(const PlanResult& result) {
  std::string out;
  if (result.recommendList) {
    out = "bucket_cap_mb_list=[" + joinInts(result.layout.capsMib(), ", ") + "]";
  } else {
    const SweepPoint& p = result.uniform.points[result.bestUniformPoint];
    out = "bucket_cap_mb=" + formatShortest(p.capMb);
  }
  for (const PlanFlag& f : result.flags) {
    if (f.included()) out += ", " + f.kwarg;
  }
  return out;
}

}  // namespace ddpscope::sim
