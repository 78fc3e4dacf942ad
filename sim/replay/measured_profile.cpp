#include "sim/replay/measured_profile.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "base/median.h"
#include "ddp/ddp_settings.h"
#include "models/model_resolver.h"
#include "traces/args_json.h"
#include "traces/chrome_reader.h"
#include "traces/kineto_kinds.h"

namespace ddpscope::sim::replay {
namespace {

using traces::Category;
using traces::Span;

std::optional<double> metaNumber(const traces::Args& meta, std::string_view key) {
  return meta.getDouble(key);
}

// Length of [a, b) covered by the sorted, merged intervals.
int64_t coveredLength(const std::vector<std::pair<int64_t, int64_t>>& merged, int64_t a,
                      int64_t b) {
  if (b <= a) return 0;
  int64_t total = 0;
  auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(a, INT64_MAX));
  if (it != merged.begin()) --it;
  for (; it != merged.end() && it->first < b; ++it) {
    const int64_t lo = std::max(a, it->first);
    const int64_t hi = std::min(b, it->second);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

std::vector<std::pair<int64_t, int64_t>> mergeIntervals(
    std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& iv : intervals) {
    if (!merged.empty() && iv.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, iv.second);
    } else {
      merged.push_back(iv);
    }
  }
  return merged;
}

std::string stripBackwardSuffix(std::string_view name) {
  for (std::string_view suffix : {" (backward)", "(backward)", ".backward", " backward"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      return std::string(name.substr(0, name.size() - suffix.size()));
    }
  }
  return std::string(name);
}

bool isCopyBack(const Span& s) {
  return s.name.find("back") != std::string::npos || !s.args.contains(traces::kArgBytes);
}

struct RankSpans {
  int rank = 0;
  std::vector<const Span*> compute;  // forward / backward / optimizer, by start
  std::vector<const Span*> copies;
  std::vector<const Span*> comm;
  std::vector<std::pair<int64_t, int64_t>> commMerged;  // the comm spans' union, sorted
};

std::string layerList(const models::ModelSpec& model) {
  std::string out;
  for (size_t i = 0; i < model.layers.size() && i < 6; ++i) {
    out += (i ? ", " : "") + model.layers[i].name;
  }
  if (model.layers.size() > 6) out += ", ...";
  return out;
}

// Each comm span's own share of its length when the rank's collectives that run at the same
// time share it equally: the integral over the span of 1 / (collectives in flight), divided by
// its length (1 when nothing overlaps it, and for an empty span). One sweep over the rank's
// spans: O(N log N + N·k) for N spans and at most k in flight at once.
std::map<const Span*, double> ownShares(const std::vector<const Span*>& comm) {
  std::vector<std::pair<int64_t, const Span*>> events;  // (time, span): start, then end
  events.reserve(2 * comm.size());
  for (const Span* s : comm) {
    events.emplace_back(s->start.count(), s);
    events.emplace_back(s->end().count(), s);
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::map<const Span*, double> own;
  std::vector<const Span*> active;
  int64_t previous = 0;
  for (const auto& [t, span] : events) {
    if (!active.empty() && t > previous) {
      const double share = static_cast<double>(t - previous) / static_cast<double>(active.size());
      for (const Span* a : active) own[a] += share;
    }
    previous = t;
    auto it = std::find(active.begin(), active.end(), span);
    if (it == active.end()) {
      active.push_back(span);
    } else {
      active.erase(it);
    }
  }
  std::map<const Span*, double> fraction;
  for (const Span* s : comm) {
    const double length = static_cast<double>(s->duration.count());
    fraction[s] = length > 0 ? own[s] / length : 1.0;
  }
  return fraction;
}

}  // namespace

StatusOr<RunSettings> readRunSettings(const traces::Timeline& timeline, const std::string& origin) {
  const traces::Args& meta = timeline.metadata();
  RunSettings s;
  if (auto m = meta.getString("model")) s.model = std::string(*m);
  if (auto m = meta.getString("model_json")) s.modelJson = std::string(*m);
  s.worldSize = timeline.rankCount();
  if (auto w = metaNumber(meta, "world_size")) {
    if (*w < 1 || *w != std::floor(*w)) {
      return invalidArgument(origin + ": otherData.world_size: expected a positive integer");
    }
    s.worldSize = static_cast<int>(*w);
  }
  if (s.worldSize < 1) s.worldSize = 1;
  if (auto b = metaNumber(meta, "global_batch")) s.globalBatch = static_cast<int64_t>(*b);
  if (auto b = metaNumber(meta, "batch_per_rank")) {
    s.batchPerRank = static_cast<int64_t>(*b);
  } else if (s.globalBatch > 0) {
    s.batchPerRank = std::max<int64_t>(1, s.globalBatch / s.worldSize);
  }
  if (auto v = metaNumber(meta, "seq_len")) s.seqLen = static_cast<int64_t>(*v);
  if (auto v = metaNumber(meta, "image_size")) s.imageSize = static_cast<int64_t>(*v);
  if (auto v = metaNumber(meta, "warmup")) s.warmup = static_cast<int64_t>(*v);
  if (auto d = meta.getString("dtype")) s.dtype = std::string(*d);
  // The DDP settings under their canonical keys (ddp/ddp_settings.h), the same reader for
  // runtime, simulated and imported traces.
  ASSIGN_OR_RETURN(s.ddp,
                   ddp::readDdpSettingsJson(traces::argsToJson(meta), origin + ": otherData"));
  s.syncBatchNorm = metaNumber(meta, "sync_batchnorm").value_or(0) != 0;
  s.ddp.worldSize = s.worldSize;
  return s;
}

StatusOr<models::ModelSpec> modelForTrace(const RunSettings& settings, const std::string& origin) {
  if (settings.model.empty() && !settings.modelJson.empty()) {
    return models::parseModelJson(settings.modelJson, origin + ": otherData.model_json");
  }
  if (settings.model.empty()) {
    return invalidArgument(origin +
                           ": the trace names no model (otherData.model) and holds none read "
                           "from its shapes (import-torch reads one from a profile recorded with "
                           "record_shapes=True); give --model");
  }
  StatusOr<models::ModelSpec> model = models::resolveModel(settings.model);
  if (!model.isOk()) {
    return invalidArgument(origin + ": otherData.model '" + settings.model +
                           "': " + model.status().message() + " (or give --model)");
  }
  return model;
}

namespace {

// Iterations left out unless the caller says. A runtime trace counts iterations from the job's
// first: its warm-up and the iterations before DDP's bucket rebuild (2, or 3 with static_graph).
// A PyTorch profile counts ProfilerStep#N from the profiler's start, usually long after the
// job's: it leaves out only what it holds — the iterations up to the last one with more
// broadcasts than the trace's last iteration (the rebuild broadcasts the new bucket layout; the
// first iteration also broadcasts the module's state), none when every step looks alike.
int64_t defaultSkip(const traces::Timeline& timeline, const RunSettings& settings) {
  const bool profilerTrace = timeline.metadata().getString("source") ==
                             std::optional<std::string_view>("pytorch-profiler");
  if (!profilerTrace || timeline.metadata().contains("warmup")) {
    const int64_t rebuildIteration = settings.ddp.staticGraph ? 3 : 2;
    return std::max(settings.warmup, rebuildIteration);
  }
  std::map<int64_t, int> broadcasts;  // iteration → broadcasts, over all ranks
  int64_t first = INT64_MAX;
  for (int ri = 0; ri < timeline.rankCount(); ++ri) {
    for (const traces::Iteration& it : timeline.iterations(ri)) {
      first = std::min(first, it.index);
      broadcasts.try_emplace(it.index, 0);
    }
    for (const traces::Lane& lane : timeline.rank(ri).lanes) {
      if (lane.kind != traces::LaneKind::kComm) continue;
      for (const Span& s : lane.spans) {
        auto iteration = s.args.getInt(traces::kArgIteration);
        if (iteration && s.category == Category::kBroadcast) ++broadcasts[*iteration];
      }
    }
  }
  if (broadcasts.empty()) return 0;
  const int steady = broadcasts.rbegin()->second;
  int64_t skip = first - 1;
  for (const auto& [index, count] : broadcasts) {
    if (count > steady) skip = index;
  }
  return skip;
}

// The refusal of a trace whose import found no DDP (metadata ddp=none); ok otherwise.
Status checkTraceUsesDdp(const traces::Timeline& timeline, const std::string& origin) {
  if (timeline.metadata().getString("ddp") == std::optional<std::string_view>("none")) {
    return invalidArgument(
        origin +
        ": the traced job does not use DDP (its import found no DistributedDataParallel.forward "
        "range, no reducer op and no allreduce): replay and calibrate answer what-ifs of DDP "
        "jobs; profile the job with its model wrapped in DistributedDataParallel (ddpscope "
        "simulate predicts a DDP version of the model without a trace)");
  }
  return Status::ok();
}

// Sums over the copy-in samples (x: bytes, y: nanoseconds) for the least-squares fit.
struct CopyFitSums {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
};

// The sweep over the ranks' iterations: its inputs, and what it gathers beside the samples it
// adds to the profile itself.
struct ProfileSweep {
  const models::ModelSpec& model;
  const std::string& origin;
  int64_t skip;  // iterations up to this index are not measured
  CopyFitSums copyFit;
  // Collectives per rank: (iteration, ordinal) → span.
  std::map<std::pair<int64_t, int>, std::vector<std::pair<int, const Span*>>> collectiveByKey;
  std::map<const Span*, double> commShare;  // every comm span: ownShares on its rank
  std::map<int64_t, Nanos> stepByIteration;
  std::map<int, std::vector<double>> rankSteps;
  bool anyIteration = false;
  int orderRank = 0;  // the rank whose forward order the profile keeps (the lowest)
};

// One rank's compute, copy and comm spans, each list by start, and the union of its comm spans.
RankSpans rankSpansByStart(const traces::RankTrack& track) {
  RankSpans spans;
  spans.rank = track.rank;
  for (const traces::Lane& lane : track.lanes) {
    for (const Span& s : lane.spans) {
      if (s.category == Category::kCopy) {
        spans.copies.push_back(&s);
      } else if (lane.kind == traces::LaneKind::kComm && traces::isCommunication(s.category)) {
        spans.comm.push_back(&s);
      } else if (lane.kind == traces::LaneKind::kCompute &&
                 (s.category == Category::kForward || s.category == Category::kBackward ||
                  s.category == Category::kOptimizer)) {
        spans.compute.push_back(&s);
      }
    }
  }
  auto byStart = [](const Span* a, const Span* b) { return traces::spanPrecedes(*a, *b); };
  std::sort(spans.compute.begin(), spans.compute.end(), byStart);
  std::sort(spans.copies.begin(), spans.copies.end(), byStart);
  std::sort(spans.comm.begin(), spans.comm.end(), byStart);
  std::vector<std::pair<int64_t, int64_t>> commIntervals;
  for (const Span* s : spans.comm) commIntervals.emplace_back(s->start.count(), s->end().count());
  spans.commMerged = mergeIntervals(std::move(commIntervals));
  return spans;
}

// The collectives of an iteration's window (from cursor `mi`, moved to the window's first), keyed
// by (iteration, ordinal) for the comm fit, measured or not; counts those without bytes in the
// profile. Returns the end of the window's last collective (zero when none).
Nanos keyIterationCollectives(const RankSpans& spans, const traces::Iteration& it, size_t& mi,
                              ProfileSweep& sweep, MeasuredProfile& p) {
  const int64_t a = it.start.count(), b = it.end().count();
  int ordinal = 0;
  while (mi < spans.comm.size() && spans.comm[mi]->start.count() < a) ++mi;
  Nanos lastCommEnd;
  for (size_t k = mi; k < spans.comm.size() && spans.comm[k]->start.count() < b; ++k) {
    sweep.collectiveByKey[{it.index, ordinal++}].emplace_back(spans.rank, spans.comm[k]);
    if (!spans.comm[k]->args.contains(traces::kArgBytes)) ++p.collectivesWithUnknownBytes;
    lastCommEnd = std::max(lastCommEnd, spans.comm[k]->end());
  }
  return lastCommEnd;
}

// What an iteration's copies add up to.
struct IterationCopies {
  Nanos copyBackTotal;  // DDP's copy-backs (bucket to grad)
  bool anyCopyBack = false;
  Nanos lastCopyEnd;
};

// The copies of an iteration (from index `pi`): copy-ins are samples of the copy fit (counted
// in the profile), copy-backs are summed.
IterationCopies sampleIterationCopies(const RankSpans& spans, size_t pi,
                                      const traces::Iteration& it, ProfileSweep& sweep,
                                      MeasuredProfile& p) {
  IterationCopies copies;
  CopyFitSums& f = sweep.copyFit;
  const int64_t b = it.end().count();
  for (size_t k = pi; k < spans.copies.size() && spans.copies[k]->start.count() < b; ++k) {
    const Span& c = *spans.copies[k];
    copies.lastCopyEnd = std::max(copies.lastCopyEnd, c.end());
    if (isCopyBack(c)) {
      copies.copyBackTotal += c.duration;
      copies.anyCopyBack = true;
    } else {
      const double x = static_cast<double>(*c.args.getInt(traces::kArgBytes));
      const double y = static_cast<double>(c.duration.count());
      f.sx += x, f.sy += y, f.sxx += x * x, f.sxy += x * y;
      ++p.copySamples;
    }
  }
  return copies;
}

// The model layer a forward or backward span names; -1 for the CUDA runtime's loss head, which
// is no layer of the model (its time stays in the gap the next layer's span closes, as the CPU
// runtime's does: it records no span for it). An error for any other unknown name.
StatusOr<int> layerOfSpan(const Span& s, bool backward, const RankSpans& spans,
                          const traces::Iteration& it, const ProfileSweep& sweep) {
  const std::string layerName = backward ? stripBackwardSuffix(s.name) : s.name;
  const int layer = sweep.model.findLayer(layerName);
  if (layer < 0 && (s.name == traces::kLossHeadSpan || s.name == traces::kLossHeadBackwardSpan)) {
    return -1;
  }
  if (layer < 0) {
    return invalidArgument(sweep.origin + ": rank " + std::to_string(spans.rank) + " iteration " +
                           std::to_string(it.index) + ": " + (backward ? "backward" : "forward") +
                           " span '" + s.name + "' names no layer of model '" + sweep.model.name +
                           "' (its layers: " + layerList(sweep.model) +
                           "); give the model the trace was recorded with (--model)");
  }
  return layer;
}

// A layer span's attributed time: from the previous compute span's end to its own, less the
// copy-ins between them and, before a forward span, the blocking collectives in the gap; never
// less than the span itself. Its comm overlap is the share of that time with a collective in
// flight.
LayerSample attributeLayerTime(const Span& s, bool backward, Nanos prevEnd, Nanos copiesBetween,
                               const RankSpans& spans, const traces::Iteration& it) {
  // A blocking collective in the gap before a forward span (DDP's buffer broadcast before the
  // first layer, SyncBatchNorm's allreduces) is not the layer's time either: the simulator
  // times it itself. Backward gaps keep theirs: the bucket allreduces there run beside the host.
  const Nanos commBefore =
      backward || s.start <= prevEnd
          ? Nanos::zero()
          : Nanos(coveredLength(spans.commMerged, prevEnd.count(), s.start.count()));
  Nanos attributed = s.end() - prevEnd - copiesBetween - commBefore;
  if (attributed < s.duration) attributed = s.duration;
  const int64_t lo = s.end().count() - attributed.count();
  const double overlap =
      attributed.count() > 0
          ? static_cast<double>(coveredLength(spans.commMerged, lo, s.end().count())) /
                static_cast<double>(attributed.count())
          : 0.0;
  LayerSample sample{spans.rank, it.index, attributed, std::clamp(overlap, 0.0, 1.0)};
  if (auto kernels = s.args.getInt(traces::kArgKernelNs)) sample.kernels = Nanos(*kernels);
  return sample;
}

// What an iteration's compute spans tell its tail.
struct IterationLayers {
  bool hasOptimizer = false;
  Nanos lastBackwardEnd;
};

// The forward and backward layer samples of an iteration (compute spans from index `ci`, copies
// from `pi`) into the profile; copy-ins between the previous compute span and a layer's are not
// the layer's time.
StatusOr<IterationLayers> sampleIterationLayers(const RankSpans& spans, size_t ci, size_t pi,
                                                const traces::Iteration& it,
                                                const ProfileSweep& sweep, MeasuredProfile& p) {
  IterationLayers layers;
  layers.lastBackwardEnd = it.start;
  Nanos prevEnd = it.start;
  std::vector<int> forwardOrder;
  std::vector<bool> ranForward(sweep.model.layers.size(), false);
  size_t copyCursor = pi;
  const int64_t b = it.end().count();
  for (size_t k = ci; k < spans.compute.size() && spans.compute[k]->start.count() < b; ++k) {
    const Span& s = *spans.compute[k];
    if (s.category == Category::kOptimizer) {
      layers.hasOptimizer = true;
      continue;
    }
    const bool backward = s.category == Category::kBackward;
    ASSIGN_OR_RETURN(const int layer, layerOfSpan(s, backward, spans, it, sweep));
    if (layer < 0) continue;  // the loss head
    // Copy-ins between the previous compute span and this one are not this layer's time.
    Nanos copiesBetween;
    while (copyCursor < spans.copies.size() &&
           spans.copies[copyCursor]->start.count() < s.start.count()) {
      const Span& c = *spans.copies[copyCursor];
      if (c.start >= prevEnd && !isCopyBack(c)) copiesBetween += c.duration;
      ++copyCursor;
    }
    const LayerSample sample = attributeLayerTime(s, backward, prevEnd, copiesBetween, spans, it);
    if (sample.kernels && sample.kernels->count() < 0) {
      return invalidArgument(sweep.origin + ": rank " + std::to_string(spans.rank) + " iteration " +
                             std::to_string(it.index) + ": span '" + s.name + "': args." +
                             std::string(traces::kArgKernelNs) + ": expected a time ≥ 0 (ns)");
    }
    (backward ? p.backward : p.forward)[static_cast<size_t>(layer)].push_back(sample);
    prevEnd = s.end();
    if (backward) layers.lastBackwardEnd = std::max(layers.lastBackwardEnd, s.end());
    if (!backward && !ranForward[static_cast<size_t>(layer)]) {
      ranForward[static_cast<size_t>(layer)] = true;
      forwardOrder.push_back(layer);
    }
  }
  if (spans.rank == sweep.orderRank) p.forwardOrder = std::move(forwardOrder);
  return layers;
}

// A measured iteration of one rank: its step time, copy-in and layer samples, its copy-back
// total and, when it synced, its tail (from the last backward, copy or collective to its end).
Status sampleMeasuredIteration(const RankSpans& spans, const traces::Iteration& it, size_t ci,
                               size_t pi, Nanos lastCommEnd, ProfileSweep& sweep,
                               MeasuredProfile& p) {
  auto& step = sweep.stepByIteration[it.index];
  step = std::max(step, it.duration);
  sweep.rankSteps[spans.rank].push_back(static_cast<double>(it.duration.count()));
  const IterationCopies copies = sampleIterationCopies(spans, pi, it, sweep, p);
  ASSIGN_OR_RETURN(const IterationLayers layers,
                   sampleIterationLayers(spans, ci, pi, it, sweep, p));
  if (copies.anyCopyBack) p.copyBack.push_back({spans.rank, it.index, copies.copyBackTotal, 0});
  const bool synced =
      layers.hasOptimizer || lastCommEnd > Nanos::zero() || p.settings.ddp.noSyncPeriod == 1;
  if (synced) {
    Nanos tailStart = std::max({layers.lastBackwardEnd, copies.lastCopyEnd, lastCommEnd});
    if (tailStart > it.end()) tailStart = it.end();
    p.tail.push_back({spans.rank, it.index, it.end() - tailStart, 0});
  }
  return Status::ok();
}

// One rank's iterations: the collectives of every window, the samples of the measured ones.
Status sampleRank(const traces::Timeline& timeline, int ri, ProfileSweep& sweep,
                  MeasuredProfile& p) {
  const RankSpans spans = rankSpansByStart(timeline.rank(ri));
  for (const auto& [span, share] : ownShares(spans.comm)) sweep.commShare[span] = share;
  const std::vector<traces::Iteration> iterations = timeline.iterations(ri);
  if (!iterations.empty()) sweep.anyIteration = true;
  size_t ci = 0, pi = 0, mi = 0;  // the first compute span, copy, collective of the window
  for (const traces::Iteration& it : iterations) {
    const int64_t a = it.start.count();
    // Collectives of this window (also outside measured ones, for the comm fit).
    const Nanos lastCommEnd = keyIterationCollectives(spans, it, mi, sweep, p);
    const bool measured = it.index > sweep.skip;
    while (ci < spans.compute.size() && spans.compute[ci]->start.count() < a) ++ci;
    while (pi < spans.copies.size() && spans.copies[pi]->start.count() < a) ++pi;
    if (!measured) continue;
    RETURN_IF_ERROR(sampleMeasuredIteration(spans, it, ci, pi, lastCommEnd, sweep, p));
  }
  return Status::ok();
}

// The measured iterations and their steps (the slowest rank's), the median step and how much
// the slowest rank exceeds a typical one; an error when no iteration is left after the skip.
Status summarizeMeasuredSteps(const ProfileSweep& sweep, MeasuredProfile& p) {
  for (const auto& [index, step] : sweep.stepByIteration) {
    p.measuredIterations.push_back(index);
    p.iterationSteps.push_back(step);
  }
  if (p.measuredIterations.empty()) {
    return invalidArgument(sweep.origin + ": no measured iterations after skipping the first " +
                           std::to_string(sweep.skip) +
                           " (warm-up and bucket rebuild); record more iterations");
  }
  std::vector<double> steps;
  for (Nanos s : p.iterationSteps) steps.push_back(static_cast<double>(s.count()));
  p.measuredStep = Nanos(static_cast<int64_t>(std::llround(median(steps))));
  double rankMedians = 0;
  for (auto& [rank, values] : sweep.rankSteps) rankMedians += median(values);
  if (!sweep.rankSteps.empty() && rankMedians > 0) {
    rankMedians /= static_cast<double>(sweep.rankSteps.size());
    p.rankMaxFactor = std::max(1.0, median(steps) / rankMedians);
  }
  return Status::ok();
}

// An error naming the first layer without a forward sample (the trace is of another model),
// except unused layers and layers without a module of their own: any layer in a GPU trace whose
// kernels were named through ddpscope.layer: ranges (or a CPU trace whose ops were), a layer
// without parameters in a trace of the live recorder.
Status checkLayersHaveForward(const traces::Timeline& timeline, const ProfileSweep& sweep,
                              const MeasuredProfile& p) {
  // Neither has a span for a layer without a module of its own (the exporter's residual adds,
  // attention cores, ops between two child calls): ddpscope.layer ranges and the recorder's
  // module hooks both open on modules. Its work runs in the gap before the next layer's span,
  // whose attributed time holds it. The recorder hooks every module that owns parameters, so a
  // layer with parameters and no span is still another model's.
  const std::optional<std::string_view> layerSpans = timeline.metadata().getString("layer_spans");
  const bool rangeNamedKernels =
      layerSpans == std::optional<std::string_view>("gpu-kernels-by-range") ||
      layerSpans == std::optional<std::string_view>("cpu-ops-by-range");
  // A CPU trace matched to the layers by kind has no span for a layer of a type without an op
  // the match knows (a matrix product, an activation written out): its ops ran, as host ops in
  // the gap before the next layer's span.
  const bool opsByKind = layerSpans == std::optional<std::string_view>("cpu-ops-by-kind");
  const bool moduleHooks = timeline.metadata().getString("recorder") ==
                           std::optional<std::string_view>("ddpscope.torch.record");
  const models::ModelSpec& model = sweep.model;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const models::LayerSpec& layer = model.layers[l];
    const bool noModule = rangeNamedKernels || (moduleHooks && layer.params.empty()) ||
                          (opsByKind && traces::layerKind(layer.type).empty());
    if (p.forward[l].empty() && !layer.use && !noModule) {
      return invalidArgument(sweep.origin + ": layer '" + layer.name + "' of model '" + model.name +
                             "' has no forward span in the measured iterations (is this the "
                             "model the trace was recorded with?)");
    }
  }
  return Status::ok();
}

// The copy-in fit from its sums: least squares, or a pure rate through the origin when that is
// degenerate (one size, or noise); nothing without samples.
void fitCopyIn(const CopyFitSums& f, MeasuredProfile& p) {
  if (p.copySamples <= 0) return;
  const double n = p.copySamples;
  const double det = n * f.sxx - f.sx * f.sx;
  if (p.copySamples >= 2 && det > 0) {
    p.copyNsPerByte = (n * f.sxy - f.sx * f.sy) / det;
    p.copyInterceptNs = (f.sy - p.copyNsPerByte * f.sx) / n;
  }
  if (p.copySamples < 2 || det <= 0 || p.copyNsPerByte < 0 || p.copyInterceptNs < 0) {
    // Degenerate (one size, or noise): a pure rate through the origin.
    p.copyInterceptNs = 0;
    p.copyNsPerByte = f.sxx > 0 ? f.sxy / f.sxx : 0;
  }
}

// One collective sample per (iteration, ordinal) whose ranks agree on its size: from the last
// rank's start to the last rank's end, scaled by the ranks' mean own share of that time.
void addCollectiveSamples(const ProfileSweep& sweep, MeasuredProfile& p) {
  for (const auto& [key, members] : sweep.collectiveByKey) {
    const Span& first = *members.front().second;
    auto bytes = first.args.getInt(traces::kArgBytes);
    if (!bytes) continue;
    CollectiveSample c;
    c.category = first.category;
    c.name = first.name;
    c.bytes = *bytes;
    c.iteration = key.first;
    c.measured = key.first > sweep.skip;
    bool consistent = true;
    double sharedFraction = 0;
    for (const auto& [rank, span] : members) {
      if (span->args.getInt(traces::kArgBytes) != bytes) consistent = false;
      c.start = std::max(c.start, span->start);
      c.end = std::max(c.end, span->end());
      sharedFraction += sweep.commShare.at(span);
    }
    if (!consistent) continue;  // ranks disagree on what this collective was: not a sample
    sharedFraction /= static_cast<double>(members.size());
    c.duration = Nanos(static_cast<int64_t>(std::llround(
        static_cast<double>(std::max(Nanos::zero(), c.end - c.start).count()) * sharedFraction)));
    p.collectives.push_back(std::move(c));
  }
}

// The metadata "gpu" (traces/traced_gpu.h); nullopt without it.
StatusOr<std::optional<traces::TracedGpu>> readTracedGpu(const traces::Timeline& timeline,
                                                         const std::string& origin) {
  const std::optional<std::string_view> text = timeline.metadata().getString("gpu");
  if (!text) return std::optional<traces::TracedGpu>();
  ASSIGN_OR_RETURN(traces::TracedGpu gpu, traces::parseTracedGpuJson(*text, origin));
  return std::optional<traces::TracedGpu>(std::move(gpu));
}

}  // namespace

StatusOr<MeasuredProfile> buildProfile(const traces::Timeline& timeline,
                                       const models::ModelSpec& model, const std::string& origin,
                                       const ProfileOptions& options) {
  MeasuredProfile p;
  p.origin = origin;
  RETURN_IF_ERROR(checkTraceUsesDdp(timeline, origin));
  ASSIGN_OR_RETURN(p.settings, readRunSettings(timeline, origin));
  if (auto facts = timeline.metadata().getString("host_facts")) p.hostFacts = std::string(*facts);
  if (auto trace = timeline.metadata().getString("host_facts_trace")) {
    p.hostFactsTrace = std::string(*trace);
  }
  ASSIGN_OR_RETURN(p.gpu, readTracedGpu(timeline, origin));
  if (!model.hasLayers()) {
    return invalidArgument(origin + ": model '" + model.name +
                           "' has no layers; replay needs per-layer spans");
  }
  const int64_t skip = options.skipIterations.value_or(defaultSkip(timeline, p.settings));
  const size_t numLayers = model.layers.size();
  p.forward.assign(numLayers, {});
  p.backward.assign(numLayers, {});
  p.numRanks = timeline.rankCount();

  ProfileSweep sweep{model, origin, skip};
  if (timeline.rankCount() > 0) sweep.orderRank = timeline.rank(0).rank;
  for (int ri = 0; ri < timeline.rankCount(); ++ri) {
    RETURN_IF_ERROR(sampleRank(timeline, ri, sweep, p));
  }
  if (!sweep.anyIteration) {
    return invalidArgument(origin +
                           ": no iteration windows (ProfilerStep#N spans of category "
                           "'iteration'); replay needs them to find the steps");
  }
  RETURN_IF_ERROR(summarizeMeasuredSteps(sweep, p));
  RETURN_IF_ERROR(checkLayersHaveForward(timeline, sweep, p));
  fitCopyIn(sweep.copyFit, p);
  addCollectiveSamples(sweep, p);
  return p;
}

MeasuredProfile oneIteration(const MeasuredProfile& profile, int64_t iteration) {
  MeasuredProfile p = profile;
  auto ofIteration = [&](std::vector<LayerSample>& samples) {
    std::vector<LayerSample> kept;
    for (const LayerSample& s : samples) {
      if (s.iteration == iteration) kept.push_back(s);
    }
    if (!kept.empty()) samples = std::move(kept);
  };
  for (auto* pass : {&p.forward, &p.backward}) {
    for (std::vector<LayerSample>& samples : *pass) ofIteration(samples);
  }
  ofIteration(p.tail);
  ofIteration(p.copyBack);
  for (CollectiveSample& c : p.collectives) c.measured = c.measured && c.iteration == iteration;
  for (size_t k = 0; k < profile.measuredIterations.size(); ++k) {
    if (profile.measuredIterations[k] != iteration) continue;
    p.measuredIterations = {iteration};
    p.iterationSteps = {profile.iterationSteps[k]};
    p.measuredStep = profile.iterationSteps[k];
  }
  return p;
}

std::vector<int> runLayerOrder(const models::ModelSpec& model, const MeasuredProfile& profile) {
  const int numLayers = static_cast<int>(model.layers.size());
  std::vector<bool> placed(model.layers.size(), false), ran(model.layers.size(), false);
  std::vector<int> order;
  bool listed = true;  // the run's layers come in the model's order
  for (int l : profile.forwardOrder) {
    if (l >= 0 && l < numLayers && !placed[static_cast<size_t>(l)]) {
      placed[static_cast<size_t>(l)] = ran[static_cast<size_t>(l)] = true;
      if (!order.empty() && l < order.back()) listed = false;
      order.push_back(l);
    }
  }
  if (listed) return {};  // nothing the run did contradicts the listed order
  // Each layer the run has no span of goes right after the last placed of its producers (its
  // "inputs", else the previous listed layer), after those placed there before it.
  for (int l = 0; l < numLayers; ++l) {
    if (placed[static_cast<size_t>(l)]) continue;
    const models::LayerSpec& layer = model.layers[static_cast<size_t>(l)];
    std::vector<int> producers;
    for (const std::string& input : layer.inputs) producers.push_back(model.findLayer(input));
    if (layer.inputs.empty()) producers.push_back(l - 1);
    ptrdiff_t at = -1;
    for (int p : producers) {
      if (p < 0 || !placed[static_cast<size_t>(p)]) continue;
      at = std::max(at, std::find(order.begin(), order.end(), p) - order.begin());
    }
    while (at + 1 < static_cast<ptrdiff_t>(order.size()) &&
           !ran[static_cast<size_t>(order[static_cast<size_t>(at + 1)])]) {
      ++at;
    }
    order.insert(order.begin() + (at + 1), l);
    placed[static_cast<size_t>(l)] = true;
  }
  for (int l = 0; l < numLayers; ++l) {
    if (order[static_cast<size_t>(l)] != l) return order;
  }
  return {};
}

std::string layerOrderNote(const models::ModelSpec& model, const std::vector<int>& ran) {
  // Longest increasing subsequence of `ran` (patience sorting with back links).
  std::vector<size_t> tails, before(ran.size(), ran.size());
  for (size_t i = 0; i < ran.size(); ++i) {
    auto it = std::lower_bound(tails.begin(), tails.end(), ran[i],
                               [&](size_t t, int v) { return ran[t] < v; });
    if (it != tails.begin()) before[i] = *std::prev(it);
    if (it == tails.end()) {
      tails.push_back(i);
    } else {
      *it = i;
    }
  }
  std::vector<bool> kept(ran.size(), false);
  for (size_t i = tails.empty() ? ran.size() : tails.back(); i < ran.size(); i = before[i]) {
    kept[i] = true;
  }
  size_t moved = 0, first = ran.size();
  for (size_t i = 0; i < ran.size(); ++i) {
    if (kept[i]) continue;
    ++moved;
    if (first == ran.size()) first = i;
  }
  if (moved == 0) return "";
  std::string where;
  for (size_t i = first + 1; i < ran.size(); ++i) {
    if (kept[i]) {
      where = " before " + model.layers[static_cast<size_t>(ran[i])].name;
      break;
    }
  }
  return "the run's forward called " + std::to_string(moved) + " of its " +
         std::to_string(ran.size()) + " layers elsewhere than model '" + model.name +
         "' lists them (first " + model.layers[static_cast<size_t>(ran[first])].name + where +
         "); autograd readies gradients in reverse forward order, so replay, plan --from-trace "
         "and --compute-from run the layers, and rebuild the buckets, in the run's order";
}

StatusOr<LoadedProfile> loadProfile(const std::string& tracePath,
                                    const std::optional<models::ModelSpec>& model,
                                    const ProfileOptions& options) {
  ASSIGN_OR_RETURN(traces::Timeline timeline, traces::readChromeTrace(tracePath));
  LoadedProfile loaded;
  if (model) {
    loaded.model = *model;
  } else {
    ASSIGN_OR_RETURN(RunSettings settings, readRunSettings(timeline, tracePath));
    ASSIGN_OR_RETURN(loaded.model, modelForTrace(settings, tracePath));
  }
  ASSIGN_OR_RETURN(loaded.profile, buildProfile(timeline, loaded.model, tracePath, options));
  const std::vector<int> order = runLayerOrder(loaded.model, loaded.profile);
  if (order.empty()) return loaded;
  MeasuredProfile& p = loaded.profile;
  p.layerOrderNote = layerOrderNote(loaded.model, p.forwardOrder);
  ASSIGN_OR_RETURN(loaded.model, loaded.model.withLayerOrder(order));
  loaded.model.origin += ", its layers in the run's forward order";
  std::vector<int> newIndex(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    newIndex[static_cast<size_t>(order[i])] = static_cast<int>(i);
  auto reorder = [&](std::vector<std::vector<LayerSample>>& perLayer) {
    std::vector<std::vector<LayerSample>> out(perLayer.size());
    for (size_t i = 0; i < order.size(); ++i) {
      out[i] = std::move(perLayer[static_cast<size_t>(order[i])]);
    }
    perLayer = std::move(out);
  };
  reorder(p.forward);
  reorder(p.backward);
  for (int& l : p.forwardOrder) l = newIndex[static_cast<size_t>(l)];
  return loaded;
}

}  // namespace ddpscope::sim::replay
