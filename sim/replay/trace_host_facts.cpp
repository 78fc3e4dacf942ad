#include "sim/replay/trace_host_facts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include "traces/classify.h"

namespace ddpscope::sim::replay {

namespace {

using Json = nlohmann::json;

constexpr std::string_view kLayer = "ddpscope.layer:";
constexpr std::string_view kAccumulateGradNode =
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad";
constexpr std::string_view kBackwardNode = "autograd::engine::evaluate_function";
// DDP's buffer broadcast before the module's forward (broadcast_buffers=True): flatten, the
// broadcast call, unflatten and one copy_ back per buffer.
const std::set<std::string_view> kBufferSyncOps = {
    "aten::flatten_dense_tensors", "aten::unflatten_dense_tensors", "c10d::broadcast_",
    "record_param_comms", "aten::copy_"};

bool isCpuCategory(std::string_view cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "cuda_runtime" ||
         cat == "cuda_driver" || cat == "python_function";
}
bool isGpuCategory(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}
bool isRuntimeCategory(std::string_view cat) {
  return cat == "cuda_runtime" || cat == "cuda_driver";
}

// One complete ("X") event. Keys (thread, correlation, sequence number) are the JSON values as
// text, "null" when absent, so that any JSON type compares as the trace wrote it.
struct Event {
  double ts = 0, dur = 0;
  std::string name, cat, tid;
  std::string correlation = "null", sequence = "null";
};

// Reads the complete events of a trace's "traceEvents" with nlohmann's SAX parser (no document
// in memory: a 100 MB trace would take about ten times its size as one): the fields above, and of
// the args only "correlation" and "Sequence number". Other events and fields are skipped.
class EventReader final : public nlohmann::json_sax<Json> {
 public:
  std::vector<Event> events;
  bool sawTraceEvents = false;
  std::string error;

  bool null() override {
    return scalar(0, false, [] { return std::string("null"); });
  }
  bool boolean(bool v) override {
    return scalar(0, false, [v] { return std::string(v ? "true" : "false"); });
  }
  bool number_integer(number_integer_t v) override {
    return scalar(static_cast<double>(v), true, [v] { return std::to_string(v); });
  }
  bool number_unsigned(number_unsigned_t v) override {
    return scalar(static_cast<double>(v), true, [v] { return std::to_string(v); });
  }
  bool number_float(number_float_t v, const string_t& raw) override {
    return scalar(v, true, [&raw] { return raw; });
  }
  bool string(string_t& v) override {
    if (inEvent() && m_depth == m_eventDepth) {
      if (m_key == "name") m_event.name = v;
      if (m_key == "cat") m_event.cat = v;
      if (m_key == "ph") m_isComplete = v == "X";
    }
    return scalar(0, false, [&v] { return Json(v).dump(); });
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++m_depth;
    if (m_inList && m_depth == m_listDepth + 1) {
      m_eventDepth = m_depth;
      m_event = Event{};
      m_isComplete = false;
    } else if (inEvent() && m_depth == m_eventDepth + 1 && m_key == "args") {
      m_argsDepth = m_depth;
    }
    return true;
  }
  bool key(string_t& k) override {
    m_key = k;
    if (m_depth == 1 && k == "traceEvents") m_traceEventsNext = true;
    return true;
  }
  bool end_object() override {
    if (inEvent() && m_depth == m_eventDepth) {
      if (m_isComplete) events.push_back(std::move(m_event));
      m_eventDepth = -1;
    }
    if (m_depth == m_argsDepth) m_argsDepth = -1;
    --m_depth;
    return true;
  }
  bool start_array(std::size_t) override {
    ++m_depth;
    if (m_traceEventsNext && m_depth == 2) {
      m_inList = true;
      m_listDepth = m_depth;
      sawTraceEvents = true;
    }
    m_traceEventsNext = false;
    return true;
  }
  bool end_array() override {
    if (m_inList && m_depth == m_listDepth) m_inList = false;
    --m_depth;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error = "not JSON at byte " + std::to_string(position) + ": " + e.what();
    return false;
  }

 private:
  bool inEvent() const { return m_eventDepth >= 0; }
  // A scalar value of the current key: the event's fields, and two of its args. `text` gives
  // the value as JSON text, made only for the three keys kept as text.
  template <typename Text>
  bool scalar(double value, bool isNumber, const Text& text) {
    if (m_depth == 1) m_traceEventsNext = false;
    if (!inEvent()) return true;
    if (m_depth == m_eventDepth) {
      // A field of the event itself (not inside args or any other nested value).
      if (m_key == "ts" && isNumber) m_event.ts = value;
      if (m_key == "dur" && isNumber) m_event.dur = value;
      if (m_key == "tid") m_event.tid = text();
    } else if (m_depth == m_argsDepth) {  // directly in the event's "args"
      if (m_key == "correlation") m_event.correlation = text();
      if (m_key == "Sequence number") m_event.sequence = text();
    }
    return true;
  }

  int m_depth = 0, m_eventDepth = -1, m_listDepth = -1, m_argsDepth = -1;
  bool m_inList = false, m_traceEventsNext = false, m_isComplete = false;
  std::string m_key;
  Event m_event;
};

// The nesting of one thread's events: sorted by start, the longer first; an event is inside the
// innermost open one that has not ended when it starts (a zero-length event opens nothing).
struct Forest {
  struct Node {
    const Event* e;
    std::vector<int> kids;
  };
  std::vector<Node> nodes;
  std::vector<int> tops;
  const Event& event(int id) const { return *nodes[id].e; }
  const std::vector<int>& kids(int id) const { return nodes[id].kids; }
};

Forest buildForest(std::vector<const Event*> events) {
  std::stable_sort(events.begin(), events.end(), [](const Event* a, const Event* b) {
    return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
  });
  Forest f;
  f.nodes.reserve(events.size());
  std::vector<int> open;
  for (const Event* e : events) {
    while (!open.empty() && e->ts >= f.event(open.back()).ts + f.event(open.back()).dur) {
      open.pop_back();
    }
    const int id = static_cast<int>(f.nodes.size());
    f.nodes.push_back({e, {}});
    (open.empty() ? f.tops : f.nodes[open.back()].kids).push_back(id);
    if (e->dur > 0 || open.empty()) open.push_back(id);
  }
  return f;
}

// Node `id` and everything in it, in order (the node first).
void walk(const Forest& f, int id, const std::function<void(int)>& visit) {
  visit(id);
  for (int kid : f.kids(id)) walk(f, kid, visit);
}

using GpuByCorrelation = std::unordered_map<std::string, std::vector<const Event*>>;

// Events (the node included), runtime calls among them, the kernels they launched and those
// kernels' GPU time, of a node and everything inside it.
struct Totals {
  double events = 0, runtime = 0, kernels = 0, kernelUs = 0;
};
Totals totals(const Forest& f, int id, const GpuByCorrelation& gpu) {
  Totals t;
  walk(f, id, [&](int n) {
    const Event& e = f.event(n);
    t.events += 1;
    if (!isRuntimeCategory(e.cat)) return;
    // A state query enqueues nothing (0.14-0.72 us in the kit's traces, where every call that
    // launches, copies, records or waits takes 1.3 us or more): an event, not a launch.
    if (traces::classifyRuntimeCall(e.name) != traces::RuntimeCall::kQuery) t.runtime += 1;
    auto it = gpu.find(e.correlation);
    if (it == gpu.end()) return;
    for (const Event* g : it->second) {
      t.kernels += 1;
      t.kernelUs += g->dur;
    }
  });
  return t;
}

struct Work {
  double count = 0, hostUs = 0, events = 0, runtimeEvents = 0, kernels = 0, kernelUs = 0,
         buffers = 0, broadcasts = 0;
  void add(const Totals& t, double dur, double weight = 1) {
    count += weight;
    hostUs += dur * weight;
    events += t.events * weight;
    runtimeEvents += t.runtime * weight;
    kernels += t.kernels * weight;
    kernelUs += t.kernelUs * weight;
  }
};

double rounded(double us) {
  return std::round(us * 1000) / 1000;
}

Json workJson(const Work& w, const std::string& prefix = "", const char* countKey = "count") {
  Json o = Json::object();
  o[prefix + countKey] = rounded(w.count);
  o[prefix + "host_us"] = rounded(w.hostUs);
  o[prefix + "events"] = rounded(w.events);
  o[prefix + "runtime_events"] = rounded(w.runtimeEvents);
  o[prefix + "kernels"] = rounded(w.kernels);
  o[prefix + "kernel_us"] = rounded(w.kernelUs);
  if (w.buffers > 0) o[prefix + "buffers"] = rounded(w.buffers);
  if (w.broadcasts > 0) o[prefix + "broadcasts"] = rounded(w.broadcasts);
  return o;
}

// The model's layers that own the ops a module call runs itself (not inside a child module):
// the layer of that call, or for a container the functional layers right under it ("<path>.add",
// "<path>.core"); none for the root (the model's own forward outside its modules).
class Attribution {
 public:
  Attribution(const std::vector<std::string>& names, std::set<std::string> modules,
              const std::vector<std::pair<int64_t, std::string>>& forwardOps)
      : m_names(names),
        m_known(names.begin(), names.end()),
        m_modules(std::move(modules)),
        m_forwardOps(forwardOps) {
    std::sort(m_forwardOps.begin(), m_forwardOps.end());
  }

  bool byMatchedOps() const { return !m_forwardOps.empty(); }
  // The layer of the matched forward op that starts at `tsUs` (µs as the trace writes it: its ns
  // within 2 ns of the import's, for the double's rounding); empty when none does.
  std::vector<std::string> matchedOp(double tsUs) const {
    const int64_t ns = std::llround(tsUs * 1000.0);
    auto it = std::lower_bound(m_forwardOps.begin(), m_forwardOps.end(), ns - 2,
                               [](const auto& op, int64_t v) { return op.first < v; });
    if (it != m_forwardOps.end() && it->first <= ns + 2) return {it->second};
    return {};
  }

  std::vector<std::string> targets(const std::string& path, int call) const {
    if (!path.empty()) {
      const std::string name = call == 1 ? path : path + ":" + std::to_string(call);
      if (m_known.count(name)) return {name};
    }
    const std::string prefix = path.empty() ? "" : path + ".";
    std::vector<std::string> out;
    for (const std::string& n : m_names) {
      if (!n.starts_with(prefix)) continue;
      if (n.find('.', prefix.size()) != std::string::npos) continue;
      if (m_modules.count(n.substr(0, n.find(':')))) continue;
      out.push_back(n);
    }
    return out;
  }

 private:
  const std::vector<std::string>& m_names;
  std::set<std::string> m_known;
  std::set<std::string> m_modules;
  std::vector<std::pair<int64_t, std::string>> m_forwardOps;  // by start
};

class StepFacts {
 public:
  StepFacts(const GpuByCorrelation& gpu, const Attribution& attribution)
      : m_gpu(gpu), m_attribution(attribution) {}

  Json run(const std::vector<Event>& events, const Event& step) {
    const double t0 = step.ts, t1 = step.ts + step.dur;
    std::vector<const Event*> cpu;
    std::vector<std::string> threads;
    std::map<std::string, std::vector<const Event*>> byThread;
    for (const Event& e : events) {
      if (&e == &step || e.ts < t0 || e.ts >= t1 || !isCpuCategory(e.cat)) continue;
      cpu.push_back(&e);
      auto [it, added] = byThread.try_emplace(e.tid);
      if (added) threads.push_back(e.tid);
      it->second.push_back(&e);
    }
    mainThread(byThread[step.tid]);
    for (const std::string& tid : threads) {
      // Autograd threads run backward nodes; another thread's events (a CUDA callback thread's
      // runtime calls) are none of the step's host work.
      const std::vector<const Event*>& mine = byThread[tid];
      const bool autograd = std::any_of(mine.begin(), mine.end(), [](const Event* e) {
        return e->name.starts_with("autograd::engine::evaluate_function");
      });
      if (tid != step.tid && autograd) autogradThread(mine);
    }
    double kernels = 0, kernelUs = 0;
    for (const Event* e : cpu) {
      if (!isRuntimeCategory(e->cat)) continue;
      auto it = m_gpu.find(e->correlation);
      if (it == m_gpu.end()) continue;
      for (const Event* g : it->second) {
        kernels += 1;
        kernelUs += g->dur;
      }
    }
    Json out = Json::object();
    out["step_us"] = rounded(step.dur);
    out["events"] = static_cast<double>(cpu.size());
    out["kernels"] = kernels;
    out["kernel_us"] = rounded(kernelUs);
    out["module_calls"] = static_cast<double>(m_moduleCalls);
    Json terms = Json::object();
    for (const auto& [name, w] : m_terms) terms[name] = workJson(w);
    out["terms"] = std::move(terms);
    Json layers = Json::object();
    for (const auto& [name, l] : m_layers) {
      Json o = workJson(l.forward, "forward_", "ops");
      o.update(workJson(l.backward, "backward_", "ops"));
      layers[name] = std::move(o);
    }
    out["layers"] = std::move(layers);
    return out;
  }

 private:
  struct LayerWork {
    Work forward, backward;
  };

  void add(const char* term, const Forest& f, int id) {
    m_terms[term].add(totals(f, id, m_gpu), f.event(id).dur);
  }
  void share(const std::vector<std::string>& targets, bool forward, const Forest& f, int id) {
    const Totals t = totals(f, id, m_gpu);
    const double weight = 1.0 / static_cast<double>(targets.size());
    for (const std::string& target : targets) {
      LayerWork& l = m_layers[target];
      (forward ? l.forward : l.backward).add(t, f.event(id).dur, weight);
    }
  }
  static double childrenUs(const Forest& f, int id) {
    double us = 0;
    for (int kid : f.kids(id)) us += f.event(kid).dur;
    return us;
  }

  // The forward under a module call (`path`, its `call`-th call) or under DDP.forward (no path).
  void visit(const Forest& f, int node, const std::optional<std::string>& path, int call) {
    for (int kid : f.kids(node)) {
      const Event& e = f.event(kid);
      if (e.name.starts_with(kLayer)) {
        const std::string p = e.name.substr(kLayer.size());
        const int n = ++m_calls[p];
        ++m_moduleCalls;
        // The module call's own time: its range less what runs inside it.
        const double own = e.dur - childrenUs(f, kid);
        Work& self = m_terms["module_self"];
        self.count += 1;
        self.hostUs += own;
        self.events += 1;
        // A module whose forward is one aten op: its own time is the call's fixed cost.
        if (f.kids(kid).size() == 1 && f.event(f.kids(kid)[0]).cat == "cpu_op") {
          Work& one = m_terms["module_self_one_op"];
          one.count += 1;
          one.hostUs += own;
        }
        visit(f, kid, p, n);
      } else if (e.cat == "cpu_op" && !path && kBufferSyncOps.count(e.name)) {
        add("buffer_sync", f, kid);
        if (e.name == "aten::copy_") {
          m_terms["buffer_sync"].buffers += 1;
          add("buffer_copy", f, kid);  // a buffer's own share; the rest is its dtype group's
        } else if (e.name == "c10d::broadcast_") {
          m_terms["buffer_sync"].broadcasts += 1;
        }
      } else if (e.cat == "cpu_op") {
        std::vector<std::string> targets = !path && m_attribution.byMatchedOps()
                                               ? m_attribution.matchedOp(e.ts)
                                               : m_attribution.targets(path.value_or(""), call);
        // An op no layer owns does not claim its sequence number: a later op of a layer may
        // share it (BatchNorm's num_batches_tracked += 1 before its batch_norm).
        const bool owned = !targets.empty();
        if (!owned) targets = {"unattributed"};
        share(targets, /*forward=*/true, f, kid);
        walk(f, kid, [&](int n) {
          const Event& op = f.event(n);
          if (owned && op.sequence != "null" && op.cat == "cpu_op") {
            m_sequenceLayers.try_emplace(op.sequence, targets);
          }
        });
      } else if (e.cat == "user_annotation") {
        visit(f, kid, path, call);
      }
    }
  }

  // The main thread: the forward (DDP's wrapper and the module calls), the loss, the optimizer.
  void mainThread(const std::vector<const Event*>& events) {
    const Forest f = buildForest(events);
    bool forwardSeen = false;
    // A job's own ranges around the step's phases ("## forward ##" around DDP.forward, "##
    // backward ##" around loss.backward()): their contents count as if at the top; their own
    // time is not host work (in the backward's, the main thread waits for the autograd thread).
    std::vector<int> tops;
    std::function<void(int)> unwrap = [&](int id) {
      const Event& e = f.event(id);
      const bool known = e.name.starts_with("DistributedDataParallel.forward") ||
                         e.name.starts_with(kLayer) || e.name.starts_with("Optimizer.");
      if (e.cat != "user_annotation" || known || f.kids(id).empty()) {
        tops.push_back(id);
        return;
      }
      for (int kid : f.kids(id)) unwrap(kid);
    };
    for (int top : f.tops) unwrap(top);
    for (int top : tops) {
      const Event& e = f.event(top);
      const bool ddp = e.name.starts_with("DistributedDataParallel.forward");
      if (ddp || e.name.starts_with(kLayer)) {
        forwardSeen = true;
        if (ddp) {
          const Totals t = totals(f, top, m_gpu);
          Work& forward = m_terms["ddp_forward"];
          forward.count += 1;
          forward.hostUs += e.dur;
          forward.events += t.events;
          // DDP's wrapper: DDP.forward's own time outside everything it calls.
          Work& wrapper = m_terms["ddp_wrapper"];
          wrapper.count += 1;
          wrapper.hostUs += e.dur - childrenUs(f, top);
          visit(f, top, std::nullopt, 1);
        } else {
          const std::string p = e.name.substr(kLayer.size());
          const int n = ++m_calls[p];
          ++m_moduleCalls;
          visit(f, top, p, n);
        }
      } else if (e.name.starts_with("Optimizer.step")) {
        add("optimizer", f, top);
      } else if (e.name.starts_with("Optimizer.zero_grad")) {
        add("zero_grad", f, top);
      } else if (e.name == "cudaDeviceSynchronize") {
        add("sync", f, top);
      } else if (forwardSeen && e.cat == "cpu_op") {
        add("loss", f, top);
      } else {
        add("main_other", f, top);
      }
    }
  }

  // An autograd thread: backward nodes, AccumulateGrad with DDP's hook, the reducer's work.
  void autogradThread(const std::vector<const Event*>& events) {
    const Forest f = buildForest(events);
    std::optional<double> previousEnd;
    for (int top : f.tops) {
      const Event& e = f.event(top);
      // The autograd engine's own time before this item (no event covers it).
      if (previousEnd) {
        const char* kind = e.name.find("AccumulateGrad") != std::string::npos
                               ? "accumulate_grad_gap"
                           : e.name.starts_with("autograd::engine") ? "backward_node_gap"
                                                                    : "backward_other_gap";
        Work& gap = m_terms[kind];
        gap.count += 1;
        gap.hostUs += std::max(0.0, e.ts - *previousEnd);
      }
      previousEnd = e.ts + e.dur;
      if (e.name.starts_with(kAccumulateGradNode)) {
        add("accumulate_grad", f, top);
        for (int kid : f.kids(top)) {
          walk(f, kid, [&](int n) {
            const std::string& name = f.event(n).name;
            if (name == "torch::autograd::AccumulateGrad") {
              add("accumulate_grad_inner", f, n);
            } else if (name == "torch::distributed::reducer::mul_out") {
              add("copy_in", f, n);
            } else if (name == "c10d::allreduce_") {
              add("allreduce_call", f, n);
            }
          });
        }
      } else if (e.name.starts_with(kBackwardNode)) {
        // The layer of the forward op with the node's sequence number (the first in the node).
        std::string sequence = "null";
        walk(f, top, [&](int n) {
          if (sequence == "null") sequence = f.event(n).sequence;
        });
        auto it = m_sequenceLayers.find(sequence);
        share(it != m_sequenceLayers.end() ? it->second : std::vector<std::string>{"unattributed"},
              /*forward=*/false, f, top);
        for (int kid : f.kids(top)) {
          walk(f, kid, [&](int n) {
            if (f.event(n).name == "c10d::allreduce_") add("allreduce_call", f, n);
          });
        }
      } else if (e.name.starts_with("torch.distributed.ddp.reducer::copy_bucket_to_grad")) {
        add("copy_back", f, top);
      } else if (e.name == "c10d::allreduce_") {
        add("allreduce_call", f, top);
      } else {
        add("backward_other", f, top);
      }
    }
  }

  const GpuByCorrelation& m_gpu;
  const Attribution& m_attribution;
  std::map<std::string, Work> m_terms;
  std::map<std::string, LayerWork> m_layers;
  std::map<std::string, std::vector<std::string>> m_sequenceLayers;
  std::map<std::string, int> m_calls;
  int64_t m_moduleCalls = 0;
};

}  // namespace

StatusOr<Json> traceHostFactsSteps(std::string_view json, const std::string& origin,
                                   const std::vector<std::string>& layerNames,
                                   const std::vector<std::pair<int64_t, std::string>>& forwardOps) {
  EventReader reader;
  Json::sax_parse(json.begin(), json.end(), &reader, nlohmann::detail::input_format_t::json,
                  /*strict=*/true);
  if (!reader.error.empty()) return invalidArgument(origin + ": " + reader.error);
  if (!reader.sawTraceEvents) {
    return invalidArgument(origin + ": not a PyTorch profiler trace (no \"traceEvents\" array)");
  }
  const std::vector<Event>& events = reader.events;
  // The steps: ProfilerStep# ranges of the thread that has most of them, in time order.
  std::vector<const Event*> steps;
  std::vector<std::string> stepThreads;
  std::map<std::string, int> perThread;
  for (const Event& e : events) {
    if (e.cat != "user_annotation" || !e.name.starts_with("ProfilerStep#")) continue;
    steps.push_back(&e);
    if (perThread[e.tid]++ == 0) stepThreads.push_back(e.tid);
  }
  if (steps.empty()) {
    return invalidArgument(origin +
                           ": no ProfilerStep# ranges: profile with a schedule "
                           "(torch.profiler.schedule) and call prof.step() after every step");
  }
  std::string mainThread = stepThreads.front();
  for (const std::string& tid : stepThreads) {
    if (perThread[tid] > perThread[mainThread]) mainThread = tid;
  }
  std::erase_if(steps, [&](const Event* e) { return e->tid != mainThread; });
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Event* a, const Event* b) { return a->ts < b->ts; });
  GpuByCorrelation gpu;
  std::set<std::string> modules;
  bool anyCpuOp = false;
  for (const Event& e : events) {
    if (isGpuCategory(e.cat)) gpu[e.correlation].push_back(&e);
    if (e.cat == "cpu_op") anyCpuOp = true;
    if (e.cat == "user_annotation" && e.name.starts_with(kLayer)) {
      modules.insert(e.name.substr(kLayer.size()));
    }
  }
  if (!anyCpuOp) {
    return invalidArgument(origin +
                           ": no CPU ops: profile with activities=[ProfilerActivity.CPU, "
                           "ProfilerActivity.CUDA]");
  }
  if (gpu.empty()) {
    return invalidArgument(origin +
                           ": no GPU kernels: the host facts are of a GPU job profiled with "
                           "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  }
  // The ranges when the job wrote them; else the import's matched ops.
  const bool ranges = !modules.empty();
  const Attribution attribution(
      layerNames, std::move(modules),
      ranges ? std::vector<std::pair<int64_t, std::string>>{} : forwardOps);
  Json out = Json::array();
  double launched = 0;
  for (const Event* step : steps) {
    Json facts = StepFacts(gpu, attribution).run(events, *step);
    launched += facts["kernels"].get<double>();
    out.push_back(std::move(facts));
  }
  if (launched == 0) {
    return invalidArgument(origin +
                           ": no kernel is linked to a CPU launch in the profiled steps (no "
                           "\"correlation\" args): a trace from torch.profiler with CUDA activity "
                           "has them");
  }
  return out;
}

}  // namespace ddpscope::sim::replay
