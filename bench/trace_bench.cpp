// Chrome trace writer / reader throughput on a synthetic DDP-like timeline.
//
// BM_WriteChromeTrace/N writes N X events (8 ranks × {compute, comm, host} lanes, collective
// spans with bucket/bytes args) to a temp file; BM_ReadChromeTrace/N parses that file back.
// The ...Gzip variants do the same with a ".json.gz" file (zlib level 6 out, inflate in).
// Counters: events_per_s, and bytes_per_second (file bytes written / read: compressed bytes
// for the gzip variants). Each run verifies the span count it read.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/timeline.h"

namespace {

using ddpscope::Nanos;
using namespace ddpscope::traces;

constexpr int kRanks = 8;

Timeline makeTimeline(int64_t eventCount) {
  Timeline timeline;
  timeline.setName("trace_bench");
  timeline.mutableMetadata().set("model", std::string("synthetic"));
  timeline.mutableMetadata().set("world_size", int64_t{kRanks});
  int64_t perRank = eventCount / kRanks;
  for (int rank = 0; rank < kRanks; ++rank) {
    LaneHandle compute = timeline.addLane(rank, "compute stream", LaneKind::kCompute);
    LaneHandle comm = timeline.addLane(rank, "nccl stream 0", LaneKind::kComm);
    LaneHandle host = timeline.addLane(rank, "python main thread", LaneKind::kHost);
    timeline.reserveSpans(compute, static_cast<size_t>(perRank * 3 / 4 + 1));
    timeline.reserveSpans(comm, static_cast<size_t>(perRank / 4 + 1));
    int64_t computeNs = 0;
    int64_t commNs = 0;
    for (int64_t i = 0; i < perRank; ++i) {
      if (i % 4 == 3) {
        int64_t bucket = i / 4 % 32;
        commNs = std::max(commNs, computeNs - 5000) + 1234;
        timeline.addSpan(comm, "ncclKernel_AllReduce_RING_LL_Sum_float", Category::kAllreduce,
                         Nanos(commNs), Nanos(15321),
                         Args{{"bucket", bucket}, {"bytes", int64_t{26214400}}});
        commNs += 15321;
      } else if (i % 200 == 0) {
        timeline.addSpan(host, "ProfilerStep#" + std::to_string(i / 200), Category::kIteration,
                         Nanos(computeNs), Nanos(200000));
      } else {
        Category category = (i / 100) % 2 == 0 ? Category::kForward : Category::kBackward;
        timeline.addSpan(compute, "aten::addmm", category, Nanos(computeNs), Nanos(3457));
        computeNs += 3457 + 211;
      }
    }
  }
  timeline.sortSpans();
  return timeline;
}

// `suffix` is ".json" or ".json.gz" (the writer compresses by suffix).
std::string tempPath(int64_t eventCount, const std::string& suffix) {
  return (std::filesystem::temp_directory_path() /
          ("ddpscope_trace_bench_" + std::to_string(::getpid()) + "_" + std::to_string(eventCount) +
           suffix))
      .string();
}

void writeChromeTraceBench(benchmark::State& state, const std::string& suffix) {
  Timeline timeline = makeTimeline(state.range(0));
  std::string path = tempPath(state.range(0), suffix);
  int64_t bytes = 0;
  for (auto _ : state) {
    ddpscope::Status status = writeChromeTrace(timeline, path);
    if (!status.isOk()) {
      state.SkipWithError(status.message().c_str());
      break;
    }
    bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  }
  std::filesystem::remove(path);
  auto events = static_cast<double>(timeline.spanCount());
  state.counters["events_per_s"] = benchmark::Counter(
      events * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
  state.SetBytesProcessed(bytes * state.iterations());
}

void readChromeTraceBench(benchmark::State& state, const std::string& suffix) {
  std::string path = tempPath(state.range(0), suffix);
  size_t expectedSpans = 0;
  {
    Timeline timeline = makeTimeline(state.range(0));
    expectedSpans = timeline.spanCount();
    if (!writeChromeTrace(timeline, path).isOk()) {
      state.SkipWithError("cannot write the input trace");
      return;
    }
  }
  auto bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  for (auto _ : state) {
    ddpscope::StatusOr<Timeline> timeline = readChromeTrace(path);
    if (!timeline.isOk() || timeline->spanCount() != expectedSpans) {
      state.SkipWithError(timeline.isOk() ? "span count mismatch"
                                          : timeline.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(timeline->ranks().data());
  }
  std::filesystem::remove(path);
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(expectedSpans) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
  state.SetBytesProcessed(bytes * state.iterations());
}

void BM_WriteChromeTrace(benchmark::State& state) {
  writeChromeTraceBench(state, ".json");
}
void BM_WriteChromeTraceGzip(benchmark::State& state) {
  writeChromeTraceBench(state, ".json.gz");
}
void BM_ReadChromeTrace(benchmark::State& state) {
  readChromeTraceBench(state, ".json");
}
void BM_ReadChromeTraceGzip(benchmark::State& state) {
  readChromeTraceBench(state, ".json.gz");
}

BENCHMARK(BM_WriteChromeTrace)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ReadChromeTrace)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// gzip: 100k events only (inflate + parse of 1M events takes seconds per iteration).
BENCHMARK(BM_WriteChromeTraceGzip)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReadChromeTraceGzip)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
