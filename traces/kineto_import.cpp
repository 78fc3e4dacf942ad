#include "traces/kineto_import.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/median.h"
#include "traces/chrome_reader.h"
#include "traces/classify.h"
#include "traces/kineto_kinds.h"
#include "traces/kineto_model.h"
#include "traces/overlap.h"
#include "traces/text_match.h"

namespace ddpscope::traces {
namespace {

// distributedInfo.world_size is read from the file: at most this many ranks (ids are ints).
constexpr int64_t kMaxWorldSize = INT32_MAX;
// A "ranks ... missing" error names at most this many.
constexpr int64_t kMaxListedRanks = 16;

// Bytes per element of a Kineto "dtype" ("Float", "BFloat16", ...) or a record_shapes
// "Input type" ("float", "c10::Half", "long int", ...). nullopt when unknown.

bool isIntegerDtype(std::string_view dtype) {
  return dtype == "Int" || dtype == "int" || dtype == "Long" || dtype == "long int" ||
         dtype == "Short" || dtype == "short int" || dtype == "Byte" || dtype == "Char" ||
         dtype == "unsigned char" || dtype == "signed char" || dtype == "Bool" || dtype == "bool" ||
         dtype == "int32" || dtype == "int64";
}

// Elements and dtype a collective span carries in its own args.
struct MessageSize {
  std::optional<int64_t> bytes;  // nullopt: the trace does not say
  std::string dtype;             // empty: not in the trace
};

MessageSize messageSizeFromArgs(const Args& args) {
  MessageSize size;
  if (auto dtype = args.getString("dtype")) size.dtype = std::string(*dtype);
  if (auto nelems = args.getInt("In msg nelems")) {
    size.bytes = *nelems * kinetoDtypeBytes(size.dtype).value_or(4);
    return size;
  }
  auto dims = args.getString("Input Dims");
  if (!dims) return size;
  nlohmann::json parsed = nlohmann::json::parse(*dims, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return size;
  // Input Dims: one entry per input; a tensor is [d0, d1, ...], a TensorList (c10d::allreduce_'s
  // first input in torch 2.x) is [[d0, ...], [d0, ...]], a scalar is [].
  int64_t elements = 0;
  auto tensorElements = [](const nlohmann::json& dims) -> int64_t {
    int64_t n = 1;
    for (const auto& d : dims) n *= d.is_number_integer() ? d.get<int64_t>() : 0;
    return n;
  };
  for (const auto& input : parsed) {
    if (!input.is_array() || input.empty()) continue;  // a scalar
    if (input.front().is_array()) {
      for (const auto& tensor : input) {
        if (tensor.is_array() && !tensor.empty()) elements += tensorElements(tensor);
      }
      break;  // the collective's tensors are its first input; the rest are options
    }
    elements += tensorElements(input);
  }
  if (elements == 0) return size;
  if (size.dtype.empty()) {
    if (auto types = args.getString("Input type")) {
      nlohmann::json t = nlohmann::json::parse(*types, nullptr, false);
      // "TensorList" names no element type (c10d::allreduce_ in torch 2.x): float32 assumed
      if (t.is_array() && !t.empty() && t[0].is_string() && t[0] != "TensorList") {
        size.dtype = t[0].get<std::string>();
      }
    }
  }
  size.bytes = elements * kinetoDtypeBytes(size.dtype).value_or(4);
  return size;
}

Category collectiveCategory(std::string_view name, const Args& args) {
  std::string_view op = name;
  // record_param_comms names its collective in an arg; recent Kineto copies the arg onto the
  // NCCL kernel too.
  if (auto c = args.getString("Collective name")) op = *c;
  std::string lower(op);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::erase(lower, '_');
  if (contains(lower, "allreduce")) return Category::kAllreduce;
  if (contains(lower, "broadcast")) return Category::kBroadcast;
  if (contains(lower, "allgather")) return Category::kAllgather;
  if (contains(lower, "reducescatter")) return Category::kReduceScatter;
  return Category::kCommOther;
}

bool isHostCollectiveName(std::string_view name) {
  return name.starts_with("c10d::") || name.starts_with("gloo:") || name.starts_with("nccl:") ||
         name == "record_param_comms";
}

// Groups of output lanes; a span goes to the first lane of its group where it nests.
enum Group : int { kComputeGroup, kCommGroup, kDdpGroup, kIterGroup, kHostOpsGroup, kGroups };

struct GroupedSpan {
  Group group;
  Span span;
};

struct RankBuild {
  int rank = 0;
  std::string file;
  int64_t unknownBytes = 0;          // collectives left without a message size
  int64_t bytesFromPlan = 0;         // collectives sized from options.plan
  int64_t disagreeingPlan = 0;       // bucket allreduces whose traced size differs from the plan
  int64_t untiedGenericKernels = 0;  // generic communication kernels no launch explained
  std::string untiedGenericName;     // the first one's name, up to its parameter list
  std::vector<GroupedSpan> spans;
  std::map<int64_t, Nanos> iterationStart;  // ProfilerStep index → start
};

struct IterationWindow {
  int64_t index;
  Nanos start;
  Nanos end;
};

const IterationWindow* windowOf(const std::vector<IterationWindow>& windows, Nanos t) {
  for (const auto& w : windows) {
    if (t >= w.start && t < w.end) return &w;
  }
  return nullptr;
}

struct Candidate {
  const Span* span;
  bool gpu;
};

// What one rank's host lanes say about its steps.
struct RankSteps {
  std::vector<IterationWindow> windows;                 // ProfilerStep#N, by start
  std::vector<std::pair<Nanos, Nanos>> forwardWindows;  // DistributedDataParallel.forward ranges
  bool hasGpu = false;                                  // a GPU lane has spans
  bool hostOpsPresent = false;                          // a host lane has spans
};

// The rank's iterations (the first range of each ProfilerStep index, also recorded in
// out.iterationStart), DDP's forward ranges and which kinds of lanes have spans.
RankSteps scanRankSteps(const RankTrack& track, RankBuild& out) {
  RankSteps steps;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) {
      steps.hasGpu = steps.hasGpu || !lane.spans.empty();
      continue;
    }
    steps.hostOpsPresent = steps.hostOpsPresent || !lane.spans.empty();
    for (const Span& s : lane.spans) {
      if (auto n = parseProfilerStep(s.name)) {
        if (out.iterationStart.count(*n) == 0) {
          steps.windows.push_back({*n, s.start, s.end()});
          out.iterationStart[*n] = s.start;
        }
      } else if (s.name.starts_with("DistributedDataParallel.forward")) {
        steps.forwardWindows.emplace_back(s.start, s.end());
      }
    }
  }
  std::sort(steps.windows.begin(), steps.windows.end(),
            [](const IterationWindow& a, const IterationWindow& b) { return a.start < b.start; });
  return steps;
}

// The refusal of a trace without ProfilerStep#N ranges, saying how to profile; ok otherwise.
Status checkRankHasSteps(const std::string& path, const RankSteps& steps) {
  if (steps.windows.empty() && steps.hasGpu && !steps.hostOpsPresent) {
    return invalidArgument(path +
                           ": GPU activity only, no CPU ops: profile with "
                           "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (the CPU "
                           "side holds the steps, the launches and DDP's work)");
  }
  if (steps.windows.empty()) {
    return invalidArgument(path +
                           ": no ProfilerStep#N ranges: profile with torch.profiler.profile("
                           "schedule=...) and call prof.step() after every iteration");
  }
  return Status::ok();
}

// Whether t lies inside one of DDP's forward ranges.
bool inForwardWindow(const std::vector<std::pair<Nanos, Nanos>>& forwardWindows, Nanos t) {
  for (const auto& [s, e] : forwardWindows) {
    if (t >= s && t < e) return true;
  }
  return false;
}

// The collective host op (record_param_comms preferred, else the c10d / nccl: op) around each
// runtime launch, by the launch's correlation id: it names the collective of a communication
// kernel whose own name does not say (RCCL).
std::map<int64_t, const Span*> collectiveOfLaunches(const RankTrack& track) {
  std::map<int64_t, const Span*> collectiveOfLaunch;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    std::vector<const Span*> open;  // collective host ops containing the current span
    for (const Span& s : lane.spans) {
      while (!open.empty() && open.back()->end() <= s.start) open.pop_back();
      if (isHostCollectiveName(s.name)) {
        open.push_back(&s);
      } else if (!open.empty() && classifyRuntimeCall(s.name) == RuntimeCall::kLaunch) {
        if (auto correlation = s.args.getInt("correlation")) {
          const Span* best = open.back();
          for (const Span* o : open) {
            if (o->name == "record_param_comms") best = o;
          }
          collectiveOfLaunch[*correlation] = best;
        }
      }
    }
  }
  return collectiveOfLaunch;
}

// The rank's collective spans by class (the import keeps one class), and the c10d ops its host
// lanes ran.
struct CollectiveCandidates {
  std::vector<Candidate> gpuComm, gloo, paramComms, c10d;
  std::vector<const Span*> hostLaunches;  // c10d:: ops
};

// A GPU lane: its communication kernels become candidates, its compute kernels go to `out`;
// GPU-side copies of annotations are left out.
void takeGpuLaneSpans(const Lane& lane, CollectiveCandidates& candidates, RankBuild& out) {
  for (const Span& s : lane.spans) {
    if (s.args.getString("cat") == std::optional<std::string_view>("gpu_user_annotation") ||
        parseProfilerStep(s.name)) {
      continue;  // GPU-side copies of annotations (ProfilerStep#N, ranges)
    }
    if (isCommunication(s.category)) {
      candidates.gpuComm.push_back({&s, true});
    } else if (isComputation(s.category)) {
      out.spans.push_back(
          {kComputeGroup, Span{s.name, Category::kCompute, s.start, s.duration, {}}});
    }
  }
}

// A host lane: its collective ops become candidates; its top-level ops (backward nodes,
// optimizer steps, DDP's copies, forward and other cpu ops) go to `out`, the compute ones in the
// `hostOps` group; containers and annotations are descended into.
void takeHostLaneSpans(const Lane& lane, Group hostOps,
                       const std::vector<std::pair<Nanos, Nanos>>& forwardWindows,
                       CollectiveCandidates& candidates, RankBuild& out) {
  Nanos takenEnd = Nanos(INT64_MIN);
  for (const Span& s : lane.spans) {
    const std::string_view name = s.name;
    if (name.starts_with("gloo:")) candidates.gloo.push_back({&s, false});
    if (name == "record_param_comms") candidates.paramComms.push_back({&s, false});
    if (name.starts_with("c10d::") || name.starts_with("nccl:")) {
      candidates.c10d.push_back({&s, false});
    }
    if (s.start < takenEnd) continue;  // inside an op already taken
    if (s.category == Category::kIteration || name.starts_with("DistributedDataParallel.")) {
      continue;  // containers: descend
    }
    const std::string_view cat = s.args.getString("cat").value_or("");
    if (name.starts_with(kAutogradNodePrefix)) {
      out.spans.push_back({hostOps, Span{std::string(name.substr(kAutogradNodePrefix.size())),
                                         Category::kBackward,
                                         s.start,
                                         s.duration,
                                         {}}});
    } else if (name.starts_with("Optimizer.")) {
      out.spans.push_back({hostOps, Span{s.name, Category::kOptimizer, s.start, s.duration, {}}});
    } else if (contains(name, "copy_bucket_to_grad")) {
      out.spans.push_back({kDdpGroup, Span{s.name, Category::kCopy, s.start, s.duration, {}}});
    } else if (isHostCollectiveName(name)) {
      if (name.starts_with("c10d::")) candidates.hostLaunches.push_back(&s);
    } else if (cat == "cpu_op") {
      out.spans.push_back(
          {hostOps,
           Span{s.name,
                inForwardWindow(forwardWindows, s.start) ? Category::kForward : Category::kCompute,
                s.start,
                s.duration,
                {}}});
    } else {
      continue;  // annotations, runtime calls: descend
    }
    takenEnd = s.end();
  }
}

// Top-level host ops and GPU kernels into `out`, lane by lane; returns the collective
// candidates by class.
CollectiveCandidates takeRankSpans(const RankTrack& track, Group hostOps,
                                   const std::vector<std::pair<Nanos, Nanos>>& forwardWindows,
                                   RankBuild& out) {
  CollectiveCandidates candidates;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) {
      takeGpuLaneSpans(lane, candidates, out);
    } else {
      takeHostLaneSpans(lane, hostOps, forwardWindows, candidates, out);
    }
  }
  return candidates;
}

// Without a DistributedDataParallel.forward range in an iteration (a model not wrapped in
// DDP, or a profile that missed it), its forward is the compute before its first backward op.
void markForwardWithoutDdpRange(const RankSteps& steps, Group hostOps, RankBuild& out) {
  for (const auto& w : steps.windows) {
    const bool hasDdpForward =
        std::any_of(steps.forwardWindows.begin(), steps.forwardWindows.end(),
                    [&](const auto& f) { return f.first >= w.start && f.first < w.end; });
    if (hasDdpForward) continue;
    Nanos firstBackward = w.end;
    for (const auto& g : out.spans) {
      if (g.span.category == Category::kBackward && g.span.start >= w.start &&
          g.span.start < w.end) {
        firstBackward = minNanos(firstBackward, g.span.start);
      }
    }
    for (auto& g : out.spans) {
      if (g.group == hostOps && g.span.category == Category::kCompute && g.span.start >= w.start &&
          g.span.start < firstBackward) {
        g.span.category = Category::kForward;
      }
    }
  }
}

// The class of collectives the import keeps: the most faithful one present.
std::vector<Candidate>* chooseCollectives(CollectiveCandidates& candidates) {
  return !candidates.gpuComm.empty()      ? &candidates.gpuComm
         : !candidates.gloo.empty()       ? &candidates.gloo
         : !candidates.paramComms.empty() ? &candidates.paramComms
                                          : &candidates.c10d;
}

// record_param_comms sizes per iteration, in order: the fallback for spans without sizes.
std::map<int64_t, std::vector<MessageSize>> paramCommSizesByIteration(
    const std::vector<Candidate>& paramComms, const std::vector<IterationWindow>& windows) {
  std::map<int64_t, std::vector<MessageSize>> paramCommSizes;
  for (const auto& c : paramComms) {
    if (const IterationWindow* w = windowOf(windows, c.span->start)) {
      paramCommSizes[w->index].push_back(messageSizeFromArgs(c.span->args));
    }
  }
  return paramCommSizes;
}

// What a collective span ran and how many bytes it carried, as far as the trace says.
struct CollectiveIdentity {
  Category category;
  MessageSize size;
};

// A candidate's collective and size from its own name and args, else from the host op that
// launched it; a generic kernel no launch explains counts in out.untiedGenericKernels.
CollectiveIdentity identifyCollective(const Candidate& c,
                                      const std::map<int64_t, const Span*>& collectiveOfLaunch,
                                      RankBuild& out) {
  const Span& s = *c.span;
  Category category =
      c.gpu ? (s.category == Category::kCommOther ? collectiveCategory(s.name, s.args) : s.category)
            : collectiveCategory(s.name, s.args);
  MessageSize size = messageSizeFromArgs(s.args);
  if (c.gpu && (category == Category::kCommOther || !size.bytes)) {
    // A kernel named without its collective (RCCL's ncclDevKernel_Generic) or without sizes:
    // the host op that launched it says.
    const std::optional<int64_t> correlation = s.args.getInt("correlation");
    auto it = correlation ? collectiveOfLaunch.find(*correlation) : collectiveOfLaunch.end();
    if (it != collectiveOfLaunch.end()) {
      if (category == Category::kCommOther) {
        category = collectiveCategory(it->second->name, it->second->args);
      }
      if (!size.bytes) size = messageSizeFromArgs(it->second->args);
    } else if (category == Category::kCommOther && isGenericCommKernel(s.name)) {
      if (out.untiedGenericKernels++ == 0) {
        out.untiedGenericName = s.name.substr(0, s.name.find('('));
      }
    }
  }
  return {category, size};
}

// The chosen collectives (sorted by start) as comm-lane spans: named by their collective,
// bucket allreduces numbered per iteration, used-map allreduces (integer dtype) told apart,
// sizes from record_param_comms where the span has none (unless those are the spans).
void addCollectiveSpans(const std::vector<Candidate>& chosen, bool chosenAreParamComms,
                        const std::map<int64_t, std::vector<MessageSize>>& paramCommSizes,
                        const std::vector<IterationWindow>& windows,
                        const std::map<int64_t, const Span*>& collectiveOfLaunch, RankBuild& out,
                        KinetoImportReport& report) {
  std::map<int64_t, int> ordinal;  // collectives seen per iteration
  std::map<int64_t, int> buckets;  // bucket allreduces seen per iteration
  for (const auto& c : chosen) {
    const Span& s = *c.span;
    const IterationWindow* w = windowOf(windows, s.start);
    auto [category, size] = identifyCollective(c, collectiveOfLaunch, out);
    if (w != nullptr) {
      const int k = ordinal[w->index]++;
      auto it = paramCommSizes.find(w->index);
      if (!size.bytes && !chosenAreParamComms && it != paramCommSizes.end() &&
          k < static_cast<int>(it->second.size())) {
        size = it->second[static_cast<size_t>(k)];
      }
    }
    if (size.bytes && size.dtype.empty()) ++report.collectivesWithAssumedDtype;
    Args args;
    std::string name = collectiveVerb(category);
    if (category == Category::kAllreduce && isIntegerDtype(size.dtype)) {
      category = Category::kUsedMapAllreduce;
      name = "used-map allreduce";
    } else if (category == Category::kAllreduce && w != nullptr) {
      const int bucket = buckets[w->index]++;
      args.append(std::string(kArgBucket), int64_t{bucket});
      name += " bucket " + std::to_string(bucket);
    }
    // Unknown sizes get no bytes arg (never 0): consumers treat the size as unknown.
    if (size.bytes) args.append(std::string(kArgBytes), *size.bytes);
    if (w != nullptr) args.append(std::string(kArgIteration), w->index);
    args.append("op", s.name);
    out.spans.push_back(
        {kCommGroup, Span{std::move(name), category, s.start, s.duration, std::move(args)}});
  }
}

// The comm lane's bucket allreduces and broadcasts, per iteration, in order.
struct PlannedCommSpans {
  std::map<int64_t, std::vector<Span*>> buckets;     // iteration → bucket allreduces
  std::map<int64_t, std::vector<Span*>> broadcasts;  // iteration → broadcasts
};

// Returns pointers into out.spans, valid while no span is added.
PlannedCommSpans commSpansByIteration(RankBuild& out) {
  PlannedCommSpans spans;
  for (auto& g : out.spans) {
    if (g.group != kCommGroup) continue;
    auto iteration = g.span.args.getInt(kArgIteration);
    if (!iteration) continue;
    if (g.span.args.getInt(kArgBucket)) spans.buckets[*iteration].push_back(&g.span);
    if (g.span.category == Category::kBroadcast) spans.broadcasts[*iteration].push_back(&g.span);
  }
  return spans;
}

// Gives `span` the planned size unless the trace sized it (then counts a disagreement when the
// sizes differ).
void fillPlannedBytes(Span& span, int64_t bytes, const char* source, RankBuild& out) {
  if (auto traced = span.args.getInt(kArgBytes)) {
    if (*traced != bytes) ++out.disagreeingPlan;
    return;
  }
  span.args.set(std::string(kArgBytes), bytes);
  span.args.set("bytes_source", std::string(source));
  ++out.bytesFromPlan;
}

// The rebuild's forward: the first iteration with the rebuild's two broadcasts on top of the
// buffer groups; INT64_MIN when none (profiling started after it).
int64_t findRebuildIteration(const PlannedSizes& plan,
                             const std::map<int64_t, std::vector<Span*>>& broadcastSpans) {
  if (plan.rebuildBroadcastBytes.empty()) return INT64_MIN;
  const size_t buffers = plan.bufferBroadcastBytes.size();
  for (const auto& [iteration, spans] : broadcastSpans) {
    if (spans.size() == buffers + plan.rebuildBroadcastBytes.size()) return iteration;
  }
  return INT64_MIN;
}

// The broadcasts of a forward are the rebuild's two (once) and then the buffer groups; an
// iteration with another count is left as traced (or unknown).
void sizeBroadcastsFromPlan(const PlannedSizes& plan,
                            const std::map<int64_t, std::vector<Span*>>& broadcastSpans,
                            int64_t rebuildIteration, RankBuild& out) {
  if (plan.bucketBytes.empty()) return;
  for (const auto& [iteration, spans] : broadcastSpans) {
    std::vector<int64_t> expected;
    if (iteration == rebuildIteration) expected = plan.rebuildBroadcastBytes;
    expected.insert(expected.end(), plan.bufferBroadcastBytes.begin(),
                    plan.bufferBroadcastBytes.end());
    if (spans.size() != expected.size()) continue;  // left as traced (or unknown)
    for (size_t k = 0; k < spans.size(); ++k)
      fillPlannedBytes(*spans[k], expected[k], "model", out);
  }
}

// Per iteration, the k-th bucket allreduce is the plan's bucket k (DDP launches buckets strictly
// in index order); the iterations before the rebuild use the construction plan. An iteration
// with unsized allreduces whose count differs from the plan's is an error naming the fix.
Status sizeBucketsFromPlan(const std::string& path, const PlannedSizes& plan,
                           const std::map<int64_t, std::vector<Span*>>& bucketSpans,
                           int64_t rebuildIteration, RankBuild& out) {
  for (const auto& [iteration, spans] : bucketSpans) {
    const bool anyUnknown = std::any_of(spans.begin(), spans.end(),
                                        [](const Span* s) { return !s->args.contains(kArgBytes); });
    if (plan.bucketBytes.empty()) continue;
    const bool beforeRebuild = rebuildIteration != INT64_MIN && iteration < rebuildIteration;
    const std::vector<int64_t>& buckets = beforeRebuild && !plan.initialBucketBytes.empty()
                                              ? plan.initialBucketBytes
                                              : plan.bucketBytes;
    if (spans.size() != buckets.size()) {
      if (!anyUnknown) continue;  // the trace's own sizes stand; the plan is not needed
      return invalidArgument(
          path + ": rank " + std::to_string(out.rank) + " iteration " + std::to_string(iteration) +
          ": " + std::to_string(spans.size()) + " bucket allreduce(s) in the trace but the " +
          (beforeRebuild ? "construction" : "bucket") + " plan of " + plan.origin + " has " +
          std::to_string(buckets.size()) +
          " bucket(s): give the model and the DDP settings the job ran with "
          "(--bucket-cap-mb, --find-unused, ...), or profile with record_shapes=True");
    }
    for (size_t k = 0; k < spans.size(); ++k) {
      fillPlannedBytes(*spans[k], buckets[k], "bucket plan", out);
    }
  }
  return Status::ok();
}

// Sizes from the bucket plan for the collectives the trace left unsized (broadcasts, then
// bucket allreduces), then counts those still unknown.
Status sizeCollectivesFromPlan(const std::string& path, const PlannedSizes& plan, RankBuild& out) {
  const PlannedCommSpans spans = commSpansByIteration(out);
  const int64_t rebuildIteration = findRebuildIteration(plan, spans.broadcasts);
  sizeBroadcastsFromPlan(plan, spans.broadcasts, rebuildIteration, out);
  RETURN_IF_ERROR(sizeBucketsFromPlan(path, plan, spans.buckets, rebuildIteration, out));
  for (const auto& g : out.spans) {
    if (g.group == kCommGroup && !g.span.args.contains(kArgBytes)) ++out.unknownBytes;
  }
  return Status::ok();
}

// DDP's forward ranges, each iteration's backward (its first to its last backward op) and the
// iterations themselves as spans.
void addDdpPhaseSpans(const RankSteps& steps, RankBuild& out) {
  for (const auto& [s, e] : steps.forwardWindows) {
    out.spans.push_back({kDdpGroup, Span{"forward", Category::kForward, s, e - s, {}}});
  }
  for (const auto& w : steps.windows) {
    Nanos first = Nanos::max(), last = Nanos(INT64_MIN);
    for (const auto& g : out.spans) {
      if (g.span.category != Category::kBackward || g.group == kDdpGroup) continue;
      if (g.span.start < w.start || g.span.start >= w.end) continue;
      first = minNanos(first, g.span.start);
      last = maxNanos(last, g.span.end());
    }
    if (first < last) {
      out.spans.push_back({kDdpGroup, Span{"backward", Category::kBackward, first, last - first,
                                           Args{{std::string(kArgIteration), w.index}}}});
    }
    out.spans.push_back(
        {kIterGroup, Span{"ProfilerStep#" + std::to_string(w.index), Category::kIteration, w.start,
                          w.end - w.start, Args{{std::string(kArgIteration), w.index}}}});
  }
}

// One rank's trace into `out`: its host ops and kernels, its collectives (named, numbered and
// sized), DDP's phases and the iterations, in output groups.
Status importOneRank(const std::string& path, const Timeline& source, RankBuild& out,
                     const KinetoImportOptions& options, KinetoImportReport& report) {
  const RankTrack& track = source.rank(0);
  out.rank = track.rank;
  out.file = path;

  // 1. Iterations, DDP forward windows, GPU presence.
  const RankSteps steps = scanRankSteps(track, out);
  RETURN_IF_ERROR(checkRankHasSteps(path, steps));

  // 2. Top-level host ops, per thread; collective candidates by class; the collective host op
  // around each runtime launch.
  const std::map<int64_t, const Span*> collectiveOfLaunch = collectiveOfLaunches(track);
  const Group hostOps = steps.hasGpu ? kHostOpsGroup : kComputeGroup;
  CollectiveCandidates candidates = takeRankSpans(track, hostOps, steps.forwardWindows, out);
  markForwardWithoutDdpRange(steps, hostOps, out);

  // 3. Collectives: the most faithful class present; sizes the trace lacks from the bucket plan.
  std::vector<Candidate>* chosen = chooseCollectives(candidates);
  auto byStart = [](const Candidate& a, const Candidate& b) {
    return spanPrecedes(*a.span, *b.span);
  };
  std::stable_sort(chosen->begin(), chosen->end(), byStart);
  std::stable_sort(candidates.paramComms.begin(), candidates.paramComms.end(), byStart);
  addCollectiveSpans(*chosen, chosen == &candidates.paramComms,
                     paramCommSizesByIteration(candidates.paramComms, steps.windows), steps.windows,
                     collectiveOfLaunch, out, report);
  RETURN_IF_ERROR(sizeCollectivesFromPlan(path, options.plan, out));
  if (chosen != &candidates.c10d) {
    for (const Span* s : candidates.hostLaunches) {
      out.spans.push_back({kDdpGroup, Span{s->name, Category::kOther, s->start, s->duration, {}}});
    }
  }

  // 4. DDP windows and iterations.
  addDdpPhaseSpans(steps, out);
  return Status::ok();
}

// ---- layer mapping (KinetoImportOptions::layers) ----

// The profiled steps (ProfilerStep#N windows) of a rank's build, in the order they were added.
std::vector<IterationWindow> iterationWindows(const RankBuild& build) {
  std::vector<IterationWindow> windows;
  for (const auto& g : build.spans) {
    if (g.group == kIterGroup) {
      windows.push_back(
          {g.span.args.getInt(kArgIteration).value_or(0), g.span.start, g.span.end()});
    }
  }
  return windows;
}

// Layer name → its index in `layers`.
std::map<std::string, int, std::less<>> layerIndexOf(const std::vector<ImportLayer>& layers) {
  std::map<std::string, int, std::less<>> index;
  for (size_t i = 0; i < layers.size(); ++i) index.emplace(layers[i].name, static_cast<int>(i));
  return index;
}

// A host op matched to a layer: a forward op, a backward node, or (tail) a backward node of no
// layer kind that belongs to the layer matched before it (AccumulateGrad, TBackward0).
struct LayerOp {
  const GroupedSpan* op;
  size_t layer;
  bool backward;
  bool tail;
};

// Matches the top-level host ops of `group` (compute on CPU traces, the cpu ops lane on GPU
// traces) to the layers, per iteration: forward ops in order against the layers in order by kind,
// backward nodes against the layers in reverse order. Forward ops of no layer go to
// `functional` (+, views, allocations). Sorts build.spans.
Status matchLayerOps(const std::vector<ImportLayer>& layers, RankBuild& build, Group group,
                     std::vector<LayerOp>& matched, std::vector<const GroupedSpan*>& functional) {
  std::stable_sort(
      build.spans.begin(), build.spans.end(),
      [](const GroupedSpan& x, const GroupedSpan& y) { return spanPrecedes(x.span, y.span); });
  const std::vector<IterationWindow> windows = iterationWindows(build);
  // What lets a user out of a match by kind that stops at an op it has no rule for.
  constexpr std::string_view kRangesInstead =
      "a trace recorded inside `with ddpscope.torch.layer_ranges(model):` has its layers named by "
      "their ranges, with no match by op kind";
  auto fail = [&](int64_t iteration, const char* phase, size_t layer) {
    return invalidArgument(build.file + ": rank " + std::to_string(build.rank) + " iteration " +
                           std::to_string(iteration) + ": no " + phase + " op matches layer '" +
                           layers[layer].name + "' (" + layers[layer].type +
                           "): the trace is not of this model, of a layer order it does not "
                           "list, or its op for that layer is of a kind this match has no rule "
                           "for (" +
                           std::string(kRangesInstead) + ")");
  };
  auto extra = [&](int64_t iteration, const char* what, const std::string& name) {
    return invalidArgument(build.file + ": rank " + std::to_string(build.rank) + " iteration " +
                           std::to_string(iteration) + ": " + what + " '" + name +
                           "' matches no layer: all " + std::to_string(layers.size()) +
                           " layers of the model are already matched (the trace is not of this "
                           "model; " +
                           std::string(kRangesInstead) + ")");
  };
  for (const auto& w : windows) {
    std::vector<const GroupedSpan*> forward, backward;
    for (const auto& g : build.spans) {
      if (g.group != group || g.span.start < w.start || g.span.start >= w.end) continue;
      if (g.span.category == Category::kForward) forward.push_back(&g);
      if (g.span.category == Category::kBackward) backward.push_back(&g);
    }
    // Forward: ops in order against layers in order.
    size_t next = 0;
    for (const GroupedSpan* g : forward) {
      const std::string_view kind = forwardOpKind(g->span.name);
      while (!kind.empty() && next < layers.size() && layerKind(layers[next].type).empty()) {
        ++next;  // a layer kind without a known op: nothing in the trace to match
      }
      if (!kind.empty() && next < layers.size() && layerKind(layers[next].type) == kind) {
        matched.push_back({g, next, false, false});
        ++next;
      } else if (!kind.empty() && kind != "Add" && next >= layers.size()) {
        return extra(w.index, "forward op", g->span.name);
      } else {
        functional.push_back(g);
      }
    }
    while (next < layers.size() && layerKind(layers[next].type).empty()) ++next;
    if (next < layers.size()) return fail(w.index, "forward", next);
    // Backward: nodes in order against layers in reverse order. Two nodes stand for a layer
    // only where one of its kind is due (the next layer with a kind): MulBackward0 for a
    // Dropout (on the CPU a dropout is the input times a Bernoulli mask; a GPU records
    // NativeDropoutBackward0) and MmBackward0 for a Linear (a Linear without bias on 3-D
    // inputs runs aten::matmul -> aten::mm: a language model's head, every projection of a
    // Llama). Elsewhere they are ops of the layer before (an activation's product, a loss's
    // matmul with a tied embedding). A dropout of p = 0 returns its input and records no
    // node, so a node of another kind passes a due Dropout layer by.
    auto dueKind = [&](size_t d) { return layerKind(layers[layers.size() - 1 - d].type); };
    auto nextWithKind = [&](size_t d) {
      while (d < layers.size() && dueKind(d).empty()) ++d;
      return d;
    };
    size_t done = 0;                // layers matched, counted from the last
    std::optional<size_t> current;  // the layer of the last matched node
    for (const GroupedSpan* g : backward) {
      std::string_view kind = backwardNodeKind(g->span.name);
      if (const size_t d = nextWithKind(done); kind.empty() && d < layers.size()) {
        const std::string_view due = dueKind(d);
        if ((g->span.name == "MulBackward0" && due == "Dropout") ||
            (g->span.name == "MmBackward0" && due == "Linear")) {
          kind = due;
        }
      }
      while (!kind.empty() && done < layers.size() &&
             (dueKind(done).empty() || (dueKind(done) == "Dropout" && kind != "Dropout"))) {
        ++done;
      }
      if (!kind.empty() && done < layers.size() &&
          layerKind(layers[layers.size() - 1 - done].type) == kind) {
        current = layers.size() - 1 - done;
        matched.push_back({g, *current, true, false});
        ++done;
      } else if (!kind.empty() && kind != "Add" && done >= layers.size()) {
        return extra(w.index, "backward node", g->span.name);
      } else if (current) {
        matched.push_back({g, *current, true, true});  // same layer's tail
      }
      // else: the loss's backward, before the first layer: left out
    }
    while (done < layers.size() && (dueKind(done).empty() || dueKind(done) == "Dropout")) ++done;
    if (done < layers.size()) return fail(w.index, "backward", layers.size() - 1 - done);
  }
  return Status::ok();
}

// CPU traces: the matched ops become the layers' compute spans.
Status mapLayers(const std::vector<ImportLayer>& layers, RankBuild& build) {
  std::vector<LayerOp> matched;
  std::vector<const GroupedSpan*> functional;
  RETURN_IF_ERROR(matchLayerOps(layers, build, kComputeGroup, matched, functional));
  std::vector<GroupedSpan> out;
  std::optional<size_t> current;  // index into `out` of the open backward span
  for (const LayerOp& m : matched) {
    const Span& op = m.op->span;
    if (m.tail) {
      if (current) {
        Span& s = out[*current].span;
        s.duration = maxNanos(s.end(), op.end()) - s.start;
      }
      continue;
    }
    const std::string& name = layers[m.layer].name;
    if (m.backward) {
      out.push_back(
          {kComputeGroup, Span{name + " (backward)", Category::kBackward, op.start, op.duration,
                               Args{{"layer", static_cast<int64_t>(m.layer)}}}});
      current = out.size() - 1;
    } else {
      out.push_back(
          {kComputeGroup, Span{name, Category::kForward, op.start, op.duration,
                               Args{{"layer", static_cast<int64_t>(m.layer)}, {"op", op.name}}}});
    }
  }
  for (const GroupedSpan* g : functional) out.push_back({kHostOpsGroup, g->span});
  // Everything else (outside the mapped categories or iterations) is kept as it was.
  const std::vector<IterationWindow> windows = iterationWindows(build);
  for (auto& g : build.spans) {
    const bool inWindow = std::any_of(windows.begin(), windows.end(), [&](const auto& w) {
      return g.span.start >= w.start && g.span.start < w.end;
    });
    const bool mapped =
        g.group == kComputeGroup && inWindow &&
        (g.span.category == Category::kForward || g.span.category == Category::kBackward);
    if (!mapped) out.push_back(std::move(g));
  }
  build.spans = std::move(out);
  return Status::ok();
}

// What a walk of a rank's host lanes under its ddpscope.layer: ranges ties together: each
// forward op's sequence number to the layer whose range (or, with opLayers, own op) it ran in,
// and each autograd node to the sequence number of the first op inside it (its forward op's).
struct LayerRangeWalk {
  std::map<int64_t, int> layerOfSequence;
  std::map<const Span*, int64_t> sequenceOfNode;
  // The layer of a backward node's sequence number; -1 when it names none.
  int layerOfNode(const Span* node) const {
    auto sequence = sequenceOfNode.find(node);
    if (sequence == sequenceOfNode.end()) return -1;
    auto owner = layerOfSequence.find(sequence->second);
    return owner == layerOfSequence.end() ? -1 : owner->second;
  }
};

// Walks the host lanes of `track` keeping the ranges open at each span: a "ddpscope.layer:<path>"
// range names layer layerIndex[path] (a module called again in an iteration: "<path>:2", ...),
// an autograd node opens a backward. Calls onNode(node, window, nested) for each autograd node
// and onOp(span, window, layer, node) for every other span: `layer` the innermost open range
// naming a layer outside any node (or, with `opLayers`, an op that is a layer's own:
// forwardOpLayers, by its start), `node` the innermost open node outside any such range (nullptr:
// none).
template <typename OnNode, typename OnOp>
void walkLayerRanges(const RankTrack& track, const std::vector<IterationWindow>& windows,
                     const std::map<std::string, int, std::less<>>& layerIndex,
                     const std::map<int64_t, int>* opLayers, LayerRangeWalk& walk, OnNode onNode,
                     OnOp onOp) {
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    struct Open {
      const Span* span;
      int layer;  // a layer range naming a model layer (or a layer's own op): its index; else -1
      bool node;  // an autograd node
    };
    std::vector<Open> open;
    std::map<std::pair<const IterationWindow*, std::string>, int> calls;
    for (const Span& s : lane.spans) {
      while (!open.empty() && open.back().span->end() <= s.start) open.pop_back();
      const IterationWindow* window = windowOf(windows, s.start);
      int layer = -1;
      const Span* node = nullptr;
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        if (it->node && node == nullptr && layer < 0) node = it->span;
        if (it->layer >= 0 && layer < 0 && node == nullptr) layer = it->layer;
      }
      if (s.name.starts_with(kLayerRangePrefix)) {
        const std::string path(s.name.substr(kLayerRangePrefix.size()));
        const int call = ++calls[{window, path}];
        auto found = layerIndex.find(call == 1 ? path : path + ":" + std::to_string(call));
        open.push_back({&s, found == layerIndex.end() ? -1 : found->second, false});
        continue;
      }
      if (s.name.starts_with(kAutogradNodePrefix)) {
        onNode(s, window, node != nullptr);
        open.push_back({&s, -1, true});
        continue;
      }
      int ownLayer = -1;  // a layer's forward op (opLayers)
      if (opLayers != nullptr && node == nullptr) {
        if (auto it = opLayers->find(s.start.count()); it != opLayers->end()) {
          ownLayer = it->second;
          layer = ownLayer;
        }
      }
      if (auto sequence = s.args.getInt("Sequence number")) {
        if (node != nullptr) {
          walk.sequenceOfNode.try_emplace(node, *sequence);
        } else if (layer >= 0) {
          walk.layerOfSequence.try_emplace(*sequence, layer);
        }
      }
      onOp(s, window, layer, node);
      open.push_back({&s, ownLayer, false});
    }
  }
}

// CPU traces with ddpscope.layer: ranges (the GPU kit's jobs rehearsed on the CPU, or any job
// that wraps its modules so): a layer's forward is the host ops inside its range (the innermost
// range naming a model layer; a module called again in an iteration names "<path>:2", ...), one
// span from the first op's start to the last op's end; its backward the autograd nodes whose
// sequence number is a forward op's in its range, and the nodes of no layer that ran after
// them, one span from the first node's start to the last node's end. Ops outside every layer's
// range (the loss, residual adds and attention cores of a container's forward) become host ops, as
// functional ops do in mapLayers: their time lies in the gap before the next layer's span, which
// replay gives to that layer. Unlike mapLayers's match by kind, this needs no rule for how each op
// type's backward is named.
Status mapCpuLayersByRanges(const std::vector<ImportLayer>& layers, const RankTrack& track,
                            RankBuild& build, int64_t& mappedLayers) {
  const std::map<std::string, int, std::less<>> layerIndex = layerIndexOf(layers);
  const std::vector<IterationWindow> windows = iterationWindows(build);
  struct Extent {
    Nanos first, last;
  };
  std::map<std::tuple<const IterationWindow*, int, bool>, Extent> extent;
  auto extend = [&](const IterationWindow* w, int layer, bool backward, const Span& s) {
    auto [e, inserted] = extent.try_emplace({w, layer, backward}, Extent{s.start, s.end()});
    if (!inserted) {
      e->second.first = minNanos(e->second.first, s.start);
      e->second.last = maxNanos(e->second.last, s.end());
    }
  };
  std::vector<std::pair<const Span*, const IterationWindow*>> nodes;  // outermost, in order
  LayerRangeWalk walk;
  walkLayerRanges(
      track, windows, layerIndex, nullptr, walk,
      [&](const Span& node, const IterationWindow* window, bool nested) {
        if (window != nullptr && !nested) nodes.emplace_back(&node, window);
      },
      [&](const Span& op, const IterationWindow* window, int layer, const Span* node) {
        if (window != nullptr && layer >= 0 && node == nullptr) extend(window, layer, false, op);
      });
  // A node of no layer's op (AccumulateGrad with DDP's hook, a container's residual add) belongs
  // to the layer whose node ran before it, as in mapLayers; before the first, to none (the loss).
  int current = -1;  // the layer of the last node with one; -1 before the window's first
  const IterationWindow* currentWindow = nullptr;
  for (const auto& [node, window] : nodes) {
    if (window != currentWindow) current = -1;
    currentWindow = window;
    if (const int layer = walk.layerOfNode(node); layer >= 0) current = layer;
    if (current >= 0) extend(window, current, true, *node);
  }
  // The compute lane's forward and backward ops of the profiled steps give way to the layers'
  // spans; those outside every layer's become host ops.
  std::vector<GroupedSpan> out;
  std::set<int> mapped;
  for (const auto& [key, range] : extent) {
    const auto& [window, layer, backward] = key;
    const ImportLayer& l = layers[static_cast<size_t>(layer)];
    out.push_back({kComputeGroup, Span{backward ? l.name + " (backward)" : l.name,
                                       backward ? Category::kBackward : Category::kForward,
                                       range.first, range.last - range.first,
                                       Args{{"layer", static_cast<int64_t>(layer)},
                                            {std::string(kArgIteration), window->index}}}});
    mapped.insert(layer);
  }
  mappedLayers = static_cast<int64_t>(mapped.size());
  if (mapped.empty()) {
    return invalidArgument(build.file +
                           ": no host op could be tied to a layer of the model through the "
                           "trace's ddpscope.layer: ranges (is this the model the trace was "
                           "recorded with?)");
  }
  // Per step, its extents by start with the latest end so far: an op lies inside one of the
  // step's extents iff the latest end of those starting at or before it reaches its end (a
  // binary search per op, not a pass over every extent of every step).
  struct Reach {
    std::vector<Nanos> firsts, lasts;
  };
  std::map<const IterationWindow*, Reach> reach;
  {
    std::map<const IterationWindow*, std::vector<Extent>> byWindow;
    for (const auto& [key, range] : extent) byWindow[std::get<0>(key)].push_back(range);
    for (auto& [window, ranges] : byWindow) {
      std::sort(ranges.begin(), ranges.end(),
                [](const Extent& a, const Extent& b) { return a.first < b.first; });
      Reach& r = reach[window];
      for (const Extent& e : ranges) {
        r.firsts.push_back(e.first);
        r.lasts.push_back(r.lasts.empty() ? e.last : maxNanos(r.lasts.back(), e.last));
      }
    }
  }
  for (auto& g : build.spans) {
    const bool pass = g.group == kComputeGroup && (g.span.category == Category::kForward ||
                                                   g.span.category == Category::kBackward);
    const IterationWindow* window = pass ? windowOf(windows, g.span.start) : nullptr;
    if (window == nullptr) {
      out.push_back(std::move(g));
      continue;
    }
    auto r = reach.find(window);
    bool covered = false;
    if (r != reach.end()) {
      const auto& firsts = r->second.firsts;
      const size_t n = static_cast<size_t>(
          std::upper_bound(firsts.begin(), firsts.end(), g.span.start) - firsts.begin());
      covered = n > 0 && r->second.lasts[n - 1] >= g.span.end();
    }
    if (!covered) out.push_back({kHostOpsGroup, std::move(g.span)});
  }
  build.spans = std::move(out);
  return Status::ok();
}

// ---- GPU traces: kernels to layers through the job's ddpscope.layer: ranges ----

// Whether a rank's trace shows DDP at work: DDP's forward range, its reducer's ops (copy-in,
// copy-back) or an allreduce (a collective op, NCCL/RCCL/gloo's annotation or kernel).
bool hasDdpWork(const RankTrack& track) {
  for (const Lane& lane : track.lanes) {
    const bool host = lane.kind == LaneKind::kHost;
    for (const Span& s : lane.spans) {
      const std::string_view n = s.name;
      if (n.starts_with("DistributedDataParallel.forward") || n.find("reducer::") != n.npos) {
        return true;
      }
      const Category c = host ? classifyHostEvent(n) : classifyGpuKernel(n);
      if (c == Category::kAllreduce) return true;
    }
  }
  return false;
}

// The matrix products and convolutions whose first input's type is the precision the job
// computed in (after autocast's casts: aten::conv2d and aten::linear still see the float weight).
bool isComputeDtypeOp(std::string_view name) {
  return name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" ||
         name == "aten::baddbmm" || name == "aten::convolution" ||
         name.starts_with("aten::_scaled_dot_product_");
}

// ddpscope's name of a record_shapes "Input type" that tensor cores compute in; "" for others.
std::string computeDtypeName(std::string_view inputType) {
  if (inputType == "c10::BFloat16") return "bf16";
  if (inputType == "c10::Half") return "fp16";
  if (inputType == "float") return "fp32";
  return "";
}

// Adds the rank's matrix products and convolutions to `counts` by their input's dtype (a trace
// profiled with record_shapes=True; without it there is no "Input type" and nothing is counted).
void tallyComputeDtypes(const RankTrack& track, std::map<std::string, int64_t>& counts) {
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (!isComputeDtypeOp(s.name)) continue;
      auto types = s.args.getString("Input type");
      if (!types) continue;
      const nlohmann::json t = nlohmann::json::parse(*types, nullptr, false);
      if (!t.is_array() || t.empty() || !t[0].is_string()) continue;
      const std::string dtype = computeDtypeName(t[0].get<std::string>());
      if (!dtype.empty()) ++counts[dtype];
    }
  }
}

// The job's inputs from the first model op of the rank's first profiled step
// (KinetoImportReport::inputs).
KinetoImportReport::TraceInputs readTraceInputs(const RankTrack& track) {
  KinetoImportReport::TraceInputs out;
  const Span* step = nullptr;
  for (const Lane& lane : track.lanes) {
    for (const Span& s : lane.spans) {
      if (s.name.starts_with("ProfilerStep#") && (step == nullptr || s.start < step->start)) {
        step = &s;
      }
    }
  }
  if (step == nullptr) return out;
  const Span* first = nullptr;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (s.start < step->start || s.start >= step->end()) continue;
      if (s.name != "aten::conv2d" && s.name != "aten::embedding" && s.name != "aten::linear") {
        continue;
      }
      if (!s.args.getString("Input Dims")) continue;
      if (first == nullptr || s.start < first->start) first = &s;
    }
  }
  if (first == nullptr) return out;
  const nlohmann::json dims =
      nlohmann::json::parse(*first->args.getString("Input Dims"), nullptr, false);
  // aten::embedding(weight, indices): the indices are its second input.
  const size_t which = first->name == "aten::embedding" ? 1 : 0;
  if (!dims.is_array() || dims.size() <= which || !dims[which].is_array()) return out;
  std::vector<int64_t> shape;
  for (const auto& d : dims[which]) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0) return out;
    shape.push_back(d.get<int64_t>());
  }
  if (first->name == "aten::conv2d" && shape.size() == 4) {
    out.batch = shape[0];
    if (shape[2] == shape[3]) out.imageSize = shape[2];
  } else if (first->name == "aten::embedding" && shape.size() == 2) {
    out.batch = shape[0];
    out.seqLen = shape[1];
  } else if (first->name == "aten::linear" && shape.size() >= 2) {
    out.batch = shape[0];
  }
  if (!out.batch) return out;
  out.op = first->name + " " + dims[which].dump();
  return out;
}

// Whether the trace wraps module forwards in "ddpscope.layer:<module path>" ranges (what
// ddpscope.torch's recorder and the GPU kit's jobs write).
bool hasLayerRanges(const RankTrack& track) {
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (s.name.starts_with(kLayerRangePrefix)) return true;
    }
  }
  return false;
}

// A GPU trace's forward and backward spans per layer: a layer's forward is the kernels launched
// inside its range (the innermost range that names a layer of the model; a module called again
// in an iteration names "<path>:2", ...); its backward the kernels of the autograd nodes whose
// sequence number is that of a forward op inside its range. Each becomes one span per iteration
// from its first kernel's start to its last kernel's end. Layers without a range of their own
// (residual adds, attention cores: ops of a container's forward) get none: their kernels stay
// in the gaps, which replay gives to the next layer.
// `opLayers` (a model read off the trace from its ops: traces/kineto_model.h forwardOpLayers):
// each layer's forward op, by its start, acts as the layer's range.
Status mapGpuLayers(const std::vector<ImportLayer>& layers, const RankTrack& track,
                    RankBuild& build, bool ranges, int64_t& mappedLayers,
                    std::vector<std::pair<int64_t, std::string>>* forwardOps,
                    const std::map<int64_t, int>* opLayers = nullptr) {
  // Without ranges: the top-level host ops matched to the layers by kind, as on CPU traces; a
  // launch belongs to the op it runs in.
  struct OpInterval {
    Nanos start, end;
    int layer;
    bool backward;
  };
  std::vector<OpInterval> opIntervals;
  if (!ranges) {
    std::vector<LayerOp> matched;
    std::vector<const GroupedSpan*> functional;
    RETURN_IF_ERROR(matchLayerOps(layers, build, kHostOpsGroup, matched, functional));
    for (const LayerOp& m : matched) {
      opIntervals.push_back(
          {m.op->span.start, m.op->span.end(), static_cast<int>(m.layer), m.backward});
      if (forwardOps != nullptr && !m.backward) {
        forwardOps->emplace_back(m.op->span.start.count(), layers[m.layer].name);
      }
    }
    std::sort(opIntervals.begin(), opIntervals.end(),
              [](const OpInterval& a, const OpInterval& b) { return a.start < b.start; });
  }
  auto opAt = [&](Nanos t) -> const OpInterval* {
    auto it = std::upper_bound(opIntervals.begin(), opIntervals.end(), t,
                               [](Nanos v, const OpInterval& o) { return v < o.start; });
    if (it == opIntervals.begin()) return nullptr;
    --it;
    return t < it->end ? &*it : nullptr;
  };
  const std::map<std::string, int, std::less<>> layerIndex = layerIndexOf(layers);
  const std::vector<IterationWindow> windows = iterationWindows(build);
  struct Launch {
    int layer = -1;              // the layer whose range (or matched op) holds it
    const Span* node = nullptr;  // ranges, backward: the autograd node that launched it
    const IterationWindow* window = nullptr;
    bool backward = false;  // matched ops: a backward node's launch
  };
  std::map<int64_t, Launch> launches;               // correlation id → launch
  int64_t launchCalls = 0, correlatedLaunches = 0;  // runtime launch calls, with a correlation
  LayerRangeWalk walk;
  walkLayerRanges(
      track, windows, layerIndex, opLayers, walk, [](const Span&, const IterationWindow*, bool) {},
      [&](const Span& s, const IterationWindow* window, int layer, const Span* node) {
        if (classifyRuntimeCall(s.name) != RuntimeCall::kLaunch) return;
        ++launchCalls;
        if (auto correlation = s.args.getInt("correlation")) {
          ++correlatedLaunches;
          if (ranges) {
            launches[*correlation] = Launch{layer, node, window, false};
          } else if (const OpInterval* op = opAt(s.start)) {
            launches[*correlation] = Launch{op->layer, nullptr, window, op->backward};
          }
        }
      });
  // (window, layer, backward) → first kernel start, last kernel end, the kernels' summed time
  struct Extent {
    Nanos first, last, kernels;
  };
  std::map<std::tuple<const IterationWindow*, int, bool>, Extent> extent;
  int64_t kernels = 0, correlated = 0;
  for (const Lane& lane : track.lanes) {
    if (lane.kind == LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (!isComputation(s.category)) continue;
      auto correlation = s.args.getInt("correlation");
      ++kernels;
      if (correlation) ++correlated;
      auto it = correlation ? launches.find(*correlation) : launches.end();
      if (it == launches.end() || it->second.window == nullptr) continue;
      int layer = it->second.layer;
      bool backward = it->second.backward;
      if (it->second.node != nullptr) {
        layer = walk.layerOfNode(it->second.node);
        if (layer < 0) continue;
        backward = true;
      }
      if (layer < 0) continue;
      auto [e, inserted] = extent.try_emplace({it->second.window, layer, backward},
                                              Extent{s.start, s.end(), s.duration});
      if (!inserted) {
        e->second.first = minNanos(e->second.first, s.start);
        e->second.last = maxNanos(e->second.last, s.end());
        e->second.kernels += s.duration;
      }
    }
  }
  std::set<int> mapped;
  for (const auto& [key, range] : extent) {
    const auto& [window, layer, backward] = key;
    const ImportLayer& l = layers[static_cast<size_t>(layer)];
    build.spans.push_back(
        {kComputeGroup, Span{backward ? l.name + " (backward)" : l.name,
                             backward ? Category::kBackward : Category::kForward, range.first,
                             range.last - range.first,
                             Args{{"layer", static_cast<int64_t>(layer)},
                                  {std::string(kArgIteration), window->index},
                                  {std::string(kArgKernelExtent), int64_t{1}},
                                  {std::string(kArgKernelNs), range.kernels.count()}}}});
    mapped.insert(layer);
  }
  mappedLayers = static_cast<int64_t>(mapped.size());
  if (mapped.empty() && kernels > 0 &&
      (correlated == 0 || (launchCalls > 0 && correlatedLaunches == 0))) {
    // What ties a kernel to the op that launched it is missing from the trace itself.
    return invalidArgument(
        build.file + ": no kernel could be tied to a layer of the model: " +
        (correlated == 0
             ? "none of its " + std::to_string(kernels) + " kernels carries a 'correlation' arg"
             : std::string("none of its CUDA/HIP launch calls carries a 'correlation' arg")) +
        ", which ties a kernel to the runtime call that launched it; PyTorch's profiler writes "
        "it when it records both sides (torch.profiler.profile(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA])): a trace trimmed or converted by another tool may have lost "
        "it");
  }
  if (mapped.empty()) {
    return invalidArgument(build.file + ": no kernel could be tied to a layer of the model " +
                           (ranges ? "through the trace's ddpscope.layer: ranges"
                                   : "through the host ops that launched them") +
                           " (is this the model the trace was recorded with? do its kernels "
                           "carry correlation ids?)");
  }
  return Status::ok();
}

// Places spans (sorted by spanPrecedes) on the lanes of one group: the first lane where the
// span nests (disjoint from or inside the spans still open there), else a new lane "<base>:k".
class LanePlacer {
 public:
  LanePlacer(Timeline& timeline, int rank, std::string base, LaneKind kind)
      : m_timeline(timeline), m_rank(rank), m_base(std::move(base)), m_kind(kind) {
    m_lanes.push_back({timeline.findOrAddLane(rank, m_base, kind), {}});
  }
  void place(Span span) {
    for (auto& lane : m_lanes) {
      while (!lane.openEnds.empty() && lane.openEnds.back() <= span.start) lane.openEnds.pop_back();
      if (lane.openEnds.empty() || span.end() <= lane.openEnds.back()) {
        lane.openEnds.push_back(span.end());
        m_timeline.addSpan(lane.handle, std::move(span));
        return;
      }
    }
    const std::string name = m_base + ":" + std::to_string(m_lanes.size());
    m_lanes.push_back({m_timeline.addLane(m_rank, name, m_kind), {span.end()}});
    m_timeline.addSpan(m_lanes.back().handle, std::move(span));
  }

 private:
  struct PlacedLane {
    LaneHandle handle;
    std::vector<Nanos> openEnds;  // a stack: ends of the open (enclosing) spans
  };
  Timeline& m_timeline;
  int m_rank;
  std::string m_base;
  LaneKind m_kind;
  std::vector<PlacedLane> m_lanes;
};

}  // namespace

std::optional<int64_t> kinetoDtypeBytes(std::string_view dtype) {
  static const std::map<std::string_view, int64_t> kSizes = {
      {"Float", 4},    {"float", 4},         {"float32", 4},  {"Int", 4},       {"int", 4},
      {"int32", 4},    {"Double", 8},        {"double", 8},   {"float64", 8},   {"Long", 8},
      {"long int", 8}, {"int64", 8},         {"Half", 2},     {"c10::Half", 2}, {"float16", 2},
      {"BFloat16", 2}, {"c10::BFloat16", 2}, {"bfloat16", 2}, {"Short", 2},     {"short int", 2},
      {"Byte", 1},     {"unsigned char", 1}, {"uint8", 1},    {"Char", 1},      {"signed char", 1},
      {"int8", 1},     {"Bool", 1},          {"bool", 1},
  };
  auto it = kSizes.find(dtype);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

namespace {

// Reads source `index` (a file, or bytes in memory) into a one-rank timeline.
using TraceSourceReader = std::function<StatusOr<Timeline>(size_t index, ChromeReadReport*)>;

// What the import has gathered from the sources read so far.
struct ImportState {
  KinetoImportReport report;
  std::vector<RankBuild> builds;
  std::map<int, std::string> fileOfRank;
  std::optional<int64_t> worldSize;
  std::string worldSizeFile;  // the file worldSize was read from
  std::string backend;
  bool gpuLayerRanges = false;   // GPU kernels named by layer through ddpscope.layer: ranges
  bool cpuLayerRanges = false;   // CPU host ops named by layer through ddpscope.layer: ranges
  bool cpuLayersByKind = false;  // CPU host ops matched to the layers by kind (no ranges)
  std::map<int, std::vector<std::pair<int64_t, std::string>>> forwardOpsOfRank;
  bool ddpSeen = false;    // DDP's forward, its reducer's ops or an allreduce in any trace
  bool modelRead = false;  // options.readModel: the first file's model was tried
  std::map<std::string, int64_t> computeDtypes;  // matrix products and convolutions by dtype
};

// The GPU `source`'s kernels ran on (KinetoImportReport::gpu).
std::optional<TracedGpu> readTracedGpu(const Timeline& source) {
  const std::optional<std::string_view> text = source.metadata().getString("deviceProperties");
  if (!text) return std::nullopt;
  std::optional<int64_t> device;  // the first kernel's
  for (const Lane& lane : source.rank(0).lanes) {
    for (const Span& span : lane.spans) {
      if (span.args.getString("cat") != std::optional<std::string_view>("kernel")) continue;
      device = span.args.getInt("device");
      break;
    }
    if (device) break;
  }
  return tracedGpuOfDeviceProperties(*text, device);
}

// The refusal of a source that is no single-rank Kineto trace; ok otherwise.
Status checkKinetoSource(const std::string& path, const Timeline& source,
                         const ChromeReadReport& readReport) {
  if (!readReport.singleRankTrace || source.rankCount() != 1) {
    return invalidArgument(
        path +
        ": not a PyTorch profiler (Kineto) trace: expected an object with \"schemaVersion\" or "
        "\"distributedInfo\" (torch.autograd.profiler's legacy export_chrome_trace(), used by "
        "PyTorch builds without Kineto, writes neither)");
  }
  return Status::ok();
}

// Checks the source's distributedInfo.world_size (required with several files, in range, the
// same in every file) and records it in `state`.
Status checkWorldSize(const std::string& path, const Timeline& source, size_t fileCount,
                      ImportState& state) {
  const std::optional<int64_t> ws = source.metadata().getInt("world_size");
  if (!ws && fileCount > 1) {
    return invalidArgument(path +
                           ": distributedInfo.rank / world_size missing: cannot tell which rank "
                           "this file holds (profile after init_process_group)");
  }
  if (ws && (*ws < 1 || *ws > kMaxWorldSize)) {
    // Rank ids are ints everywhere; the import never walks the world rank by rank.
    return invalidArgument(path + ": distributedInfo.world_size: expected a rank count in 1.." +
                           std::to_string(kMaxWorldSize) + ", got " + std::to_string(*ws));
  }
  if (ws) {
    if (state.worldSize && *state.worldSize != *ws) {
      return invalidArgument(path + ": distributedInfo.world_size is " + std::to_string(*ws) +
                             " but " + state.worldSizeFile + " says " +
                             std::to_string(*state.worldSize) + ": the files are not from one job");
    }
    state.worldSize = *ws;
    state.worldSizeFile = path;
  }
  return Status::ok();
}

// Names the rank's spans by layer (options.layers): a GPU trace's kernels through the
// ddpscope.layer: ranges when the job wrapped its modules in them, else through the host ops
// that launched them (with a note saying which); a CPU trace's host ops directly.
Status mapRankLayers(const std::string& path, const Timeline& source,
                     const std::vector<ImportLayer>& layers, RankBuild& build, ImportState& state,
                     const TraceModel* traced = nullptr) {
  const bool gpu = std::any_of(build.spans.begin(), build.spans.end(),
                               [](const auto& g) { return g.group == kHostOpsGroup; });
  // Ranges when the job wrapped its modules in them; else, for a model read off the trace's own
  // ops, each layer's op as its range; else the host ops by kind.
  const bool ranges = hasLayerRanges(source.rank(0));
  if (!gpu && ranges) {
    int64_t mapped = 0;
    RETURN_IF_ERROR(mapCpuLayersByRanges(layers, source.rank(0), build, mapped));
    state.cpuLayerRanges = true;
    state.report.notes.push_back(
        path + ": CPU trace: host ops named by layer through the ddpscope.layer: ranges; " +
        std::to_string(static_cast<int64_t>(layers.size()) - mapped) + " of " +
        std::to_string(layers.size()) +
        " layers have no ops of their own (ops of a container's forward: residual adds, "
        "attention cores): their time stays with the next layer's");
    return Status::ok();
  }
  if (!gpu) {
    RETURN_IF_ERROR(mapLayers(layers, build));
    state.cpuLayersByKind = true;
    const auto kindless = std::count_if(layers.begin(), layers.end(), [](const ImportLayer& l) {
      return layerKind(l.type).empty();
    });
    std::string note = path + ": CPU trace: host ops matched to the layers by their kind";
    if (kindless > 0) {
      note += "; " + std::to_string(kindless) + " of " + std::to_string(layers.size()) +
              " layers are of a type the match has no op for (a matrix product, a custom "
              "module): their time stays with the next layer's (profile inside `with "
              "ddpscope.torch.layer_ranges(model):` to name every module's ops)";
    }
    state.report.notes.push_back(std::move(note));
    return Status::ok();
  }
  std::optional<std::map<int64_t, int>> opLayers;
  std::vector<std::pair<int64_t, std::string>> forwardOps;
  if (!ranges && traced != nullptr && !traced->fromRanges) {
    opLayers = forwardOpLayers(source.rank(0), *traced);
    if (opLayers->empty()) {
      return invalidArgument(path +
                             ": no profiled step runs the forward ops of the model read "
                             "from the trace");
    }
    // The host facts (sim/replay/trace_host_facts.h) give every forward op to a layer.
    for (const auto& [start, layer] : forwardOpLayers(source.rank(0), *traced, /*everyOp=*/true)) {
      forwardOps.emplace_back(start, layers[static_cast<size_t>(layer)].name);
    }
  }
  int64_t mapped = 0;
  RETURN_IF_ERROR(mapGpuLayers(layers, source.rank(0), build, ranges || opLayers.has_value(),
                               mapped, opLayers ? nullptr : &forwardOps,
                               opLayers ? &*opLayers : nullptr));
  state.forwardOpsOfRank[build.rank] = std::move(forwardOps);
  state.gpuLayerRanges = true;
  state.report.notes.push_back(
      path + ": GPU trace: kernels named by layer through " +
      (ranges     ? std::string("the ddpscope.layer: ranges")
       : opLayers ? std::string("the forward ops they were read from and their autograd nodes")
                  : std::string("the host ops that launched them")) +
      "; " + std::to_string(static_cast<int64_t>(layers.size()) - mapped) + " of " +
      std::to_string(layers.size()) +
      " layers have no kernels of their own (ops of a container's forward: residual "
      "adds, attention cores): their time stays with the next layer's");
  return Status::ok();
}

// KinetoImportOptions::readModel: the first file's model (traces/kineto_model.h) names the spans
// of every rank. A first file without one, or whose layers its own ops do not match, imports
// without layer names (a note says why); a later file the model does not fit is refused: the
// ranks ran different models.
Status mapRankLayersOfTrace(const std::string& path, const Timeline& source, RankBuild& build,
                            ImportState& state) {
  KinetoImportReport& report = state.report;
  if (!state.modelRead) {
    state.modelRead = true;
    StatusOr<TraceModel> model = readTraceModel(source.rank(0), path);
    if (!model.isOk()) {
      report.notes.push_back("no model read from the trace: " + model.status().message());
      return Status::ok();
    }
    // A failed match leaves the build as it was (the spans only re-sorted).
    Status mapped = mapRankLayers(path, source, model->layers, build, state, &*model);
    if (!mapped.isOk()) {
      report.notes.push_back("the model read from the trace does not fit its own ops: " +
                             mapped.message() + "; give --model");
      return Status::ok();
    }
    report.traceModel = std::move(*model);
    return Status::ok();
  }
  if (!report.traceModel) return Status::ok();
  Status mapped =
      mapRankLayers(path, source, report.traceModel->layers, build, state, &*report.traceModel);
  if (!mapped.isOk()) {
    return invalidArgument(mapped.message() + " (the layers were read from " +
                           report.traceModel->file + "; do all files come from one job?)");
  }
  return Status::ok();
}

// One source (`path`, one of `fileCount`) into `state`: checks it belongs to the job and holds a
// rank no other file holds, imports the rank and maps its layers.
Status importSource(const std::string& path, size_t fileCount, const Timeline& source,
                    const ChromeReadReport& readReport, const KinetoImportOptions& options,
                    ImportState& state) {
  RETURN_IF_ERROR(checkKinetoSource(path, source, readReport));
  RETURN_IF_ERROR(checkWorldSize(path, source, fileCount, state));
  if (auto b = source.metadata().getString("backend")) state.backend = std::string(*b);
  state.ddpSeen = state.ddpSeen || hasDdpWork(source.rank(0));
  tallyComputeDtypes(source.rank(0), state.computeDtypes);
  if (state.builds.empty()) {
    state.report.inputs = readTraceInputs(source.rank(0));
    state.report.gpu = readTracedGpu(source);
  }
  const int rank = source.rank(0).rank;
  if (auto it = state.fileOfRank.find(rank); it != state.fileOfRank.end()) {
    return invalidArgument(path + ": rank " + std::to_string(rank) +
                           " (distributedInfo.rank) is also the rank of " + it->second +
                           ": give one trace per rank");
  }
  state.fileOfRank[rank] = path;
  KinetoImportReport& report = state.report;
  report.htaOverlap[rank] = computeOverlap(source).front().total;
  RankBuild build;
  RETURN_IF_ERROR(importOneRank(path, source, build, options, report));
  report.collectivesWithUnknownBytes += build.unknownBytes;
  report.collectivesSizedFromPlan += build.bytesFromPlan;
  report.collectivesDisagreeingWithPlan += build.disagreeingPlan;
  if (build.untiedGenericKernels > 0) {
    report.notes.push_back(
        path + ": " + std::to_string(build.untiedGenericKernels) +
        " communication kernel(s) whose name does not say their collective (" +
        build.untiedGenericName +
        "; RCCL's ncclDevKernel_Generic and NCCL's SendRecv are named so) could not be tied to "
        "a collective: no launch with their correlation id inside record_param_comms or a c10d "
        "op (profile with CPU and GPU activities; the kernels stay unclassified communication)");
  }
  if (!options.layers.empty()) {
    RETURN_IF_ERROR(mapRankLayers(path, source, options.layers, build, state));
  } else if (options.readModel) {
    RETURN_IF_ERROR(mapRankLayersOfTrace(path, source, build, state));
  }
  state.builds.push_back(std::move(build));
  return Status::ok();
}

// Checks every file's rank is inside the world and, unless options.allowMissingRanks, that no
// rank is missing. Returns how many ranks of the world no file holds.
StatusOr<int64_t> checkRanksCoverWorld(const std::map<int, std::string>& fileOfRank, int64_t world,
                                       const KinetoImportOptions& options) {
  for (const auto& [rank, file] : fileOfRank) {
    if (rank < 0 || rank >= world) {
      return invalidArgument(file + ": distributedInfo.rank " + std::to_string(rank) +
                             " is outside world_size " + std::to_string(world));
    }
  }
  // Every file's rank is in [0, world) and distinct: world - files ranks are missing. Only the
  // first few are named, found in at most files + kMaxListedRanks steps whatever the world size.
  const int64_t missingCount = world - static_cast<int64_t>(fileOfRank.size());
  if (missingCount > 0 && !options.allowMissingRanks) {
    std::string list;
    int64_t listed = 0;
    for (int64_t r = 0; r < world && listed < kMaxListedRanks; ++r) {
      if (fileOfRank.count(static_cast<int>(r)) > 0) continue;
      list += (list.empty() ? "" : ", ") + std::to_string(r);
      ++listed;
    }
    if (missingCount > listed) list += ", ... (" + std::to_string(missingCount) + " in all)";
    return invalidArgument(
        "rank" + std::string(missingCount > 1 ? "s " : " ") + list + " of world_size " +
        std::to_string(world) +
        " missing: give one trace per rank, or import a subset with --allow-missing-ranks "
        "(Python: allow_missing_ranks=True)");
  }
  return missingCount;
}

// Clock alignment on the first iteration every rank has: each rank's offset onto the first
// rank's clock (all zero, with a note when several ranks share no iteration).
std::vector<Nanos> clockOffsets(const std::vector<RankBuild>& builds, KinetoImportReport& report) {
  std::set<int64_t> common;
  for (const auto& [index, start] : builds.front().iterationStart) common.insert(index);
  for (const auto& b : builds) {
    std::set<int64_t> next;
    for (int64_t i : common) {
      if (b.iterationStart.count(i)) next.insert(i);
    }
    common = std::move(next);
  }
  std::vector<Nanos> offset(builds.size(), Nanos(0));
  if (!common.empty()) {
    const int64_t anchor = *common.begin();
    const Nanos ref = builds.front().iterationStart.at(anchor);
    for (size_t i = 0; i < builds.size(); ++i)
      offset[i] = ref - builds[i].iterationStart.at(anchor);
  } else if (builds.size() > 1) {
    report.notes.push_back("no ProfilerStep index common to all ranks: ranks not aligned");
  }
  return offset;
}

// The earliest span start of all ranks once aligned: the imported timeline's zero.
Nanos earliestAlignedStart(const std::vector<RankBuild>& builds, const std::vector<Nanos>& offset) {
  Nanos earliest = Nanos::max();
  for (size_t i = 0; i < builds.size(); ++i) {
    for (const auto& g : builds[i].spans) earliest = minNanos(earliest, g.span.start + offset[i]);
  }
  return earliest;
}

// Metadata "dtype" (what calibrate and replay read as the run's precision): the dtype of most
// of the job's matrix products and convolutions, with a note; a GPU job whose trace does not say
// gets a note that calibrate will take it for fp32.
void recordComputeDtype(ImportState& state, Args& meta) {
  KinetoImportReport& report = state.report;
  if (state.computeDtypes.empty()) {
    if (state.gpuLayerRanges) {
      report.notes.push_back(
          "compute dtype unknown: no matrix product or convolution with its input types (profile "
          "with record_shapes=True); calibrate and replay take the run for fp32");
    }
    return;
  }
  int64_t total = 0;
  auto most = state.computeDtypes.begin();
  for (auto it = state.computeDtypes.begin(); it != state.computeDtypes.end(); ++it) {
    total += it->second;
    if (it->second > most->second) most = it;
  }
  meta.set("dtype", most->first);
  report.notes.push_back(
      "compute dtype " + most->first + ": the input type of " + std::to_string(most->second) +
      " of " + std::to_string(total) +
      " matrix products and convolutions (aten::mm, addmm, bmm, baddbmm, "
      "convolution, scaled_dot_product_*)" +
      (most->first == "fp32" ? "; TF32 cannot be told from fp32 in a trace" : ""));
}

// The imported timeline before its spans: its name and metadata (source, layer spans, a job
// without DDP, world size, backend, files). Lists the ranks and files in the report and sorts
// each rank's spans by start.
Timeline startImportTimeline(int64_t world, ImportState& state) {
  KinetoImportReport& report = state.report;
  Timeline timeline;
  timeline.setName("pytorch-profiler import");
  Args& meta = timeline.mutableMetadata();
  meta.set("source", std::string("pytorch-profiler"));
  if (state.gpuLayerRanges) meta.set("layer_spans", std::string("gpu-kernels-by-range"));
  if (state.cpuLayerRanges) meta.set("layer_spans", std::string("cpu-ops-by-range"));
  if (state.cpuLayersByKind) meta.set("layer_spans", std::string("cpu-ops-by-kind"));
  if (!state.ddpSeen) {
    // replay and calibrate refuse such a run (sim/replay/measured_profile.h).
    meta.set("ddp", std::string("none"));
    report.notes.push_back(
        "no DDP in the trace(s): no DistributedDataParallel.forward range, no reducer op and no "
        "allreduce in the profiled steps: the job does not wrap its model in "
        "DistributedDataParallel (or was profiled without CPU activity); replay and calibrate "
        "need a DDP job's trace");
  }
  meta.set("world_size", world);
  if (!state.backend.empty()) meta.set("backend", state.backend);
  recordComputeDtype(state, meta);
  if (report.gpu) meta.set("gpu", tracedGpuJson(*report.gpu));
  nlohmann::json files = nlohmann::json::array();
  for (auto& b : state.builds) {
    files.push_back(b.file);
    report.ranks.push_back(b.rank);
    report.files.push_back(b.file);
    std::stable_sort(
        b.spans.begin(), b.spans.end(),
        [](const GroupedSpan& x, const GroupedSpan& y) { return spanPrecedes(x.span, y.span); });
  }
  meta.set("files", files.dump());
  return timeline;
}

// Each rank's spans onto its lanes (compute, comm, ddp, iterations, and cpu ops when it has
// any), moved onto the common clock that starts at `earliest`.
void placeRankSpans(std::vector<RankBuild>& builds, const std::vector<Nanos>& offset,
                    Nanos earliest, Timeline& timeline) {
  for (size_t i = 0; i < builds.size(); ++i) {
    RankBuild& b = builds[i];
    timeline.addRank(b.rank);
    std::vector<LanePlacer> placers;
    placers.emplace_back(timeline, b.rank, "compute", LaneKind::kCompute);
    placers.emplace_back(timeline, b.rank, "comm", LaneKind::kComm);
    placers.emplace_back(timeline, b.rank, "ddp", LaneKind::kHost);
    placers.emplace_back(timeline, b.rank, std::string(kIterationLaneName), LaneKind::kHost);
    std::optional<LanePlacer> hostOps;
    for (auto& g : b.spans) {
      g.span.start = g.span.start + offset[i] - earliest;
      if (g.group == kHostOpsGroup) {
        if (!hostOps) hostOps.emplace(timeline, b.rank, "cpu ops", LaneKind::kHost);
        hostOps->place(std::move(g.span));
      } else {
        placers[static_cast<size_t>(g.group)].place(std::move(g.span));
      }
    }
  }
}

// The report's notes on collective sizes (assumed dtypes, sizes from the plan, disagreements,
// unknown sizes) and on ranks left out.
void addImportNotes(const KinetoImportOptions& options, int64_t missingCount,
                    KinetoImportReport& report) {
  if (report.collectivesWithAssumedDtype > 0) {
    report.notes.push_back(std::to_string(report.collectivesWithAssumedDtype) +
                           " collective(s) have shapes but no dtype in the trace: float32 assumed");
  }
  if (report.collectivesSizedFromPlan > 0) {
    report.notes.push_back(std::to_string(report.collectivesSizedFromPlan) +
                           " collective(s) carry no size in the trace: bytes from the bucket "
                           "plan (allreduces) and the buffers (broadcasts) of " +
                           options.plan.origin);
  }
  if (report.collectivesDisagreeingWithPlan > 0) {
    report.notes.push_back(std::to_string(report.collectivesDisagreeingWithPlan) +
                           " collective(s) of the trace differ in size from the bucket plan or "
                           "the buffers of " +
                           options.plan.origin + ": the trace's sizes are kept");
  }
  if (report.collectivesWithUnknownBytes > 0) {
    report.notes.push_back(
        std::to_string(report.collectivesWithUnknownBytes) +
        " collective(s) carry no message size (the profiler records sizes with "
        "record_shapes=True): bytes unknown" +
        (options.plan.bucketBytes.empty()
             ? "; give --model (and the job's DDP flags) to take bucket sizes from "
               "the bucket plan"
             : ""));
  }
  if (missingCount > 0) {
    report.notes.push_back(std::to_string(missingCount) + " rank(s) of the world not imported");
  }
}

// The import proper: `paths` name the sources (files or in-memory traces) in messages and
// metadata; `readSource` reads one at a time, so only one source's bytes are held at once.
StatusOr<Timeline> importSources(const std::vector<std::string>& paths,
                                 const TraceSourceReader& readSource,
                                 const KinetoImportOptions& options,
                                 KinetoImportReport* reportOut) {
  if (paths.empty()) return invalidArgument("no trace files given");
  ImportState state;
  for (size_t index = 0; index < paths.size(); ++index) {
    const std::string& path = paths[index];
    ChromeReadReport readReport;
    ASSIGN_OR_RETURN(Timeline source, readSource(index, &readReport));
    if (options.progress) options.progress(index + 1, paths.size(), path);
    RETURN_IF_ERROR(importSource(path, paths.size(), source, readReport, options, state));
  }
  const int64_t world = state.worldSize.value_or(static_cast<int64_t>(state.builds.size()));
  ASSIGN_OR_RETURN(const int64_t missingCount,
                   checkRanksCoverWorld(state.fileOfRank, world, options));
  std::vector<RankBuild>& builds = state.builds;
  std::sort(builds.begin(), builds.end(),
            [](const RankBuild& a, const RankBuild& b) { return a.rank < b.rank; });

  const std::vector<Nanos> offset = clockOffsets(builds, state.report);
  const Nanos earliest = earliestAlignedStart(builds, offset);
  Timeline timeline = startImportTimeline(world, state);
  placeRankSpans(builds, offset, earliest, timeline);
  KinetoImportReport& report = state.report;
  report.worldSize = static_cast<int>(world);
  addImportNotes(options, missingCount, report);
  // The lowest rank's (report.files.front(), whose host facts the import reads).
  if (!state.forwardOpsOfRank.empty()) {
    report.forwardOps = std::move(state.forwardOpsOfRank.begin()->second);
  }
  if (reportOut != nullptr) *reportOut = std::move(report);
  return timeline;
}

}  // namespace

StatusOr<Timeline> importKinetoTraces(const std::vector<std::string>& paths,
                                      const KinetoImportOptions& options,
                                      KinetoImportReport* report) {
  return importSources(
      paths,
      [&](size_t index, ChromeReadReport* readReport) {
        ChromeReadOptions read;
        read.maxGunzipBytes = options.maxGunzipBytes;
        return readChromeTrace(paths[index], read, readReport);
      },
      options, report);
}

StatusOr<Timeline> importKinetoTraceBytes(const std::vector<KinetoTraceBytes>& traces,
                                          const KinetoImportOptions& options,
                                          KinetoImportReport* report) {
  std::vector<std::string> names;
  names.reserve(traces.size());
  for (const auto& t : traces) names.push_back(t.name);
  return importSources(
      names,
      [&](size_t index, ChromeReadReport* readReport) {
        ChromeReadOptions read;
        read.maxGunzipBytes = options.maxGunzipBytes;
        return parseChromeTrace(traces[index].bytes, traces[index].name, read, readReport);
      },
      options, report);
}

KinetoImportSummary summarizeImport(const Timeline& timeline) {
  KinetoImportSummary summary;
  summary.rankCount = timeline.rankCount();
  const std::vector<RankOverlap> overlap = computeOverlap(timeline);
  std::map<int64_t, Nanos> slowestStep;
  std::vector<Nanos> comm, exposed;
  int64_t totalComm = 0, totalOverlapped = 0;
  for (int ri = 0; ri < timeline.rankCount(); ++ri) {
    const RankTrack& track = timeline.rank(ri);
    // iteration → bucket → bytes (nullopt: unknown)
    std::map<int64_t, std::map<int64_t, std::optional<int64_t>>> bucketsByIteration;
    for (const Lane& lane : track.lanes) {
      if (lane.kind != LaneKind::kComm) continue;
      for (const Span& s : lane.spans) {
        auto bucket = s.args.getInt(kArgBucket);
        auto iteration = s.args.getInt(kArgIteration);
        if (!bucket || !iteration) continue;
        bucketsByIteration[*iteration][*bucket] = s.args.getInt(kArgBytes);
      }
    }
    const RankOverlap* rankOverlap = nullptr;
    for (const auto& r : overlap) {
      if (r.rank == track.rank) rankOverlap = &r;
    }
    if (rankOverlap == nullptr) continue;
    totalComm += rankOverlap->total.comm.count();
    totalOverlapped += rankOverlap->total.overlapped.count();
    for (const auto& it : rankOverlap->iterations) {
      ImportedIteration row;
      row.rank = track.rank;
      row.index = it.index;
      row.step = it.stepTime;
      for (const auto& [bucket, bytes] : bucketsByIteration[it.index])
        row.bucketBytes.push_back(bytes);
      slowestStep[it.index] = maxNanos(slowestStep[it.index], it.stepTime);
      if (ri == 0) {
        comm.push_back(it.stats.comm);
        exposed.push_back(it.stats.exposedComm);
      }
      summary.iterations.push_back(std::move(row));
    }
  }
  summary.iterationCount = static_cast<int>(slowestStep.size());
  for (const auto& row : summary.iterations) {
    if (row.rank == summary.iterations.front().rank) summary.bucketBytes = row.bucketBytes;
  }
  for (const auto& row : summary.iterations) {
    if (row.bucketBytes != summary.bucketBytes) summary.bucketsConsistent = false;
  }
  std::vector<Nanos> steps;
  for (const auto& [index, step] : slowestStep) steps.push_back(step);
  summary.medianStep = median(steps);
  summary.medianComm = median(comm);
  summary.medianExposedComm = median(exposed);
  // HTA's overlap %, comm-weighted over all ranks (totalComm >= 0: a sum of union lengths).
  summary.overlapPercent =
      makeOverlapStats(Nanos(0), Nanos(totalComm), Nanos(totalOverlapped)).overlapPercent;
  return summary;
}

}  // namespace ddpscope::traces
