#include "sim/replay/host_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/least_squares.h"
#include "base/median.h"
#include "base/strings.h"
#include "ddp/bucket_plan.h"
#include "io/json_reader.h"
#include "models/zoo.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/replay/measured_compute_model.h"

namespace ddpscope::sim::replay {

namespace {

using Json = nlohmann::json;

const HostWork kNoWork{};

// `o`'s number `key` / `n` (0 when absent or not a number): one step's share of a mean.
double share(const Json& o, const char* key, double n) {
  const Json* v = findJsonMember(o, key);
  return v != nullptr && v->is_number() ? v->get<double>() / n : 0.0;
}

// Adds `o`'s fields (count, host_us, events, kernels, kernel_us, buffers, broadcasts) / `n` to
// `w`.
void accumulate(const Json& o, double n, HostWork& w) {
  auto get = [&](const char* key) { return share(o, key, n); };
  w.count += get("count");
  w.hostUs += get("host_us");
  w.events += get("events");
  w.runtimeEvents += get("runtime_events");
  w.kernels += get("kernels");
  w.kernelUs += get("kernel_us");
  w.buffers += get("buffers");
  w.broadcasts += get("broadcasts");
}

// One layer prefix ("forward_" / "backward_") of host_facts.py's layer record.
void accumulateLayer(const Json& o, const char* prefix, double n, HostWork& w) {
  Json renamed = Json::object();
  const std::string p = prefix;
  for (const char* key : {"ops", "host_us", "events", "runtime_events", "kernels", "kernel_us"}) {
    if (const Json* v = findJsonMember(o, p + key)) {
      renamed[std::string(key) == "ops" ? "count" : key] = *v;
    }
  }
  accumulate(renamed, n, w);
}

// The HostFactsComputeModel.
class FactsCompute final : public ComputeModel {
 public:
  FactsCompute(std::vector<LayerTimes> times, Nanos copy, Nanos optimizer, std::string trace)
      : m_times(std::move(times)),
        m_copy(copy),
        m_optimizer(optimizer),
        m_trace(std::move(trace)) {}
  // Other inputs than the trace's (`measured`) scale each layer by `scaler`'s ratio.
  void scaleWith(std::unique_ptr<RooflineComputeModel> scaler, const models::ModelInputs& measured,
                 std::unique_ptr<KernelCarry> carry) {
    m_scaler = std::move(scaler);
    m_measured = measured;
    m_carry = std::move(carry);
  }
  std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                     const models::ModelInputs& inputs) const override {
    if (!m_scaler) return m_times;
    return scaleToInputs(m_times, model, *m_scaler, m_measured, inputs, m_carry.get());
  }
  // DDP's copies and the optimizer's kernels are memory-bound: on another GPU they take its
  // bandwidth.
  Nanos copyTime(int64_t) const override { return carried(m_copy); }
  Nanos optimizerTime(int64_t) const override { return carried(m_optimizer); }
  Nanos graphTraversalTime(int64_t) const override { return Nanos::zero(); }
  std::string describe() const override {
    return "GPU kernel times measured in " + m_trace + (m_carry ? ", " + m_carry->describe() : "");
  }

 private:
  std::vector<LayerTimes> m_times;
  Nanos m_copy, m_optimizer;
  std::string m_trace;
  std::unique_ptr<RooflineComputeModel> m_scaler;
  models::ModelInputs m_measured;
  std::unique_ptr<KernelCarry> m_carry;

  Nanos carried(Nanos t) const {
    if (!m_carry) return t;
    return Nanos(std::llround(static_cast<double>(t.count()) * m_carry->memoryTimeRatio()));
  }
};

double positive(double us) {
  return std::max(0.0, us);
}

// Sum of `pick` over every fact.
template <typename Pick>
double sum(const std::vector<const HostFacts*>& facts, Pick pick) {
  double total = 0;
  for (const HostFacts* f : facts) total += pick(*f);
  return total;
}

}  // namespace

const HostWork& HostFacts::term(const std::string& name) const {
  auto it = terms.find(name);
  return it == terms.end() ? kNoWork : it->second;
}

double HostFacts::measuredMedianMs(const std::string& config) const {
  auto it = measuredMs.find(config);
  if (it == measuredMs.end() || it->second.empty()) return 0;
  std::vector<double> v = it->second;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double HostFacts::measuredHostMedianMs(const std::string& config, int phase) const {
  auto it = measuredHostMs.find(config);
  return it == measuredHostMs.end() ? 0.0 : median(it->second[static_cast<size_t>(phase)]);
}

StatusOr<std::vector<HostFacts>> loadHostFacts(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  ASSIGN_OR_RETURN(Json doc, parseJsonObject(text, path));
  const io::JsonReader reader(path);
  ASSIGN_OR_RETURN(std::string schema, reader.requiredString(doc, "", "schema"));
  if (schema != "ddpscope.host-facts/1") {
    return reader.error("schema", "\"ddpscope.host-facts/1\"", findJsonMember(doc, "schema"));
  }
  ASSIGN_OR_RETURN(const Json* models, reader.object(doc, "", "models", true));
  std::vector<HostFacts> out;
  for (const auto& [name, m] : models->items()) {
    const std::string at = jsonKeyPath("models", name);
    HostFacts f;
    f.model = name;
    ASSIGN_OR_RETURN(f.trace, reader.requiredString(m, at, "trace"));
    ASSIGN_OR_RETURN(const Json* measured, reader.object(m, at, "measured_ms", true));
    for (const auto& [config, values] : measured->items()) {
      if (config == "_job") {
        const Json& job = values;  // a lambda cannot capture a structured binding (C++20)
        auto num = [&job](const char* key) {
          const Json* v = findJsonMember(job, key);
          return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : 0;
        };
        f.batch = num("batch");
        f.seqLen = num("seq_len");
        f.imageSize = num("image_size");
        if (const Json* d = findJsonMember(values, "dtype"); d && d->is_string()) {
          f.dtype = d->get<std::string>();
        }
      } else if (config == "_buckets") {
        for (const auto& [c, b] : values.items()) {
          const Json* sizes = findJsonMember(b, "rebuilt_bucket_sizes");
          if (sizes == nullptr || !sizes->is_string()) continue;
          for (const std::string& s : splitString(sizes->get<std::string>(), ',')) {
            if (auto v = parseInt64(trimString(s))) f.rebuiltBuckets[c].push_back(*v);
          }
        }
      } else if (config == "_host") {
        for (const auto& [c, phases] : values.items()) {
          for (int phase = 0; phase < 2; ++phase) {
            const Json* times = findJsonMember(phases, phase == 0 ? "forward" : "backward");
            if (times == nullptr || !times->is_array()) continue;
            for (const Json& v : *times) {
              if (v.is_number()) f.measuredHostMs[c][phase].push_back(v.get<double>());
            }
          }
        }
      } else if (config[0] != '_' && values.is_array()) {
        for (const Json& v : values) {
          if (v.is_number()) f.measuredMs[config].push_back(v.get<double>());
        }
      }
    }
    const Json* steps = findJsonMember(m, "steps");
    RETURN_IF_ERROR(
        addHostFactsSteps(steps != nullptr ? *steps : Json(), path, jsonKeyPath(at, "steps"), f));
    if (f.batch <= 0) {
      return reader.error(jsonKeyPath(at, "measured_ms._job.batch"), "the run's batch per rank",
                          nullptr);
    }
    out.push_back(std::move(f));
  }
  if (out.empty()) return reader.error("models", "at least one model", models);
  return out;
}

Status addHostFactsSteps(const Json& steps, const std::string& origin, const std::string& path,
                         HostFacts& f) {
  if (!steps.is_array() || steps.empty()) {
    return io::JsonReader(origin).error(path, "an array of profiled steps", &steps);
  }
  const double n = static_cast<double>(steps.size());
  for (const Json& s : steps) {
    auto num = [&](const char* key) { return share(s, key, n); };
    f.stepUs += num("step_us");
    f.events += num("events");
    f.kernelUs += num("kernel_us");
    f.moduleCalls += num("module_calls");
    if (const Json* terms = findJsonMember(s, "terms"); terms && terms->is_object()) {
      for (const auto& [term, o] : terms->items()) accumulate(o, n, f.terms[term]);
    }
    if (const Json* layers = findJsonMember(s, "layers"); layers && layers->is_object()) {
      for (const auto& [layer, o] : layers->items()) {
        accumulateLayer(o, "forward_", n, f.layers[layer].forward);
        accumulateLayer(o, "backward_", n, f.layers[layer].backward);
      }
    }
  }
  return Status::ok();
}

StatusOr<std::optional<ProfileHostFacts>> hostFactsOfProfile(const MeasuredProfile& profile,
                                                             const models::ModelSpec& model) {
  if (profile.hostFacts.empty()) return std::optional<ProfileHostFacts>();
  const std::string origin = profile.origin + ": metadata host_facts";
  ASSIGN_OR_RETURN(const Json doc, parseJsonObject(profile.hostFacts, origin));
  const Json* steps = findJsonMember(doc, "steps");
  ProfileHostFacts out;
  HostFacts& facts = out.facts;
  facts.model = model.name;
  facts.trace = profile.hostFactsTrace.empty() ? profile.origin : profile.hostFactsTrace;
  // The kernels were measured at the run's own inputs and precision: simulateWithHostFacts
  // scales them to others.
  const models::ModelInputs inputs = measuredInputs(profile, model);
  facts.batch = inputs.batch;
  facts.seqLen = inputs.seqLen;
  facts.imageSize = inputs.imageSize;
  facts.dtype = profile.settings.dtype;
  facts.gpu = profile.gpu;
  RETURN_IF_ERROR(addHostFactsSteps(steps != nullptr ? *steps : Json(), origin, "steps", facts));
  out.steps = static_cast<int>(steps->size());
  return std::optional<ProfileHostFacts>(std::move(out));
}

models::ModelInputs hostFactsInputs(const HostFacts& facts) {
  models::ModelInputs inputs;
  inputs.batch = facts.batch;
  inputs.seqLen = facts.seqLen;
  inputs.imageSize = facts.imageSize;
  return inputs;
}

StatusOr<models::ModelSpec> hostFactsModel(const HostFacts& facts) {
  ASSIGN_OR_RETURN(models::ModelSpec model, models::loadZooModel(facts.model));
  return withHostFactsOps(std::move(model), facts);
}

StatusOr<models::ModelSpec> withHostFactsOps(models::ModelSpec model, const HostFacts& facts) {
  for (models::LayerSpec& layer : model.layers) {
    auto it = facts.layers.find(layer.name);
    if (it == facts.layers.end()) {
      return invalidArgument(facts.trace + ": no host facts for layer " + layer.name + " of " +
                             facts.model);
    }
    layer.forwardOps = static_cast<int>(std::lround(it->second.forward.count));
    layer.backwardOps = static_cast<int>(std::lround(it->second.backward.count));
    layer.forwardLaunches = it->second.forward.runtimeEvents;
    layer.backwardLaunches = it->second.backward.runtimeEvents;
  }
  // A DDP forward that broadcast no buffer: the traced module has none (the GPU kit's GPT-2 and
  // BERT, whose attention masks are not buffers, unlike the zoo's from transformers).
  if (facts.term("ddp_forward").count > 0 && facts.term("buffer_sync").count == 0) {
    model.buffers.clear();
  }
  return model;
}

std::unique_ptr<ComputeModel> hostFactsComputeModel(const HostFacts& facts,
                                                    const models::ModelSpec& model,
                                                    std::unique_ptr<RooflineComputeModel> scaler,
                                                    const models::ModelInputs& measured,
                                                    std::unique_ptr<KernelCarry> carry) {
  std::vector<LayerTimes> times;
  for (const models::LayerSpec& layer : model.layers) {
    auto it = facts.layers.find(layer.name);
    LayerTimes t;
    if (it != facts.layers.end()) {
      t.forward = Nanos::fromMicrosDouble(it->second.forward.kernelUs);
      t.backward = Nanos::fromMicrosDouble(it->second.backward.kernelUs);
    }
    times.push_back(t);
  }
  if (!times.empty()) {
    // The loss (and what no module owns) runs after the last layer's forward; its gradient
    // before the last layer's backward.
    auto unowned = facts.layers.find("unattributed");
    double forwardUs = facts.term("loss").kernelUs;
    double backwardUs = 0;
    if (unowned != facts.layers.end()) {
      forwardUs += unowned->second.forward.kernelUs;
      backwardUs += unowned->second.backward.kernelUs;
    }
    times.back().forward += Nanos::fromMicrosDouble(forwardUs);
    times.back().backward += Nanos::fromMicrosDouble(backwardUs);
  }
  const HostWork& in = facts.term("copy_in");
  const HostWork& back = facts.term("copy_back");
  const double copies = in.count + back.count;
  const Nanos copy =
      Nanos::fromMicrosDouble(copies > 0 ? (in.kernelUs + back.kernelUs) / copies : 0.0);
  auto compute = std::make_unique<FactsCompute>(
      std::move(times), copy, Nanos::fromMicrosDouble(facts.term("optimizer").kernelUs),
      facts.trace);
  if (scaler) compute->scaleWith(std::move(scaler), measured, std::move(carry));
  return compute;
}

HostProfile hostProfileFromFacts(const std::vector<const HostFacts*>& facts,
                                 const HostProfile& profiler) {
  HostProfile p;
  p.profilerEventUs = profiler.profilerEventUs;
  p.profilerModuleUs = profiler.profilerModuleUs;
  const double profilerModuleUs = p.profilerModuleUs;
  auto term = [&](const char* name, auto field) {
    return sum(facts, [&](const HostFacts& f) { return f.term(name).*field; });
  };
  // The profiler's time in `events` events.
  auto profilerUs = [&](double events, double /*runtime*/) { return p.profilerEventUs * events; };
  auto perCount = [&](double hostUs, double profiled, double count) {
    return count > 0 ? positive((hostUs - profiled) / count) : 0.0;
  };
  auto profiledIn = [&](const char* name) {
    return profilerUs(term(name, &HostWork::events), term(name, &HostWork::runtimeEvents));
  };
  // Forward and backward, over every layer (and what no module owns).
  double fOps = 0, fHost = 0, fProfiled = 0, bNodes = 0, bHost = 0, bProfiled = 0;
  for (const HostFacts* f : facts) {
    for (const auto& [name, l] : f->layers) {
      fOps += l.forward.count;
      fHost += l.forward.hostUs;
      fProfiled += profilerUs(l.forward.events, l.forward.runtimeEvents);
      bNodes += l.backward.count;
      bHost += l.backward.hostUs;
      bProfiled += profilerUs(l.backward.events, l.backward.runtimeEvents);
    }
  }
  const double calls = term("module_self", &HostWork::count);
  p.moduleUs =
      calls > 0 ? positive(term("module_self", &HostWork::hostUs) / calls - profilerModuleUs) : 0;
  p.forwardOpUs = perCount(fHost, fProfiled, fOps);
  p.backwardNodeUs =
      perCount(bHost + term("backward_node_gap", &HostWork::hostUs), bProfiled, bNodes);
  const double params = term("accumulate_grad", &HostWork::count);
  p.accumulateGradUs = perCount(term("accumulate_grad_inner", &HostWork::hostUs) +
                                    term("accumulate_grad_gap", &HostWork::hostUs),
                                profiledIn("accumulate_grad_inner"), params);
  p.ddp.gradHookUs = perCount(term("accumulate_grad", &HostWork::hostUs) -
                                  term("accumulate_grad_inner", &HostWork::hostUs) -
                                  term("allreduce_call", &HostWork::hostUs),
                              profiledIn("accumulate_grad") - profiledIn("accumulate_grad_inner") -
                                  profiledIn("allreduce_call"),
                              params);
  double stepHost = 0, stepProfiled = 0;
  for (const char* name : {"zero_grad", "loss", "sync", "main_other"}) {
    stepHost += term(name, &HostWork::hostUs);
    stepProfiled += profiledIn(name);
  }
  const double n = static_cast<double>(facts.size());
  p.stepUs = perCount(stepHost, stepProfiled, n);
  p.optimizerUs = perCount(term("optimizer", &HostWork::hostUs), profiledIn("optimizer"), n);
  p.ddp.allreduceLaunchUs =
      perCount(term("allreduce_call", &HostWork::hostUs), profiledIn("allreduce_call"),
               term("allreduce_call", &HostWork::count));
  p.ddp.copyBackUs = perCount(
      term("copy_back", &HostWork::hostUs) + term("backward_other", &HostWork::hostUs) +
          term("backward_other_gap", &HostWork::hostUs),
      profiledIn("copy_back") + profiledIn("backward_other"), term("copy_back", &HostWork::count));
  // The buffer broadcast: each copy back is a buffer's own; the flatten, the broadcast call and
  // the unflatten are its dtype group's (their per-buffer work is in their events).
  const double broadcasts = term("buffer_sync", &HostWork::broadcasts);
  if (broadcasts > 0) {
    p.ddp.bufferSyncUs =
        perCount(term("buffer_sync", &HostWork::hostUs) - term("buffer_copy", &HostWork::hostUs),
                 profiledIn("buffer_sync") - profiledIn("buffer_copy"), broadcasts);
    p.ddp.bufferCopyUs = perCount(term("buffer_copy", &HostWork::hostUs), profiledIn("buffer_copy"),
                                  term("buffer_copy", &HostWork::count));
  } else {  // facts that did not count the broadcasts: all of it per buffer
    p.ddp.bufferCopyUs = perCount(term("buffer_sync", &HostWork::hostUs), profiledIn("buffer_sync"),
                                  term("buffer_sync", &HostWork::buffers));
  }
  p.ddp.stepOverheadUs = perCount(term("ddp_wrapper", &HostWork::hostUs), 0, n);
  return p;
}

std::optional<double> profilerCostFromPhases(const std::vector<const HostFacts*>& facts,
                                             double profilerModuleUs) {
  // The host work of the two phases in the profiled steps: every layer's ops and nodes, the
  // module calls' own time, the autograd engine's gaps, AccumulateGrad with DDP's hooks,
  // finalize, DDP's wrapper and buffer broadcast, zero_grad, the loss and the main thread's rest
  // (not the step's closing synchronization, which waits for the GPU after the phases).
  static const char* const kPhaseTerms[] = {
      "module_self",    "backward_node_gap",  "accumulate_grad", "accumulate_grad_gap", "copy_back",
      "backward_other", "backward_other_gap", "ddp_wrapper",     "buffer_sync",         "zero_grad",
      "loss",           "main_other"};
  double extra = 0, events = 0;
  for (const HostFacts* f : facts) {
    const double forward = f->measuredHostMedianMs("ddp-default", 0);
    const double backward = f->measuredHostMedianMs("ddp-default", 1);
    if (forward <= 0 || backward <= 0) return std::nullopt;
    double host = 0;
    for (const auto& [name, l] : f->layers) {
      host += l.forward.hostUs + l.backward.hostUs;
      events += l.forward.events + l.backward.events;
    }
    for (const char* name : kPhaseTerms) {
      host += f->term(name).hostUs;
      events += f->term(name).events;
    }
    extra += host - profilerModuleUs * f->term("module_self").count - (forward + backward) * 1000;
  }
  if (events <= 0) return std::nullopt;
  return std::max(0.0, extra / events);
}

StatusOr<bool> fitUnprofiledHostTerms(const std::vector<const HostFacts*>& facts, HostProfile& p) {
  // Columns: module_us, forward_op_us, launch_us, step_overhead_us, backward_node_us,
  // accumulate_grad_us, grad_hook_us, allreduce_launch_us. DDP's buffer broadcast is costed by
  // its ops: per buffer its copy back (one op, one kernel), per dtype group the flatten and the
  // unflatten (an op and a kernel each) and c10d's broadcast call, the same ProcessGroup call
  // as DDP's allreduce (the kit's models have buffers in one or two models, too few to fit
  // terms of their own).
  constexpr size_t kColumns = 8;
  std::vector<std::vector<double>> rows;
  std::vector<double> ys;
  for (const HostFacts* f : facts) {
    if (f->measuredHostMedianMs("eager", 0) <= 0) return false;
    ASSIGN_OR_RETURN(models::ModelSpec model, hostFactsModel(*f));
    const std::string dtype = f->dtype.empty() ? "bf16" : f->dtype;  // as simulateHostFacts
    const bool autocast = dtype == "bf16" || dtype == "fp16";
    double calls = 0, ops = 0, forwardLaunches = 0, nodes = 0, backwardLaunches = 0;
    for (const models::LayerSpec& layer : model.layers) {
      const models::HostOps h = models::hostOps(layer, autocast);
      calls += h.moduleCall ? 1 : 0;
      ops += h.forward;
      forwardLaunches += h.forwardLaunches;
      nodes += h.backward;
      backwardLaunches += h.backwardLaunches;
    }
    const double params = static_cast<double>(model.params.size());
    const double buffers = static_cast<double>(model.buffers.size());
    const double broadcasts = static_cast<double>(
        ddp::coalescedBroadcastBytes(ddp::buffersAsTensors(model.buffers)).size());
    bool anyDdp = false;
    for (const auto& [config, times] : f->measuredHostMs) {
      const bool ddp = config != "eager";
      auto buckets = f->rebuiltBuckets.find(config);
      if (ddp && (buckets == f->rebuiltBuckets.end() || buckets->second.empty())) continue;
      const double forward = f->measuredHostMedianMs(config, 0) * 1000 - p.stepUs;
      const double backward = f->measuredHostMedianMs(config, 1) * 1000;
      if (forward <= 0 || backward <= 0) continue;
      anyDdp = anyDdp || ddp;
      const double d = ddp ? 1 : 0;
      const double bufferOps = d * (buffers + 2 * broadcasts);
      rows.push_back(
          {calls, ops + bufferOps, forwardLaunches + bufferOps, d, 0, 0, 0, d * broadcasts});
      ys.push_back(forward);
      rows.push_back({0, 0, backwardLaunches, 0, nodes, params, d * params,
                      ddp ? static_cast<double>(buckets->second.size()) : 0.0});
      ys.push_back(backward);
    }
    if (!anyDdp) return false;
  }
  const std::vector<double> c = nnlsRelative(rows, ys);
  if (c.size() != kColumns) return false;
  p.moduleUs = c[0];
  p.forwardOpUs = c[1];
  p.launchUs = c[2];
  p.ddp.stepOverheadUs = c[3];
  p.backwardNodeUs = c[4];
  p.accumulateGradUs = c[5];
  p.ddp.gradHookUs = c[6];
  p.ddp.allreduceLaunchUs = c[7];
  p.ddp.bufferCopyUs = c[1] + c[2];
  p.ddp.bufferSyncUs = c[7] + 2 * (c[1] + c[2]);
  p.ddp.copyBackUs = 0;
  p.ddp.finalizeWaitUs = 0;
  return true;
}

StatusOr<SimResult> simulateWithHostFacts(const HostFacts& facts, const models::ModelSpec& model,
                                          const ClusterSpec& cluster, const WorldLayout& layout,
                                          SimOptions options, const HostProfile& profile) {
  ASSIGN_OR_RETURN(models::ModelSpec counted, withHostFactsOps(model, facts));
  // At other inputs than the trace's (a --batch what-if), each layer's measured kernels scale
  // by the cluster's compute model (its kernel fit where it has one) at the trace's dtype.
  models::ModelInputs measured = hostFactsInputs(facts);
  if (measured.batch <= 0) measured.batch = model.defaultInputs.batch;
  if (measured.seqLen <= 0) measured.seqLen = model.defaultInputs.seqLen;
  if (measured.imageSize <= 0) measured.imageSize = model.defaultInputs.imageSize;
  ASSIGN_OR_RETURN(std::unique_ptr<RooflineComputeModel> scaler,
                   RooflineComputeModel::create(cluster.device,
                                                facts.dtype.empty() ? options.dtype : facts.dtype));
  ASSIGN_OR_RETURN(
      std::unique_ptr<KernelCarry> carry,
      KernelCarry::create(facts.gpu, facts.dtype, cluster.device, options.dtype, facts.trace));
  std::unique_ptr<ComputeModel> compute =
      hostFactsComputeModel(facts, counted, std::move(scaler), measured, std::move(carry));
  HostModel host;
  host.profile = profile;
  host.runsAhead = true;
  options.host = host;
  return simulate(counted, cluster, layout, options, compute.get());
}

StatusOr<HostSimulation> simulateHostFacts(const HostFacts& facts, const ClusterSpec& cluster,
                                           const HostProfile& profile) {
  ASSIGN_OR_RETURN(models::ModelSpec model, models::loadZooModel(facts.model));
  SimOptions options;
  options.inputs = hostFactsInputs(facts);
  options.dtype = facts.dtype.empty() ? "bf16" : facts.dtype;
  options.ddp.autocast = options.dtype == "bf16" || options.dtype == "fp16";
  options.recordTrace = false;
  options.simulatePlain = true;
  ASSIGN_OR_RETURN(SimResult result, simulateWithHostFacts(facts, model, cluster, WorldLayout{1, 1},
                                                           options, profile));
  HostSimulation out;
  out.eagerMs = result.summary.plainStep.toMillis();
  out.ddpMs = result.summary.stepTime.toMillis();
  return out;
}

StatusOr<HostFit> fitHostProfile(const std::vector<const HostFacts*>& facts,
                                 const ClusterSpec& cluster, const std::string& name) {
  return fitHostProfileWith(
      facts,
      [&cluster](const HostFacts& f, const HostProfile& p) {
        return simulateHostFacts(f, cluster, p);
      },
      name, "host facts: scripts/gpu_kit/host_facts.py");
}

StatusOr<HostFit> fitHostProfileWith(const std::vector<const HostFacts*>& facts,
                                     const HostFactsSimulator& simulateFacts,
                                     const std::string& name, const std::string& factsFrom) {
  if (facts.empty()) return invalidArgument("a host fit needs the facts of at least one model");
  for (const HostFacts* f : facts) {
    if (f->measuredMedianMs("eager") <= 0 && f->measuredMedianMs("ddp-default") <= 0) {
      return invalidArgument("a host fit needs an unprofiled step of " + f->trace +
                             " (eager or DDP) to fit the profiler's cost against");
    }
  }
  // The profiler's cost per module call: the mean own time of the module calls whose forward is
  // one aten op (their Python is nn.Module.__call__ alone, a few µs unprofiled).
  const double oneOpCalls =
      sum(facts, [](const HostFacts& f) { return f.term("module_self_one_op").count; });
  const double moduleProfiler =
      oneOpCalls > 0
          ? sum(facts, [](const HostFacts& f) { return f.term("module_self_one_op").hostUs; }) /
                oneOpCalls
          : 0.0;
  auto profilerAt = [&](double e) {
    HostProfile q;
    q.profilerEventUs = e;
    q.profilerModuleUs = moduleProfiler;
    return q;
  };
  // The profile at a profiler cost e: the profiled route's terms, the per-op and DDP ones from
  // the unprofiled host times where the facts have them.
  bool unprofiled = false;
  auto profileAt = [&](double e) -> StatusOr<HostProfile> {
    HostProfile p = hostProfileFromFacts(facts, profilerAt(e));
    ASSIGN_OR_RETURN(unprofiled, fitUnprofiledHostTerms(facts, p));
    return p;
  };
  auto cost = [&](double e) -> StatusOr<double> {
    ASSIGN_OR_RETURN(const HostProfile p, profileAt(e));
    double total = 0;
    for (const HostFacts* f : facts) {
      ASSIGN_OR_RETURN(HostSimulation s, simulateFacts(*f, p));
      const double eager = f->measuredMedianMs("eager");
      const double ddp = f->measuredMedianMs("ddp-default");
      if (eager > 0) total += std::pow(std::log(s.eagerMs / eager), 2);
      if (ddp > 0) total += std::pow(std::log(s.ddpMs / ddp), 2);
    }
    return total;
  };
  // With the unprofiled phase times the profiler's cost per event is what the profiled steps'
  // host work has more than the same work unprofiled, per event it recorded; then it only sets
  // step_us and optimizer_us. Otherwise a 17-point grid over [0, 8] µs, then two finer grids
  // around the best.
  double e0 = 4, eSpan = 4;
  double best = std::numeric_limits<double>::infinity(), bestE = 0;
  const std::optional<double> measuredE = profilerCostFromPhases(facts, moduleProfiler);
  if (measuredE) {
    bestE = *measuredE;
    ASSIGN_OR_RETURN(best, cost(bestE));
  }
  for (int round = 0; round < (measuredE ? 0 : 3); ++round) {
    for (int i = 0; i <= 16; ++i) {
      const double e = std::max(0.0, e0 - eSpan + eSpan * i / 8.0);
      ASSIGN_OR_RETURN(double c, cost(e));
      if (c < best) {
        best = c;
        bestE = e;
      }
    }
    e0 = bestE;
    eSpan /= 8;
  }
  HostFit fit;
  ASSIGN_OR_RETURN(fit.profile, profileAt(bestE));
  // To 0.001 µs: what a profile file holds (and what a regeneration compares).
  auto round3 = [](double& us) { us = std::round(us * 1000) / 1000; };
  for (const HostTerm& term : hostProfileTerms()) round3(fit.profile.*term.field);
  for (const auto& [key, field] : ddpOverheadTerms()) round3(fit.profile.ddp.*field);
  round3(fit.profile.profilerEventUs);
  round3(fit.profile.profilerModuleUs);
  fit.sumSquaredLogError = best;
  fit.profile.name = name;
  std::ostringstream source, stands;
  source << "fitted by ddpscope on the profiled steps of";
  for (const HostFacts* f : facts) source << " " << f->trace;
  const bool eagerAndDdp = std::all_of(facts.begin(), facts.end(), [](const HostFacts* f) {
    return f->measuredMedianMs("eager") > 0 && f->measuredMedianMs("ddp-default") > 0;
  });
  source << " (" << factsFrom << ") against their unprofiled "
         << (eagerAndDdp ? "eager and DDP medians" : "steps given")
         << "; the profiler's cost per event "
         << (measuredE ? "from the profiled against the unprofiled host time per phase ("
                       : "fitted (")
         << formatShortest(std::round(bestE * 100) / 100)
         << " us), per module call the mean own time of one-op module calls ("
         << formatShortest(std::round(moduleProfiler * 100) / 100) << " us)";
  if (unprofiled) {
    source << "; the per-op and DDP terms fitted on the host's unprofiled time per phase in the "
              "timed steps";
  }
  fit.profile.source = source.str();
  fit.profile.standsFor = "the traces' PyTorch, CPU and settings, profiler off";
  if (!unprofiled &&
      sum(facts, [](const HostFacts& f) { return f.term("buffer_sync").buffers; }) == 0) {
    fit.notes.push_back(
        "no buffer broadcast in the traces: ddp.buffer_sync_us and buffer_copy_us are 0 "
        "(unknown)");
  }
  if (sum(facts, [](const HostFacts& f) { return f.term("allreduce_call").count; }) == 0) {
    fit.notes.push_back("no allreduce call in the traces: ddp.allreduce_launch_us is 0 (unknown)");
  }
  return fit;
}

}  // namespace ddpscope::sim::replay
