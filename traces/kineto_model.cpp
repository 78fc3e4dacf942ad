#include "traces/kineto_model.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "traces/kineto_kinds.h"

namespace ddpscope::traces {
namespace {

constexpr std::string_view kAccumulateGrad = "torch::autograd::AccumulateGrad";
constexpr std::string_view kDdpForward = "DistributedDataParallel.forward";

struct Window {
  int64_t index = 0;
  Nanos start, end;
};

// Whether a host span is an op (Kineto's cpu_op); annotations and DDP's ranges are containers the
// walks below descend into.
bool isOp(const Span& s) {
  return s.args.getString("cat") == std::optional<std::string_view>("cpu_op") &&
         !s.name.starts_with("DistributedDataParallel.");
}

// The profiler's "Input type" of a gradient as a model dtype.
std::optional<std::string> modelDtype(std::string_view kinetoType) {
  static const std::map<std::string_view, std::string_view> kTypes = {
      {"float", "float32"},  {"c10::BFloat16", "bfloat16"}, {"c10::Half", "float16"},
      {"double", "float64"}, {"BFloat16", "bfloat16"},      {"Half", "float16"},
      {"Float", "float32"},  {"Double", "float64"},
  };
  auto it = kTypes.find(kinetoType);
  if (it == kTypes.end()) return std::nullopt;
  return std::string(it->second);
}

// The first input's dims and type of an op recorded with record_shapes (nullopt without).
struct FirstInput {
  std::vector<int64_t> shape;
  std::string type;
};
std::optional<FirstInput> firstInput(const Args& args) {
  auto dims = args.getString("Input Dims");
  if (!dims) return std::nullopt;
  nlohmann::json parsed = nlohmann::json::parse(*dims, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array() || parsed.empty() || !parsed[0].is_array()) return std::nullopt;
  FirstInput in;
  for (const auto& d : parsed[0]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) return std::nullopt;
    in.shape.push_back(d.get<int64_t>());
  }
  if (auto types = args.getString("Input type")) {
    nlohmann::json t = nlohmann::json::parse(*types, nullptr, false);
    if (t.is_array() && !t.empty() && t[0].is_string()) in.type = t[0].get<std::string>();
  }
  return in;
}

// A layer type for an op of a known kind ("Conv" → "Conv2d", "BatchNorm" → "BatchNorm2d").
std::string layerTypeOf(std::string_view opName, std::string_view kind) {
  if (kind == "Conv") return opName == "aten::conv1d" ? "Conv1d" : "Conv2d";
  if (kind == "BatchNorm") return "BatchNorm2d";
  return std::string(kind);
}

std::vector<Window> iterationWindows(const RankTrack& track) {
  std::vector<Window> windows;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (!s.name.starts_with("ProfilerStep#")) continue;
      int64_t index = 0;
      for (char c : std::string_view(s.name).substr(13)) {
        if (c < '0' || c > '9' || index > (INT64_MAX - 9) / 10) break;
        index = index * 10 + (c - '0');
      }
      windows.push_back({index, s.start, s.end()});
    }
  }
  std::sort(windows.begin(), windows.end(),
            [](const Window& a, const Window& b) { return a.start < b.start; });
  return windows;
}

// What one step holds, from every host lane.
struct StepEvents {
  struct Range {
    std::string name;  // "<path>" or "<path>:k"
    Nanos start, end;
    size_t lane;
  };
  struct TopOp {
    std::string_view name;
    std::string_view kind;  // forwardOpKind: "" for ops of no known kind
    Nanos start, end;
    size_t lane;
  };
  struct Node {
    Nanos start;
    std::string_view name;
    std::optional<int64_t> sequence;
    std::optional<FirstInput> gradient;  // AccumulateGrad: the gradient
    bool accumulate = false;
  };
  std::vector<Range> ranges;
  std::vector<TopOp> topOps;               // the forward's top-level ops, by start
  std::map<int64_t, Nanos> sequenceStart;  // sequence number → start of its forward op
  std::vector<Node> nodes;                 // autograd nodes, by start
  bool ddpForward = false;
};

StepEvents stepEvents(const RankTrack& track, const Window& w) {
  StepEvents out;
  std::vector<std::pair<Nanos, Nanos>> forwards;
  for (const Lane& lane : track.lanes) {
    if (lane.kind != LaneKind::kHost) continue;
    for (const Span& s : lane.spans) {
      if (s.name.starts_with(kDdpForward) && s.start >= w.start && s.start < w.end) {
        forwards.emplace_back(s.start, s.end());
      }
    }
  }
  out.ddpForward = !forwards.empty();
  auto inForward = [&](Nanos t) {
    return std::any_of(forwards.begin(), forwards.end(),
                       [&](const auto& f) { return t >= f.first && t < f.second; });
  };
  for (size_t li = 0; li < track.lanes.size(); ++li) {
    const Lane& lane = track.lanes[li];
    if (lane.kind != LaneKind::kHost) continue;
    std::map<std::string, int> calls;  // per thread, as the import numbers a module's calls
    struct Open {
      Nanos end;
      int node;  // index into out.nodes, or -1
      bool op;
    };
    std::vector<Open> open;
    for (const Span& s : lane.spans) {
      if (s.start < w.start || s.start >= w.end) continue;
      while (!open.empty() && open.back().end <= s.start) open.pop_back();
      int node = -1;
      bool underOp = false;
      for (const Open& o : open) {
        if (o.node >= 0) node = o.node;
        underOp = underOp || o.op;
      }
      const std::string_view name = s.name;
      if (name.starts_with(kAutogradNodePrefix)) {
        StepEvents::Node n{s.start, name.substr(kAutogradNodePrefix.size()), std::nullopt,
                           std::nullopt, false};
        n.accumulate = n.name == kAccumulateGrad;
        out.nodes.push_back(n);
        open.push_back({s.end(), static_cast<int>(out.nodes.size() - 1), true});
        continue;
      }
      const std::optional<int64_t> sequence = s.args.getInt("Sequence number");
      if (node >= 0) {
        StepEvents::Node& n = out.nodes[static_cast<size_t>(node)];
        if (sequence && !n.sequence) n.sequence = sequence;
        if (n.accumulate && name == kAccumulateGrad && !n.gradient) n.gradient = firstInput(s.args);
      } else {
        // The op that creates a node is the last recorded with its sequence number: an op that
        // creates none shows the number the next one will take (BatchNorm's
        // num_batches_tracked += 1 before its batch_norm).
        if (sequence) out.sequenceStart[*sequence] = s.start;
        if (name.starts_with(kLayerRangePrefix)) {
          std::string path(name.substr(kLayerRangePrefix.size()));
          const int call = ++calls[path];
          if (call > 1) path.append(1, ':').append(std::to_string(call));
          out.ranges.push_back({std::move(path), s.start, s.end(), li});
        }
        if (isOp(s) && !underOp && inForward(s.start)) {
          out.topOps.push_back({name, forwardOpKind(name), s.start, s.end(), li});
        }
      }
      open.push_back({s.end(), -1, isOp(s)});
    }
  }
  auto byStart = [](const auto& a, const auto& b) { return a.start < b.start; };
  std::stable_sort(out.ranges.begin(), out.ranges.end(), byStart);
  std::stable_sort(out.topOps.begin(), out.topOps.end(), byStart);
  std::stable_sort(out.nodes.begin(), out.nodes.end(), byStart);
  return out;
}

// The layers of a step, in forward order, and the interval of each layer that owns what runs
// inside it (the innermost ranges, or the ops of a known kind that autograd differentiates).
struct StepLayers {
  std::vector<ImportLayer> layers;
  std::vector<std::pair<std::pair<Nanos, Nanos>, int>> owners;  // interval → layer, by start

  // The layer whose interval holds t, or -1 (the intervals do not overlap).
  int at(Nanos t) const {
    auto it = std::upper_bound(owners.begin(), owners.end(), t,
                               [](Nanos v, const auto& o) { return v < o.first.first; });
    if (it == owners.begin()) return -1;
    --it;
    return t < it->first.second ? it->second : -1;
  }
};

// Layers from the innermost ranges, plus one "<path>.ops" layer of type "Functional" for each
// module that runs ops itself outside its children (a residual add, an attention core), where the
// first of them runs: the host work of those ops is the module's, not a child's.
StepLayers layersFromRanges(const StepEvents& step) {
  const auto& ranges = step.ranges;
  std::vector<bool> leaf(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    // A leaf holds no other range of its thread (of two equal intervals, the later is inside).
    leaf[i] = std::none_of(ranges.begin(), ranges.end(), [&](const auto& q) {
      const size_t j = static_cast<size_t>(&q - ranges.data());
      return j != i && q.lane == r.lane && q.start >= r.start && q.end <= r.end &&
             (q.start > r.start || q.end < r.end || j > i);
    });
  }
  // The innermost range of the op's thread that holds it, or -1.
  auto innermost = [&](const StepEvents::TopOp& op) {
    int best = -1;
    for (size_t i = 0; i < ranges.size() && ranges[i].start <= op.start; ++i) {
      if (ranges[i].lane != op.lane || op.start >= ranges[i].end) continue;
      if (best < 0 ||
          ranges[i].end - ranges[i].start <=
              ranges[static_cast<size_t>(best)].end - ranges[static_cast<size_t>(best)].start) {
        best = static_cast<int>(i);
      }
    }
    return best;
  };
  struct Entry {
    Nanos start;
    ImportLayer layer;
    std::optional<std::pair<Nanos, Nanos>> owns;
  };
  std::vector<Entry> entries;
  std::vector<std::string> types(ranges.size(), "Module");
  std::vector<bool> typed(ranges.size(), false);
  std::set<std::string> functional;
  for (const auto& op : step.topOps) {
    const int in = innermost(op);
    if (in < 0) continue;  // the model's own forward, outside its modules
    const size_t r = static_cast<size_t>(in);
    if (leaf[r]) {
      // Its first op of a kind other than Add (a BatchNorm counts its batches with add_ first);
      // a module of adds alone stays a "Module" (a module call, unlike a functional add).
      if (!typed[r] && !op.kind.empty() && op.kind != "Add") {
        types[r] = layerTypeOf(op.name, op.kind);
        typed[r] = true;
      }
      continue;
    }
    const std::string& name = ranges[r].name;
    const std::string path = name.substr(0, name.find(':'));
    if (functional.insert(path).second) {
      entries.push_back({op.start, {path + ".ops", "Functional"}, std::nullopt});
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (leaf[i]) {
      entries.push_back({ranges[i].start,
                         {ranges[i].name, types[i]},
                         std::make_pair(ranges[i].start, ranges[i].end)});
    }
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  StepLayers out;
  for (Entry& e : entries) {
    if (e.owns) out.owners.push_back({*e.owns, static_cast<int>(out.layers.size())});
    out.layers.push_back(std::move(e.layer));
  }
  return out;
}

StepLayers layersFromOps(const StepEvents& step, std::vector<int64_t>* opStarts = nullptr) {
  // Ops of a known kind whose autograd node runs in the backward (a kind op on integers, say,
  // has none).
  std::set<size_t> differentiated;
  for (const auto& n : step.nodes) {
    if (!n.sequence) continue;
    auto start = step.sequenceStart.find(*n.sequence);
    if (start == step.sequenceStart.end()) continue;
    for (size_t i = 0; i < step.topOps.size(); ++i) {
      const auto& op = step.topOps[i];
      if (start->second >= op.start && start->second < op.end) {
        if (!op.kind.empty()) differentiated.insert(i);
        break;
      }
    }
  }
  StepLayers out;
  std::map<std::string, int> count;
  for (size_t i : differentiated) {
    const auto& op = step.topOps[i];
    const std::string base(op.name.substr(6));  // "aten::conv2d" → "conv2d"
    out.owners.push_back({{op.start, op.end}, static_cast<int>(out.layers.size())});
    if (opStarts != nullptr) opStarts->push_back(op.start.count());
    out.layers.push_back(
        {base + "." + std::to_string(count[base]++), layerTypeOf(op.name, op.kind)});
  }
  return out;
}

}  // namespace

StatusOr<TraceModel> readTraceModel(const RankTrack& track, const std::string& path) {
  const std::vector<Window> windows = iterationWindows(track);
  if (windows.empty()) {
    return invalidArgument(path +
                           ": no ProfilerStep#N range: the model is read from one "
                           "profiled step (torch.profiler.profile with a schedule, "
                           "prof.step() after each step)");
  }
  // The last step whose backward accumulates gradients (a step the profile cut short has none).
  std::optional<StepEvents> step;
  int64_t iteration = 0;
  for (auto w = windows.rbegin(); w != windows.rend() && !step; ++w) {
    StepEvents events = stepEvents(track, *w);
    if (std::any_of(events.nodes.begin(), events.nodes.end(),
                    [](const StepEvents::Node& n) { return n.accumulate; })) {
      step = std::move(events);
      iteration = w->index;
    }
  }
  if (!step) {
    return invalidArgument(path + ": no " + std::string(kAccumulateGrad) +
                           " node in any profiled step: the parameters are read from the "
                           "backward's gradient accumulation (profile the backward with CPU "
                           "activities), or give --model");
  }
  TraceModel model;
  model.file = path;
  model.iteration = iteration;
  model.fromRanges = !step->ranges.empty();
  if (!model.fromRanges && !step->ddpForward) {
    return invalidArgument(path + ": ProfilerStep#" + std::to_string(iteration) +
                           " has neither ddpscope.layer: ranges nor a " + std::string(kDdpForward) +
                           " range: the layers cannot be told from the trace; give --model");
  }
  const StepLayers layers = model.fromRanges ? layersFromRanges(*step) : layersFromOps(*step);
  if (layers.layers.empty()) {
    return invalidArgument(path + ": ProfilerStep#" + std::to_string(iteration) +
                           ": no forward op of a known kind (linear, conv2d, layer_norm, ...) "
                           "that autograd differentiates: the layers cannot be told from the "
                           "trace; give --model");
  }
  model.layers = layers.layers;
  int owner = -1;
  for (const StepEvents::Node& n : step->nodes) {
    if (!n.accumulate) {
      if (!n.sequence) continue;
      auto start = step->sequenceStart.find(*n.sequence);
      if (start == step->sequenceStart.end()) continue;
      if (const int layer = layers.at(start->second); layer >= 0) owner = layer;
      continue;
    }
    if (!n.gradient) {
      return invalidArgument(path + ": ProfilerStep#" + std::to_string(iteration) + ": " +
                             std::string(kAccumulateGrad) +
                             " without \"Input Dims\": the trace has no parameter shapes; "
                             "profile with torch.profiler.profile(record_shapes=True), or give "
                             "--model");
    }
    // A trace that names no type (older profilers) holds float32, as the import assumes for
    // collectives.
    const std::optional<std::string> dtype = n.gradient->type.empty()
                                                 ? std::optional<std::string>("float32")
                                                 : modelDtype(n.gradient->type);
    if (!dtype) {
      return invalidArgument(path + ": ProfilerStep#" + std::to_string(iteration) + ": " +
                             std::string(kAccumulateGrad) + " of \"Input type\" '" +
                             n.gradient->type +
                             "': not a floating-point type a parameter can have");
    }
    model.params.push_back({n.gradient->shape, *dtype, owner});
  }
  return model;
}

std::map<int64_t, int> forwardOpLayers(const RankTrack& track, const TraceModel& model,
                                       bool everyOp) {
  std::map<int64_t, int> out;
  if (model.fromRanges) return out;
  for (const Window& w : iterationWindows(track)) {
    std::vector<int64_t> starts;
    const StepEvents events = stepEvents(track, w);
    const StepLayers step = layersFromOps(events, &starts);
    const bool same = step.layers.size() == model.layers.size() &&
                      std::equal(step.layers.begin(), step.layers.end(), model.layers.begin(),
                                 [](const ImportLayer& a, const ImportLayer& b) {
                                   return a.name == b.name && a.type == b.type;
                                 });
    if (!same) continue;
    for (size_t i = 0; i < starts.size(); ++i) out.emplace(starts[i], static_cast<int>(i));
    if (!everyOp) continue;
    // Every other op to the layer whose op ran last before it (the first layer before that).
    size_t next = 0;
    for (const auto& op : events.topOps) {
      while (next < starts.size() && starts[next] <= op.start.count()) ++next;
      out.emplace(op.start.count(), static_cast<int>(next == 0 ? 0 : next - 1));
    }
  }
  return out;
}

}  // namespace ddpscope::traces
