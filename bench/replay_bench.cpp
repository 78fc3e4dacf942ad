// Import and replay of a large real GPU profiler trace, as a user runs them: `ddpscope
// import-torch TRACE --model resnet50 -o RUN` then `ddpscope replay --from-trace RUN --model
// resnet50 --cluster dgx-h100 --world-size 1` (in-process, through the CLI's own entry point);
// BM_ImportAndReplayOwnModel: the same two commands without --model.
//
// The trace is the GPU kit's profiled H100 resnet50 DDP trace (tests/data/gpu/h100/run1, 9.1 MB of
// JSON, 2 steps, PyTorch 2.11) with its events repeated K times, each copy shifted in time past
// the previous one and given its own step numbers and correlation ids: BM_ImportAndReplay/K holds
// 2K steps (K = 14: 105 MB of JSON, 28 steps). Goal: ≤ 10 s and ≤ 2 GB for 100 MB.
// Counters: trace_mb (the plain JSON written), steps, peak_rss_mb (the process's high-water mark
// after the run: getrusage's ru_maxrss; the trace is written by a child process). Each run checks
// that the replay succeeds, kept every step and replayed the host lane from the host facts of
// every step (the import reads the trace a second time for them).
//
// BM_ImportCpuRangesAndReplay/K: the same two commands on a CPU trace named by its
// ddpscope.layer: ranges (tests/data/torch-2.15/layer-ranges/block-rank0.json.gz, a real torch
// 2.15 CPU DDP job of a residual block, 3 steps, its model block-model.json, cluster cpu-mpi),
// repeated K times (K = 325: 100 MB of JSON, 975 steps). Its import ties each step's
// compute ops to the layers' extents of that step; it used to test each op against every extent
// of every step (steps² work).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "traces/chrome_reader.h"

namespace {

// A trace to repeat and how to import and replay it.
struct Source {
  std::string trace;
  std::vector<std::string> modelArgs;  // --model ... (import and replay)
  std::string cluster;
  int64_t stepsPerCopy;
  bool hostLane;  // the replay brings a host lane over every step (GPU traces' host facts)
};

const Source kGpuResnet50{std::string(DDPSCOPE_SOURCE_DIR) +
                              "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz",
                          {"--model", "resnet50"},
                          "dgx-h100",
                          2,
                          true};
const Source kCpuBlock{
    std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/layer-ranges/block-rank0.json.gz",
    {"--model",
     std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/layer-ranges/block-model.json"},
    "cpu-mpi",
    3,
    false};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ddpscope_replay_bench_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// The source trace with its events repeated `copies` times; returns the bytes written.
int64_t writeRepeatedTrace(const std::string& source, int copies, const std::string& path,
                           std::string& error) {
  std::ifstream in(source, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto text = ddpscope::traces::gunzipBytes(gz, source);
  if (!text.isOk()) {
    error = text.status().message();
    return 0;
  }
  nlohmann::json doc = nlohmann::json::parse(*text);
  const nlohmann::json events = doc["traceEvents"];
  double first = 1e300, last = -1e300;
  int64_t maxCorrelation = 0, maxStep = 0;
  for (const auto& e : events) {
    if (!e.contains("ts") || !e["ts"].is_number()) continue;
    const double ts = e["ts"].get<double>();
    first = std::min(first, ts);
    last = std::max(last, ts + e.value("dur", 0.0));
    if (e.contains("args") && e["args"].contains("correlation") &&
        e["args"]["correlation"].is_number_integer()) {
      maxCorrelation = std::max(maxCorrelation, e["args"]["correlation"].get<int64_t>());
    }
    const std::string name = e.value("name", "");
    if (name.starts_with("ProfilerStep#")) {
      maxStep = std::max<int64_t>(maxStep, std::stoll(name.substr(13)));
    }
  }
  const double period = last - first + 1000.0;  // µs, a millisecond apart
  // Streamed event by event: the 100 MB document is never held in memory.
  std::ofstream file(path, std::ios::binary);
  nlohmann::json head = doc;
  head.erase("traceEvents");
  std::string prefix = head.dump();
  prefix.pop_back();  // the closing brace
  file << prefix << (head.empty() ? "" : ",") << "\"traceEvents\":[";
  int64_t written = static_cast<int64_t>(prefix.size()) + 16;
  bool firstEvent = true;
  for (int k = 0; k < copies; ++k) {
    for (nlohmann::json e : events) {
      if (k > 0) {
        if (!e.contains("ts") || !e["ts"].is_number()) continue;  // metadata: once
        e["ts"] = e["ts"].get<double>() + period * k;
        if (e.contains("args") && e["args"].contains("correlation") &&
            e["args"]["correlation"].is_number_integer()) {
          e["args"]["correlation"] =
              e["args"]["correlation"].get<int64_t>() + (maxCorrelation + 1) * k;
        }
        if (e.contains("id") && e["id"].is_number_integer()) {
          e["id"] = e["id"].get<int64_t>() + (maxCorrelation + 1) * k;
        }
        const std::string name = e.value("name", "");
        if (name.starts_with("ProfilerStep#")) {
          e["name"] =
              "ProfilerStep#" + std::to_string(std::stoll(name.substr(13)) + (maxStep + 1) * k);
        }
      }
      const std::string text = e.dump();
      file << (firstEvent ? "" : ",") << text;
      written += static_cast<int64_t>(text.size()) + 1;
      firstEvent = false;
    }
  }
  file << "]}";
  return written;
}

// Writes the trace in a child process, so that building it does not count in this process's
// peak memory.
int64_t writeRepeatedTraceApart(const std::string& source, int copies, const std::string& path,
                                std::string& error) {
  const pid_t child = ::fork();
  if (child == 0) {
    std::string childError;
    const int64_t bytes = writeRepeatedTrace(source, copies, path, childError);
    ::_exit(bytes > 0 ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    error = "could not write the repeated trace from " + source;
    return 0;
  }
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

// `ownModel`: import and replay without --model (the model read off the trace's record_shapes).
void importAndReplay(benchmark::State& state, const Source& source, bool ownModel) {
  const int copies = static_cast<int>(state.range(0));
  const std::string trace = scratch("trace.json");
  const std::string run = scratch("run.json");
  std::string error;
  const int64_t bytes = writeRepeatedTraceApart(source.trace, copies, trace, error);
  if (bytes == 0) {
    state.SkipWithError(error.c_str());
    return;
  }
  int64_t steps = 0;
  for (auto _ : state) {
    std::ostringstream out, err;
    std::vector<std::string> importArgs = {"import-torch", trace, "-o", run, "--quiet"};
    std::vector<std::string> replayArgs = {"replay",       "--from-trace", run, "--cluster",
                                           source.cluster, "--world-size", "1", "--json"};
    if (!ownModel) {
      for (auto* args : {&importArgs, &replayArgs}) {
        args->insert(args->end(), source.modelArgs.begin(), source.modelArgs.end());
      }
    }
    int code = ddpscope::cli::runCli(importArgs, out, err);
    if (code != 0) {
      state.SkipWithError(("import-torch: " + err.str()).c_str());
      break;
    }
    std::ostringstream rout, rerr;
    code = ddpscope::cli::runCli(replayArgs, rout, rerr);
    if (code != 0) {
      state.SkipWithError(("replay: " + rerr.str()).c_str());
      break;
    }
    const auto replayed = nlohmann::json::parse(rout.str());
    steps = static_cast<int64_t>(replayed["measured_iterations"].size());
    const int64_t expected = source.stepsPerCopy * copies;
    if (source.hostLane &&
        (!replayed.contains("host_lane") || replayed["host_lane"]["steps"] != expected)) {
      state.SkipWithError("replay has no host lane over every step");
      break;
    }
    if (steps != expected) {
      state.SkipWithError(
          ("replay kept " + std::to_string(steps) + " steps of " + std::to_string(expected))
              .c_str());
      break;
    }
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["trace_mb"] = static_cast<double>(bytes) / 1e6;
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
  std::filesystem::remove(trace);
  std::filesystem::remove(run);
}
void BM_ImportAndReplay(benchmark::State& state) {
  importAndReplay(state, kGpuResnet50, false);
}
BENCHMARK(BM_ImportAndReplay)->Arg(1)->Arg(14)->Unit(benchmark::kMillisecond)->Iterations(1);
// The same without --model: the import reads the model off the trace (one profiled step) first.
void BM_ImportAndReplayOwnModel(benchmark::State& state) {
  importAndReplay(state, kGpuResnet50, true);
}
BENCHMARK(BM_ImportAndReplayOwnModel)->Arg(14)->Unit(benchmark::kMillisecond)->Iterations(1);
void BM_ImportCpuRangesAndReplay(benchmark::State& state) {
  importAndReplay(state, kCpuBlock, false);
}
BENCHMARK(BM_ImportCpuRangesAndReplay)
    ->Arg(1)
    ->Arg(325)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
