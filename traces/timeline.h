// Timeline: the in-memory trace shared by the simulator, the runtime and the GUI.
//
// A Timeline holds ranks; each rank holds lanes (one CPU thread or one GPU / comm stream);
// each lane holds spans {name, category, start, duration, args}. Flows link two points on
// two lanes (a launch and its kernel, a bucket-ready and its allreduce); counters are
// sampled values per rank. All times are Nanos (int64 ns); Chrome's microseconds exist
// only inside traces/chrome_writer.cpp and traces/chrome_reader.cpp.
//
// Iterations are spans of category kIteration (e.g. "ProfilerStep#3"), normally on a host
// lane; addIteration() is the explicit way to declare one and iterations() collects them.
//
// Order: spans of one lane are kept in insertion order until sortSpans(), which stable-sorts
// each lane by (start ascending, duration descending): at equal start a parent precedes its
// child, and spans equal in both keep insertion (sequence) order. Adding a span is amortised
// O(1); sortSpans() is O(n log n). A 1M-span timeline costs about 100 bytes per span plus
// names longer than the small-string buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"

namespace ddpscope::traces {

// What a lane shows. Overlap metrics use only kCompute and kComm lanes (the device side);
// host lanes hold CPU ranges and iteration markers.
enum class LaneKind : uint8_t { kCompute, kComm, kHost };

const char* laneKindName(LaneKind kind);  // "compute", "comm", "host"
std::optional<LaneKind> parseLaneKind(std::string_view name);

// What a span does. Names (categoryName) are the Chrome "cat" strings we write.
//   computation   : kForward, kBackward, kOptimizer, kCompute (any other GPU/CPU kernel)
//   communication : kAllreduce, kUsedMapAllreduce, kBroadcast, kAllgather, kReduceScatter,
//                   kCommOther
//   memory        : kCopy (memcpy / memset / bucket copies) — neither compute nor comm,
//                   as in HTA
//   markers/other : kIteration (a step window), kOther
enum class Category : uint8_t {
  kForward,
  kBackward,
  kOptimizer,
  kCompute,
  kCopy,
  kAllreduce,
  kUsedMapAllreduce,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kCommOther,
  kIteration,
  kOther,
};
inline constexpr int kCategoryCount = static_cast<int>(Category::kOther) + 1;

const char* categoryName(Category category);
std::optional<Category> parseCategory(std::string_view name);
bool isCommunication(Category category);
// A bucket's gradient collective: communication other than the used-map allreduce and the
// broadcasts (buffers, the rebuild).
bool isBucketCollective(Category category);
// The collective's verb as c10d and Kineto's "Collective name" spell it: "allreduce" (the
// used-map allreduce too), "broadcast", "allgather", "reduce_scatter"; "collective" otherwise.
const char* collectiveVerb(Category category);
bool isComputation(Category category);
bool isMemory(Category category);

using ArgValue = std::variant<int64_t, double, std::string>;

// Args: a small ordered list of key → (int64 | double | string). Insertion order is kept
// (it is the order written to Chrome "args"). Lookups are linear: spans carry a handful.
class Args {
 public:
  using Item = std::pair<std::string, ArgValue>;

  Args() = default;
  Args(std::initializer_list<Item> items) : m_items(items) {}

  // Replaces the value of an existing key, or appends the key.
  void set(std::string key, ArgValue value);
  // Appends without looking for an existing key (the caller knows keys are unique).
  void append(std::string key, ArgValue value);
  const ArgValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: nullopt when absent or of another type (getDouble also accepts an int).
  std::optional<int64_t> getInt(std::string_view key) const;
  std::optional<double> getDouble(std::string_view key) const;
  std::optional<std::string_view> getString(std::string_view key) const;

  bool empty() const { return m_items.empty(); }
  size_t size() const { return m_items.size(); }
  void clear() { m_items.clear(); }
  const std::vector<Item>& items() const { return m_items; }
  std::vector<Item>::const_iterator begin() const { return m_items.begin(); }
  std::vector<Item>::const_iterator end() const { return m_items.end(); }

  bool operator==(const Args&) const = default;

 private:
  std::vector<Item> m_items;
};

// Well-known arg keys. Collective spans carry kArgBucket and kArgBytes, optionally
// kArgIteration.
inline constexpr std::string_view kArgBucket = "bucket";
inline constexpr std::string_view kArgBytes = "bytes";
inline constexpr std::string_view kArgIteration = "iteration";
// A layer's span that the PyTorch import derived from its kernels (first kernel's start to last
// kernel's end, gaps included): a name for the kernels, not time the device computed.
inline constexpr std::string_view kArgKernelExtent = "kernel_extent";
// On such a span: its kernels' summed duration in ns (the time the device computed the layer;
// the span's duration also holds the gaps where the GPU waited for the host).
inline constexpr std::string_view kArgKernelNs = "kernel_ns";
// A device span's launch by the host (simulated traces whose host runs ahead): the time the host
// finished launching it (ns on the timeline, at or before the span's start) and the index of the
// rank's host lane (thread) that launched it.
inline constexpr std::string_view kArgLaunchNs = "launch_ns";
inline constexpr std::string_view kArgLaunchLane = "launch_lane";
// The simulator's host threads, as PyTorch runs a training step: the Python thread runs the
// forward, the loss and the optimizer; autograd's device thread runs the backward and, in it,
// DDP's hooks (copies into buckets, allreduce launches) and the reducer's finalize.
inline constexpr std::string_view kMainThreadLane = "main thread";
inline constexpr std::string_view kAutogradThreadLane = "autograd thread";

// The CUDA runtime's loss head, which is no layer of the model: the names of its forward and
// backward compute spans (the CPU runtime records none).
inline constexpr std::string_view kLossHeadSpan = "loss";
inline constexpr std::string_view kLossHeadBackwardSpan = "loss backward";

struct Span {
  std::string name;
  Category category = Category::kOther;
  Nanos start;
  Nanos duration;
  Args args;

  Nanos end() const { return start + duration; }
  bool operator==(const Span&) const = default;
};

// Whether a span is time the device computed, for overlap: a computation category, and not a
// layer's extent derived from kernels that are spans of their own (kArgKernelExtent).
inline bool isDeviceCompute(const Span& span) {
  return isComputation(span.category) && !span.args.contains(kArgKernelExtent);
}

struct Lane {
  std::string name;
  LaneKind kind = LaneKind::kHost;
  std::vector<Span> spans;

  bool operator==(const Lane&) const = default;
};

// One rank (one process in the viewer). `rank` is the rank id, not its index in the Timeline.
struct RankTrack {
  int rank = 0;
  std::string name;  // display name; empty means "rank N"
  std::vector<Lane> lanes;

  bool operator==(const RankTrack&) const = default;
};

// Index pair returned by addLane(); stable while ranks and lanes are only added.
struct LaneHandle {
  int rankIndex = 0;
  int laneIndex = 0;
  bool operator==(const LaneHandle&) const = default;
};

// A point on a lane. `rank` is a rank id, `lane` the lane's index within that rank.
struct FlowEndpoint {
  int rank = 0;
  int lane = 0;
  Nanos time;
  bool operator==(const FlowEndpoint&) const = default;
};

// An arrow from one point to another (Chrome "s"/"f" pair). Viewers match the pair on
// (id, category, name).
struct Flow {
  uint64_t id = 0;
  std::string name;
  std::string category = "flow";
  FlowEndpoint from;
  FlowEndpoint to;
  bool operator==(const Flow&) const = default;
};

// One sample of a per-rank counter (Chrome "C").
struct Counter {
  int rank = 0;
  std::string name;
  Nanos time;
  double value = 0;
  bool operator==(const Counter&) const = default;
};

// One iteration (training step) window of one rank.
struct Iteration {
  int64_t index = 0;  // N of "ProfilerStep#N", or the "iteration" arg, or the ordinal
  Nanos start;
  Nanos duration;
  Nanos end() const { return start + duration; }
  bool operator==(const Iteration&) const = default;
};

// Name of the host lane that addIteration() creates on demand.
inline constexpr std::string_view kIterationLaneName = "iterations";

class Timeline {
 public:
  Timeline() = default;

  const std::string& name() const { return m_name; }
  void setName(std::string name) { m_name = std::move(name); }
  // Free-form run metadata (model, world_size, bucket_cap_mb, ...), written to "otherData".
  const Args& metadata() const { return m_metadata; }
  Args& mutableMetadata() { return m_metadata; }

  // ---- ranks and lanes ----
  // Adds rank `rankId` if absent; returns its index. O(1) for ranks added in id order.
  int addRank(int rankId, std::string name = {});
  std::optional<int> findRank(int rankId) const;
  int rankCount() const { return static_cast<int>(m_ranks.size()); }
  const std::vector<RankTrack>& ranks() const { return m_ranks; }
  const RankTrack& rank(int rankIndex) const { return m_ranks.at(static_cast<size_t>(rankIndex)); }
  RankTrack& mutableRank(int rankIndex) { return m_ranks.at(static_cast<size_t>(rankIndex)); }

  // Adds a lane to rank `rankId` (adding the rank if needed).
  LaneHandle addLane(int rankId, std::string name, LaneKind kind);
  // Returns the lane of that name on that rank, adding it with `kind` if absent.
  LaneHandle findOrAddLane(int rankId, std::string_view name, LaneKind kind);
  const Lane& lane(LaneHandle handle) const;
  Lane& mutableLane(LaneHandle handle);

  // ---- content ----
  void reserveSpans(LaneHandle handle, size_t count);
  void addSpan(LaneHandle handle, Span span);
  // Convenience: builds the Span in place.
  void addSpan(LaneHandle handle, std::string name, Category category, Nanos start, Nanos duration,
               Args args = {});
  std::span<const Span> spans(LaneHandle handle) const { return lane(handle).spans; }

  // Declares iteration `index` of rank `rankId` as a kIteration span "ProfilerStep#<index>"
  // on the host lane kIterationLaneName (created on demand).
  void addIteration(int rankId, int64_t index, Nanos start, Nanos duration);
  // Iteration windows of a rank, from its kIteration spans on any lane, sorted by start.
  std::vector<Iteration> iterations(int rankIndex) const;

  void addFlow(Flow flow) { m_flows.push_back(std::move(flow)); }
  const std::vector<Flow>& flows() const { return m_flows; }
  std::vector<Flow>& mutableFlows() { return m_flows; }
  void addCounter(Counter counter) { m_counters.push_back(std::move(counter)); }
  const std::vector<Counter>& counters() const { return m_counters; }
  std::vector<Counter>& mutableCounters() { return m_counters; }

  size_t spanCount() const;

  // Stable-sorts every lane by (start asc, duration desc); see the header comment.
  void sortSpans();
  // OK when, on every lane, any two spans are disjoint or one contains the other
  // (touching ends are fine). The error names the rank, lane and both spans.
  Status validateNesting() const;

  bool operator==(const Timeline&) const = default;

 private:
  std::string m_name;
  Args m_metadata;
  std::vector<RankTrack> m_ranks;
  std::vector<Flow> m_flows;
  std::vector<Counter> m_counters;
};

// The span order used by sortSpans() and by the writer: true when `a` must precede `b`
// (ties in both keys are left to the caller's stable order).
inline bool spanPrecedes(const Span& a, const Span& b) {
  if (a.start != b.start) return a.start < b.start;
  return a.duration > b.duration;
}

// Parses the N of "ProfilerStep#N"; nullopt for other names.
std::optional<int64_t> parseProfilerStep(std::string_view name);

}  // namespace ddpscope::traces
