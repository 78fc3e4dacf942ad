// ddpscope._core: the C++ side of the Python package (pybind11).
//
// It binds api/ (and traces/ for the live recorder), never the CLI (docs/ARCHITECTURE.md: python/
// includes base, io, traces and api; the configure fails when ddpscope_cli reaches its link
// line). The
// Python API turns its keyword arguments into named settings under the CLI's flag names (its
// underscores become dashes; base/setting_values.h), which reach the same api/ parsers the
// CLI's flags reach: every setting is spelled, validated and reported once,
// and every error a Python user sees is the CLI's message. What it binds:
//   - models: the one model resolver (zoo name, shorthand, file), the file loader and the JSON
//     parser (Model.from_torch hands the exporter's JSON to the same parser the CLI uses);
//   - simulate: the library calls `ddpscope simulate` makes (api/: parseSimulationRequest from
//     named settings, sim::makeWorldLayout, runSimulation, simSummaryJson), keeping the timeline
//     so that SimResult.save_trace and the per-collective timings need no second simulation;
//   - buckets: the bucket plan request (api/buckets_request.h) and its JSON;
//   - sweep: the sweep plan, its run and its JSON (api/sweep_request.h);
//   - plan: the bucket planner's input, run and JSON (api/plan_request.h);
//   - overlap: traces' reader, computeOverlap and overlapJson;
//   - replay: the replay report and its JSON (api/replay_request.h);
//   - import_torch, calibrate: api/import_request.h, calibrate_request.h;
//   - cluster_from_topo: sim/topo (the settings and the builder `ddpscope cluster from-topo` uses);
//   - write_trace: builds a traces::Timeline from the live recorder's spans and writes it with
//     the Chrome writer every other producer uses.
// Errors come back as ddpscope._core.Error(message, exit_code): the CLI's message and exit code.
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api/buckets_request.h"
#include "api/calibrate_request.h"
#include "api/cluster_settings.h"
#include "api/import_request.h"
#include "api/model_request.h"
#include "api/plan_request.h"
#include "api/replay_request.h"
#include "api/simulation_json.h"
#include "api/simulation_request.h"
#include "api/sweep_request.h"
#include "base/nanos.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_writer.h"
#include "traces/overlap.h"
#include "traces/timeline.h"

namespace py = pybind11;

namespace ddpscope::python {
namespace {

// The Python exception type (set in the module init); carries the CLI's exit code.
PyObject* g_errorType = nullptr;

[[noreturn]] void throwStatus(const Status& status) {
  py::object type = py::reinterpret_borrow<py::object>(g_errorType);
  py::object error = type(status.message(), status.exitCode());
  PyErr_SetObject(g_errorType, error.ptr());
  throw py::error_already_set();
}

template <typename T>
T valueOrThrow(StatusOr<T> result) {
  if (!result.isOk()) throwStatus(result.status());
  return std::move(result).value();
}

// nlohmann::json -> Python objects (dict, list, int, float, str, bool, None).
py::object toPython(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (const auto& [key, value] : j.items()) d[py::str(key)] = toPython(value);
      return d;
    }
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& value : j) l.append(toPython(value));
      return l;
    }
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    default:
      return py::none();
  }
}

// One simulation and what it produced.
class Simulation {
 public:
  Simulation(sim::SimResult result, nlohmann::json summary)
      : m_result(std::move(result)), m_summary(std::move(summary)) {}

  py::object summary() const { return toPython(m_summary); }

  // Every communication span of rank 0 (the timeline's first rank): one dict per collective.
  py::list collectives() const {
    py::list out;
    const traces::Timeline& t = m_result.timeline;
    if (t.rankCount() == 0) return out;
    const traces::RankTrack& rank = t.rank(0);
    for (const traces::Lane& lane : rank.lanes) {
      if (lane.kind != traces::LaneKind::kComm) continue;
      for (const traces::Span& s : lane.spans) {
        if (!traces::isCommunication(s.category)) continue;
        py::dict d;
        d["name"] = s.name;
        d["category"] = traces::categoryName(s.category);
        d["lane"] = lane.name;
        d["start_ns"] = s.start.count();
        d["end_ns"] = s.end().count();
        d["duration_ns"] = s.duration.count();
        for (const auto& [key, value] : s.args) {
          if (key != traces::kArgBucket && key != traces::kArgBytes && key != traces::kArgIteration)
            continue;
          const py::str name(key);  // a lambda cannot capture a structured binding (C++20)
          std::visit([&d, &name](const auto& v) { d[name] = v; }, value);
        }
        out.append(std::move(d));
      }
    }
    return out;
  }

  // format "chrome": one file at `path`; "kineto": one PyTorch profiler trace per rank at
  // traces::perRankTracePath(path, rank), as `--trace-format kineto` writes them.
  std::vector<std::string> saveTrace(const std::string& path, const std::string& format) const {
    if (m_result.timeline.rankCount() == 0) {
      throwStatus(invalidArgument("save_trace: this simulation recorded no trace"));
    }
    std::vector<std::string> files;
    if (format == "chrome") {
      files.push_back(path);
      const Status status = traces::writeChromeTrace(m_result.timeline, path);
      if (!status.isOk()) throwStatus(status);
      return files;
    }
    if (format != "kineto") {
      throwStatus(
          invalidArgument("save_trace: format: expected chrome or kineto, got '" + format + "'"));
    }
    for (int r = 0; r < m_result.timeline.rankCount(); ++r) {
      files.push_back(traces::perRankTracePath(path, m_result.timeline.rank(r).rank));
      const Status status = traces::writeKinetoTrace(m_result.timeline, r, files.back());
      if (!status.isOk()) throwStatus(status);
    }
    return files;
  }

 private:
  sim::SimResult m_result;
  nlohmann::json m_summary;
};

// Named settings from Python: {name: text} with the CLI's flag names (a switch that is on is "").
SettingValues settingValues(const std::map<std::string, std::string>& settings) {
  SettingValues values;
  for (const auto& [name, text] : settings) values.set(name, text);
  return values;
}

void checkNames(const SettingValues& values, const std::vector<SettingSpec>& specs,
                const std::string& command) {
  const Status status =
      checkSettingNames(values, specs, " (see 'ddpscope " + command + " --help')");
  if (!status.isOk()) throwStatus(status);
}

// One simulation as `ddpscope simulate` runs it, through the same library calls
// (api/simulation_request.h), keeping the timeline for save_trace and collectives.
Simulation simulate(const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::simulationSettingList(/*sweep=*/false), "simulate");
  api::SimulationRequest req = valueOrThrow(api::parseSimulationRequest(values, /*sweep=*/false));
  const sim::WorldLayout layout = valueOrThrow(api::layoutFromSettings(values, req.cluster));
  req.options.recordTrace = true;
  StatusOr<sim::SimResult> result = [&] {
    py::gil_scoped_release release;
    return api::runSimulation(req, layout);
  }();
  sim::SimResult r = valueOrThrow(std::move(result));
  nlohmann::json summary = api::simSummaryJson(req, layout, r.summary);
  summary["layers"] = valueOrThrow(api::layerKernelsJson(req));
  return Simulation(std::move(r), std::move(summary));
}

// DDP's bucket plan as `ddpscope buckets --json` prints it (api/buckets_request.h).
py::object buckets(const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::bucketPlanSettingList(), "buckets");
  const api::BucketPlanReport report = valueOrThrow(api::bucketPlanFromSettings(values));
  return toPython(api::bucketPlanReportJson(report));
}

// `ddpscope sweep --json`'s document (api/sweep_request.h): {"model", "cluster",
// "workload", "rows", "best"}.
py::object sweep(const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::simulationSettingList(/*sweep=*/true), "sweep");
  const api::SweepRequest plan = valueOrThrow(api::parseSweepRequest(values));
  StatusOr<sim::SweepResult> result = [&] {
    py::gil_scoped_release release;
    return api::runSweepRequest(plan, nullptr);
  }();
  return toPython(api::sweepJson(plan, valueOrThrow(std::move(result))));
}

// `ddpscope plan --json`'s document (api/plan_request.h): the default, the best uniform cap,
// the planned bucket_cap_mb_list layout and the DDP keyword arguments.
py::object plan(const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::planSettingList(), "plan");
  const api::PlanRequest input = valueOrThrow(api::parsePlanRequest(values));
  StatusOr<sim::PlanResult> result = [&] {
    py::gil_scoped_release release;
    return api::runPlanRequest(input);
  }();
  return toPython(api::planJson(input, valueOrThrow(std::move(result))));
}

// `ddpscope overlap --json`'s document for a trace (traces/overlap.h).
py::object overlap(const std::string& path) {
  const traces::Timeline timeline = valueOrThrow(traces::readChromeTrace(path));
  return toPython(traces::overlapJson(path, traces::computeOverlap(timeline)));
}

// `ddpscope replay --json`'s document (api/replay_request.h); `traceOut` (non-empty): also
// write the what-if's Chrome trace there, as replay --trace does.
py::object replay(const std::map<std::string, std::string>& settings, const std::string& traceOut) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::replaySettingList(), "replay");
  StatusOr<api::ReplayReport> result = [&] {
    py::gil_scoped_release release;
    return api::runReplay(values, /*recordTrace=*/!traceOut.empty());
  }();
  const api::ReplayReport report = valueOrThrow(std::move(result));
  if (!traceOut.empty()) {
    const Status status = traces::writeChromeTrace(report.whatIfResult->timeline, traceOut);
    if (!status.isOk()) throwStatus(status);
  }
  return toPython(api::replayJson(report));
}

// `ddpscope import-torch --json`'s document (api/import_request.h); writes the trace.
py::object importTorch(const std::vector<std::string>& paths,
                       const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::importTorchSettingList(), "import-torch");
  StatusOr<api::TorchImport> result = [&] {
    py::gil_scoped_release release;
    return api::importTorchTraces(paths, values);
  }();
  return toPython(api::importTorchJson(valueOrThrow(std::move(result))));
}

// `ddpscope cluster from-topo` (sim/topo/cluster_from_topo.h): the cluster file's text (what
// `-o FILE` writes, byte for byte) built from a `nvidia-smi topo -m` file (`isText` false: `topo`
// is its path) or its text, with the command's flags as settings. Text has no file name: its origin
// in messages is "<topo text>" and the cluster's default name "from-topo".
std::string clusterFromTopo(const std::string& topo, bool isText,
                            const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::topoClusterSettingList(), "cluster from-topo");
  const api::FromTopoRequest request =
      valueOrThrow(api::parseFromTopoRequest(values, topo, isText));
  const sim::topo::TopoCluster cluster = valueOrThrow(api::buildClusterFromTopo(request));
  return cluster.jsonText;
}

// `ddpscope cluster calibrate --nccl-tests LOG --json`'s document (sim/cost/latency_fit.h) from
// {flag name: text} settings, with the calibrated cluster's file text under "cluster_json_text".
py::object clusterCalibrateNcclTests(const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::ncclTestsCalibrationSettingList(), "cluster calibrate");
  const api::NcclTestsCalibrationRun run =
      valueOrThrow(api::calibrateFromNcclTestsSettings(values));
  nlohmann::json doc = sim::ncclTestsCalibrationJson(run.calibration);
  doc["cluster_json_text"] = run.calibration.jsonText;
  return toPython(doc);
}

// `ddpscope calibrate --json`'s document (api/calibrate_request.h); writes the cluster.
py::object calibrate(const std::vector<std::string>& runs,
                     const std::map<std::string, std::string>& settings) {
  const SettingValues values = settingValues(settings);
  checkNames(values, api::calibrateSettingList(), "calibrate");
  StatusOr<api::ClusterCalibration> result = [&] {
    py::gil_scoped_release release;
    return api::calibrateCluster(runs, values);
  }();
  return toPython(api::calibrateJson(valueOrThrow(std::move(result))));
}

traces::Category categoryOrThrow(const std::string& name) {
  const std::optional<traces::Category> c = traces::parseCategory(name);
  if (!c) throwStatus(invalidArgument("write_trace: unknown span category '" + name + "'"));
  return *c;
}

traces::Args argsFromDict(const py::dict& d) {
  traces::Args args;
  for (const auto& [key, value] : d) {
    const std::string k = py::str(key);
    if (py::isinstance<py::bool_>(value)) {
      args.set(k, static_cast<int64_t>(value.cast<bool>()));
    } else if (py::isinstance<py::int_>(value)) {
      args.set(k, value.cast<int64_t>());
    } else if (py::isinstance<py::float_>(value)) {
      args.set(k, value.cast<double>());
    } else {
      args.set(k, std::string(py::str(value)));
    }
  }
  return args;
}

// Writes a trace from plain Python data (the recorder's):
//   metadata: {key: int|float|str|bool}
//   ranks: [{"rank": R, "lanes": [{"name", "kind", "spans": [(name, category, start_ns,
//            duration_ns, {args})]}], "iterations": [(index, start_ns, duration_ns)]}]
// Spans are sorted per lane by start (the recorder's threads append out of order).
void writeTrace(const std::string& path, const std::string& name, const py::dict& metadata,
                const py::list& ranks) {
  traces::Timeline t;
  t.setName(name);
  t.mutableMetadata() = argsFromDict(metadata);
  for (const auto& rankObj : ranks) {
    const py::dict rank = rankObj.cast<py::dict>();
    const int rankId = rank["rank"].cast<int>();
    t.addRank(rankId);
    for (const auto& laneObj : rank["lanes"].cast<py::list>()) {
      const py::dict lane = laneObj.cast<py::dict>();
      const std::string kindName = lane["kind"].cast<std::string>();
      const std::optional<traces::LaneKind> kind = traces::parseLaneKind(kindName);
      if (!kind) throwStatus(invalidArgument("write_trace: unknown lane kind '" + kindName + "'"));
      std::vector<traces::Span> spans;
      for (const auto& spanObj : lane["spans"].cast<py::list>()) {
        const py::tuple s = spanObj.cast<py::tuple>();
        traces::Span span;
        span.name = s[0].cast<std::string>();
        span.category = categoryOrThrow(s[1].cast<std::string>());
        span.start = Nanos(s[2].cast<int64_t>());
        span.duration = Nanos(s[3].cast<int64_t>());
        if (s.size() > 4) span.args = argsFromDict(s[4].cast<py::dict>());
        spans.push_back(std::move(span));
      }
      std::stable_sort(
          spans.begin(), spans.end(),
          [](const traces::Span& a, const traces::Span& b) { return a.start < b.start; });
      const traces::LaneHandle handle = t.addLane(rankId, lane["name"].cast<std::string>(), *kind);
      for (traces::Span& span : spans) t.addSpan(handle, std::move(span));
    }
    if (rank.contains("iterations")) {
      for (const auto& itObj : rank["iterations"].cast<py::list>()) {
        const py::tuple it = itObj.cast<py::tuple>();
        t.addIteration(rankId, it[0].cast<int64_t>(), Nanos(it[1].cast<int64_t>()),
                       Nanos(it[2].cast<int64_t>()));
      }
    }
  }
  const Status status = traces::writeChromeTrace(t, path);
  if (!status.isOk()) throwStatus(status);
}

// The model as the Python Model class shows it.
py::dict modelInfo(const models::ModelSpec& m) {
  py::dict d;
  d["name"] = m.name;
  d["num_params"] = m.numParams();
  d["num_tensors"] = m.numTensors();
  d["total_bytes"] = m.totalBytes();
  py::list params;
  for (const auto& p : m.params) params.append(p.name);
  d["param_names"] = params;
  py::list layers;
  for (const auto& l : m.layers) layers.append(l.name);
  d["layer_names"] = layers;
  d["grad_ready_order"] = m.gradReadyOrder();
  return d;
}

}  // namespace
}  // namespace ddpscope::python

PYBIND11_MODULE(_core, m) {
  using namespace ddpscope;
  using namespace ddpscope::python;
  m.doc() = "ddpscope's C++ core (models, DDP bucket plans, simulator, traces) for Python";

  // class Error(Exception) with .exit_code, defined in Python so that it pickles and prints
  // like any exception.
  py::dict scope;
  py::exec(R"(
class Error(Exception):
    """A ddpscope error: the message the `ddpscope` CLI prints, and its exit code
    (2 = bad input: a flag, file or field; 1 = another failure)."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code
)",
           py::globals(), scope);
  py::object error = scope["Error"];
  error.attr("__module__") = "ddpscope";
  g_errorType = error.ptr();
  Py_INCREF(g_errorType);
  m.attr("Error") = error;
  // The smallest message whose time the alpha-beta calibration fits per byte (smaller ones are
  // latency): ddpscope.torch.tune asks for a second layout when its recording has one such size.
  m.attr("ALPHA_BETA_BASE_MIN_BYTES") = api::kCalibrationPerByteMinBytes;

  m.def(
      "resolve_model",
      [](const std::string& text) { return modelInfo(valueOrThrow(models::resolveModel(text))); },
      py::arg("text"), "Resolves a zoo name, shorthand or model file as --model does.");
  m.def(
      "load_model_file",
      [](const std::string& path) { return modelInfo(valueOrThrow(models::loadModelFile(path))); },
      py::arg("path"), "Loads a model JSON file as --model FILE does.");
  m.def(
      "parse_model_json",
      [](const std::string& text, const std::string& origin) {
        return modelInfo(valueOrThrow(models::parseModelJson(text, origin)));
      },
      py::arg("text"), py::arg("origin"), "Parses model JSON text (models/FORMAT.md).");
  m.def("zoo_names", &models::zooModelNames, "Names of the embedded zoo models.");
  m.def(
      "zoo_json", [](const std::string& name) { return std::string(models::zooModelJson(name)); },
      py::arg("name"), "The JSON text of a zoo model ('' when not in the zoo).");

  py::class_<Simulation>(m, "Simulation")
      .def("summary", &Simulation::summary, "The summary `ddpscope simulate --json` prints.")
      .def("collectives", &Simulation::collectives,
           "Rank 0's collectives: name, category, lane, start/end/duration (ns), bucket, bytes, "
           "iteration.")
      .def("save_trace", &Simulation::saveTrace, py::arg("path"), py::arg("format") = "chrome",
           "Writes the trace (.json; .json.gz compresses): chrome, or kineto (one PyTorch "
           "profiler trace per rank); returns the files written.");
  m.def("simulate", &simulate, py::arg("settings"),
        "Simulates as `ddpscope simulate` does, from {flag name: text} settings (a switch: \"\"); "
        "keeps the timeline.");
  m.def("buckets", &buckets, py::arg("settings"),
        "DDP's bucket plan as `ddpscope buckets --json` prints it, from {flag name: text} "
        "settings.");
  m.def("sweep", &sweep, py::arg("settings"),
        "`ddpscope sweep --json`'s document from {flag name: text} settings.");
  m.def("plan", &plan, py::arg("settings"),
        "`ddpscope plan --json`'s document from {flag name: text} settings.");
  m.def("overlap", &overlap, py::arg("path"),
        "`ddpscope overlap --json`'s document for a trace (HTA's overlap per rank, iteration).");
  m.def("replay", &replay, py::arg("settings"), py::arg("trace_out") = "",
        "`ddpscope replay --json`'s document from {flag name: text} settings; trace_out: also "
        "write the what-if's trace.");
  m.def("import_torch", &importTorch, py::arg("paths"), py::arg("settings"),
        "`ddpscope import-torch PATHS... --json`'s document from {flag name: text} settings.");
  m.def("calibrate", &calibrate, py::arg("runs"), py::arg("settings"),
        "`ddpscope calibrate RUNS... --json`'s document from {flag name: text} settings.");
  m.def("cluster_calibrate_nccl_tests", &clusterCalibrateNcclTests, py::arg("settings"),
        "`ddpscope cluster calibrate --json`'s document from {flag name: text} settings, with "
        "the cluster's file text under cluster_json_text.");
  m.def("cluster_from_topo", &clusterFromTopo, py::arg("topo"), py::arg("is_text"),
        py::arg("settings"),
        "`ddpscope cluster from-topo -o FILE`'s file text from a topo -m file path (is_text "
        "false) or its text, and {flag name: text} settings.");
  m.def("write_trace", &writeTrace, py::arg("path"), py::arg("name"), py::arg("metadata"),
        py::arg("ranks"), "Writes a ddpscope Chrome trace from recorded spans.");
}
