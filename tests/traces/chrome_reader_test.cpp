#include "traces/chrome_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

#include "base/strings.h"
#include "tests/status_matchers.h"
#include "tests/traces/test_timelines.h"
#include "traces/chrome_writer.h"

namespace ddpscope::traces {
namespace {

using testing::makeGoldenTimeline;
using testing::testDataPath;

Timeline parseOk(std::string_view json, ChromeReadReport* report = nullptr) {
  StatusOr<Timeline> timeline = parseChromeTrace(json, "inline.json", {}, report);
  EXPECT_TRUE(timeline.isOk()) << timeline.status().message();
  return timeline.isOk() ? std::move(timeline).value() : Timeline();
}

std::string parseError(std::string_view json) {
  StatusOr<Timeline> timeline = parseChromeTrace(json, "inline.json");
  EXPECT_FALSE(timeline.isOk());
  return timeline.isOk() ? std::string() : timeline.status().message();
}

std::vector<std::string> spanNames(const Lane& lane) {
  std::vector<std::string> names;
  for (const Span& span : lane.spans) names.push_back(span.name);
  return names;
}

TEST(ChromeReaderTest, RoundTripsOurOwnTraceExactly) {
  Timeline original = makeGoldenTimeline();
  std::string text = chromeTraceToString(original);
  Timeline read = parseOk(text);
  EXPECT_EQ(read.name(), original.name());
  EXPECT_EQ(read.metadata(), original.metadata());
  ASSERT_EQ(read.rankCount(), original.rankCount());
  for (int r = 0; r < read.rankCount(); ++r) {
    EXPECT_EQ(read.rank(r), original.rank(r)) << "rank index " << r;
  }
  EXPECT_EQ(read.flows(), original.flows());
  EXPECT_EQ(read.counters(), original.counters());
  EXPECT_EQ(read, original);
  // and again: write(read(write(t))) == write(t)
  EXPECT_EQ(chromeTraceToString(read), text);
}

TEST(ChromeReaderTest, RoundTripsTheCommittedGoldenFile) {
  StatusOr<Timeline> read = readChromeTrace(testDataPath("golden_small.json"));
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, makeGoldenTimeline());
}

TEST(ChromeReaderTest, RoundTripPreservesArgTypes) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(0, "comm", LaneKind::kComm);
  timeline.addSpan(lane, "ar", Category::kAllreduce, Nanos(1), Nanos(2),
                   Args{{"int", int64_t{-5}},
                        {"big", int64_t{INT64_MAX}},
                        {"whole", 3.0},
                        {"frac", 0.1},
                        {"str", std::string("7")},
                        {"empty", std::string()}});
  Timeline read = parseOk(chromeTraceToString(timeline));
  EXPECT_EQ(read, timeline);
  const Args& args = read.lane(LaneHandle{0, 0}).spans[0].args;
  EXPECT_TRUE(std::holds_alternative<double>(*args.find("whole")));
  EXPECT_TRUE(std::holds_alternative<std::string>(*args.find("str")));
}

TEST(ChromeReaderTest, AcceptsBareArray) {
  Timeline timeline = parseOk(R"([
    {"ph":"X","name":"a","pid":3,"tid":1,"ts":1.5,"dur":2},
    {"ph":"X","name":"b","pid":3,"tid":1,"ts":0,"dur":1}
  ])");
  ASSERT_EQ(timeline.rankCount(), 1);
  EXPECT_EQ(timeline.rank(0).rank, 3);
  const Lane& lane = timeline.rank(0).lanes.at(0);
  EXPECT_EQ(lane.name, "thread 1");
  EXPECT_EQ(lane.kind, LaneKind::kHost);
  EXPECT_EQ(spanNames(lane), (std::vector<std::string>{"b", "a"}));  // stable-sorted
  EXPECT_EQ(lane.spans[1].start, Nanos(1'500));
  EXPECT_EQ(lane.spans[1].duration, Nanos(2'000));
}

TEST(ChromeReaderTest, AcceptsObjectFormWithOtherDataAndMetadata) {
  Timeline timeline = parseOk(R"({
    "otherData": {"model": "resnet50", "world_size": 8, "bucket_cap_mb": 25.5,
                  "nested": {"a": [1, 2]}},
    "traceName": "run 1",
    "displayTimeUnit": "ns",
    "traceEvents": [{"ph":"X","name":"a","pid":0,"tid":0,"ts":1,"dur":1}],
    "systemTraceEvents": "ignored"
  })");
  EXPECT_EQ(timeline.name(), "run 1");
  EXPECT_EQ(timeline.metadata().getString("model"), "resnet50");
  EXPECT_EQ(timeline.metadata().getInt("world_size"), 8);
  EXPECT_EQ(timeline.metadata().getDouble("bucket_cap_mb"), 25.5);
  EXPECT_EQ(timeline.metadata().getString("nested"), R"({"a":[1,2]})");
  // displayTimeUnit is display-only (docs/spec/trace-formats.md §3.1): ts stays µs
  EXPECT_EQ(timeline.rank(0).lanes[0].spans[0].start, Nanos(1'000));
}

TEST(ChromeReaderTest, MatchesBeginEndPairsPerThread) {
  Timeline timeline = parseOk(R"([
    {"ph":"B","name":"outer","pid":0,"tid":1,"ts":10,"args":{"a":1}},
    {"ph":"B","name":"other thread","pid":0,"tid":2,"ts":11},
    {"ph":"B","name":"inner","pid":0,"tid":1,"ts":12},
    {"ph":"E","pid":0,"tid":1,"ts":15},
    {"ph":"E","pid":0,"tid":2,"ts":30},
    {"ph":"E","pid":0,"tid":1,"ts":20,"args":{"b":"done"}}
  ])");
  const Lane& lane = timeline.rank(0).lanes[0];
  ASSERT_EQ(lane.spans.size(), 2u);
  EXPECT_EQ(lane.spans[0].name, "outer");  // parent first after sorting
  EXPECT_EQ(lane.spans[0].start, Nanos(10'000));
  EXPECT_EQ(lane.spans[0].duration, Nanos(10'000));
  EXPECT_EQ(lane.spans[0].args, (Args{{"a", int64_t{1}}, {"b", std::string("done")}}));
  EXPECT_EQ(lane.spans[1].name, "inner");
  EXPECT_EQ(lane.spans[1].duration, Nanos(3'000));
  EXPECT_EQ(timeline.rank(0).lanes[1].spans[0].duration, Nanos(19'000));
  EXPECT_OK(timeline.validateNesting());
}

TEST(ChromeReaderTest, WarnsAboutUnmatchedBeginAndEnd) {
  ChromeReadReport report;
  Timeline timeline = parseOk(R"([
    {"ph":"E","pid":0,"tid":0,"ts":1},
    {"ph":"B","name":"never closed","pid":0,"tid":0,"ts":2}
  ])",
                              &report);
  EXPECT_EQ(timeline.spanCount(), 0u);
  EXPECT_EQ(report.eventCount, 2);
  EXPECT_EQ(report.ignoredEvents, 2);
  ASSERT_EQ(report.warnings.size(), 2u);
  EXPECT_NE(report.warnings[0].find("[0]: \"E\" without a matching \"B\""), std::string::npos);
  EXPECT_NE(report.warnings[1].find("[1]: \"B\" without a matching \"E\""), std::string::npos);
}

TEST(ChromeReaderTest, ReadsProcessAndThreadNames) {
  Timeline timeline = parseOk(R"({"traceEvents":[
    {"ph":"M","name":"process_name","pid":1,"args":{"name":"worker-a"}},
    {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
    {"ph":"M","name":"thread_name","pid":1,"tid":9,"args":{"name":"nccl stream 9"}},
    {"ph":"M","name":"thread_sort_index","pid":1,"tid":9,"args":{"sort_index":2}},
    {"ph":"M","name":"unknown_meta","pid":1,"args":{}},
    {"ph":"X","name":"k","pid":1,"tid":9,"ts":0,"dur":1},
    {"ph":"X","name":"k","pid":0,"tid":0,"ts":0,"dur":1}
  ]})");
  ASSERT_EQ(timeline.rankCount(), 2);
  EXPECT_EQ(timeline.rank(0).rank, 1);
  EXPECT_EQ(timeline.rank(0).name, "worker-a");
  EXPECT_EQ(timeline.rank(0).lanes[0].name, "nccl stream 9");
  EXPECT_EQ(timeline.rank(1).rank, 0);
  EXPECT_EQ(timeline.rank(1).name, "");  // the default "rank N" is not kept
}

TEST(ChromeReaderTest, ReadsCountersOnePerSeries) {
  Timeline timeline = parseOk(R"([
    {"ph":"C","name":"memory","pid":2,"ts":5,"args":{"allocated":1024,"reserved":2048.5,"label":"x"}},
    {"ph":"C","name":"queue","pid":2,"ts":6.25,"args":{"value":3}}
  ])");
  ASSERT_EQ(timeline.counters().size(), 3u);
  EXPECT_EQ(timeline.counters()[0], (Counter{2, "memory allocated", Nanos(5'000), 1024.0}));
  EXPECT_EQ(timeline.counters()[1], (Counter{2, "memory reserved", Nanos(5'000), 2048.5}));
  EXPECT_EQ(timeline.counters()[2], (Counter{2, "queue", Nanos(6'250), 3.0}));
}

TEST(ChromeReaderTest, ReadsFlowsStartStepFinishAndBindIds) {
  Timeline timeline = parseOk(R"([
    {"ph":"X","name":"launch","pid":0,"tid":1,"ts":0,"dur":10},
    {"ph":"X","name":"kernel","pid":0,"tid":7,"ts":20,"dur":10},
    {"ph":"s","id":"0x1f","name":"ac2g","cat":"ac2g","pid":0,"tid":1,"ts":5},
    {"ph":"s","id":"0x1f","name":"other","cat":"ac2g","pid":0,"tid":1,"ts":6},
    {"ph":"t","id":"0x1f","name":"ac2g","cat":"ac2g","pid":0,"tid":7,"ts":20},
    {"ph":"f","id":"0x1f","name":"ac2g","cat":"ac2g","pid":0,"tid":7,"ts":25,"bp":"e"},
    {"ph":"X","name":"producer","pid":0,"tid":1,"ts":40,"dur":1,"bind_id":"abc","flow_out":true},
    {"ph":"X","name":"consumer","pid":0,"tid":7,"ts":50,"dur":1,"bind_id":"abc","flow_in":true},
    {"ph":"f","id":99,"name":"lost","cat":"x","pid":0,"tid":7,"ts":25}
  ])");
  ASSERT_EQ(timeline.flows().size(), 3u);
  const Flow& step = timeline.flows()[0];
  EXPECT_EQ(step.id, 0x1fu);
  EXPECT_EQ(step.name, "ac2g");
  EXPECT_EQ(step.category, "ac2g");
  EXPECT_EQ(step.from, (FlowEndpoint{0, 0, Nanos(5'000)}));
  EXPECT_EQ(step.to, (FlowEndpoint{0, 1, Nanos(20'000)}));
  EXPECT_EQ(timeline.flows()[1].from, (FlowEndpoint{0, 1, Nanos(20'000)}));
  EXPECT_EQ(timeline.flows()[1].to, (FlowEndpoint{0, 1, Nanos(25'000)}));
  EXPECT_EQ(timeline.flows()[2].from, (FlowEndpoint{0, 0, Nanos(40'000)}));
  EXPECT_EQ(timeline.flows()[2].to, (FlowEndpoint{0, 1, Nanos(50'000)}));
}

TEST(ChromeReaderTest, ReadsInstantsAsZeroLengthSpans) {
  Timeline timeline = parseOk(R"([
    {"ph":"i","name":"thread mark","pid":0,"tid":3,"ts":1},
    {"ph":"I","name":"legacy mark","pid":0,"tid":3,"ts":2,"s":"t"},
    {"ph":"i","name":"global mark","pid":0,"tid":3,"ts":3,"s":"g"}
  ])");
  const RankTrack& rank = timeline.rank(0);
  ASSERT_EQ(rank.lanes.size(), 2u);
  EXPECT_EQ(spanNames(rank.lanes[0]), (std::vector<std::string>{"thread mark", "legacy mark"}));
  EXPECT_EQ(rank.lanes[1].name, "instants");
  EXPECT_EQ(rank.lanes[1].spans[0].duration, Nanos(0));
}

TEST(ChromeReaderTest, ConvertsTimesExactlyAndRoundsToNearestNs) {
  EXPECT_EQ(parseMicrosText("1234.567"), Nanos(1'234'567));
  EXPECT_EQ(parseMicrosText("12.3456"), Nanos(12'346));
  EXPECT_EQ(parseMicrosText("12.3454999"), Nanos(12'345));
  EXPECT_EQ(parseMicrosText("1.0005"), Nanos(1'001));  // half away from zero
  EXPECT_EQ(parseMicrosText("-1.0005"), Nanos(-1'001));
  EXPECT_EQ(parseMicrosText("7"), Nanos(7'000));
  EXPECT_EQ(parseMicrosText(".5"), Nanos(500));
  EXPECT_EQ(parseMicrosText("2."), Nanos(2'000));
  EXPECT_EQ(parseMicrosText("1.5e3"), Nanos(1'500'000));
  // beyond double precision: still exact
  EXPECT_EQ(parseMicrosText("1700000000123456.789"), Nanos(1'700'000'000'123'456'789));
  EXPECT_EQ(parseMicrosText("abc"), std::nullopt);
  EXPECT_EQ(parseMicrosText(""), std::nullopt);
  EXPECT_EQ(parseMicrosText("."), std::nullopt);
  EXPECT_EQ(parseMicrosText("1.2.3"), std::nullopt);
  EXPECT_EQ(parseMicrosText("99999999999999999999"), std::nullopt);

  Timeline timeline = parseOk(R"([
    {"ph":"X","name":"a","pid":"0","tid":"main","ts":"12.3456","dur":"0.0004"},
    {"ph":"X","name":"b","pid":0,"tid":"main","ts":1700000000123456.789,"dur":1}
  ])");
  const Lane& lane = timeline.rank(0).lanes.at(0);
  EXPECT_EQ(timeline.rank(0).lanes.size(), 1u);  // "0" and 0 are the same pid
  EXPECT_EQ(lane.spans[0].start, Nanos(12'346));
  EXPECT_EQ(lane.spans[0].duration, Nanos(0));
  EXPECT_EQ(lane.spans[1].start, Nanos(1'700'000'000'123'456'789));
}

TEST(ChromeReaderTest, StringPidsBecomeRanksAfterNumericOnes) {
  Timeline timeline = parseOk(R"([
    {"ph":"X","name":"a","pid":"host-a","tid":0,"ts":0,"dur":1},
    {"ph":"X","name":"b","pid":4,"tid":0,"ts":0,"dur":1}
  ])");
  ASSERT_EQ(timeline.rankCount(), 2);
  EXPECT_EQ(timeline.rank(0).rank, 5);
  EXPECT_EQ(timeline.rank(0).name, "");
  EXPECT_EQ(timeline.rank(1).rank, 4);
}

TEST(ChromeReaderTest, IgnoresUnknownPhases) {
  ChromeReadReport report;
  StatusOr<Timeline> timeline = readChromeTrace(testDataPath("unknown_phase.json"), {}, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(timeline->spanCount(), 2u);
  EXPECT_EQ(report.eventCount, 6);
  EXPECT_EQ(report.ignoredEvents, 4);
  ASSERT_FALSE(report.warnings.empty());
  EXPECT_NE(report.warnings[0].find("unknown_phase.json: traceEvents[1]: phase \"b\" ignored"),
            std::string::npos)
      << report.warnings[0];
}

TEST(ChromeReaderTest, KeepsNestedArgsAsJsonTextAndDropsNulls) {
  Timeline timeline = parseOk(R"([
    {"ph":"X","name":"aten::mm","pid":0,"tid":0,"ts":0,"dur":1,
     "args":{"Input Dims":[[64,1024],[1024,64]],"flag":true,"none":null,"s":"x","o":{"k":"v"}}}
  ])");
  const Args& args = timeline.rank(0).lanes[0].spans[0].args;
  EXPECT_EQ(args.getString("Input Dims"), "[[64,1024],[1024,64]]");
  EXPECT_EQ(args.getInt("flag"), 1);
  EXPECT_FALSE(args.contains("none"));
  EXPECT_EQ(args.getString("o"), R"({"k":"v"})");
}

TEST(ChromeReaderTest, InfersGpuLanesAndClassifiesForeignKernels) {
  Timeline timeline = parseOk(R"json([
    {"ph":"M","name":"thread_name","pid":0,"tid":3,"args":{"name":"stream 3"}},
    {"ph":"M","name":"thread_name","pid":0,"tid":4,"args":{"name":"stream 4"}},
    {"ph":"X","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":3,"ts":0,"dur":5},
    {"ph":"X","name":"ncclKernel_Broadcast_RING_LL_Sum_int8_t","pid":0,"tid":3,"ts":10,"dur":5},
    {"ph":"X","name":"volta_sgemm_128x64_nn","pid":0,"tid":4,"ts":0,"dur":5},
    {"ph":"X","name":"Memset (Device)","pid":0,"tid":4,"ts":10,"dur":5},
    {"ph":"X","name":"ProfilerStep#4","pid":0,"tid":1,"ts":0,"dur":50,"cat":"user_annotation"}
  ])json");
  const RankTrack& rank = timeline.rank(0);
  ASSERT_EQ(rank.lanes.size(), 3u);
  EXPECT_EQ(rank.lanes[0].kind, LaneKind::kComm);
  EXPECT_EQ(rank.lanes[0].spans[0].category, Category::kAllreduce);
  EXPECT_EQ(rank.lanes[0].spans[1].category, Category::kBroadcast);
  EXPECT_EQ(rank.lanes[1].kind, LaneKind::kCompute);
  EXPECT_EQ(rank.lanes[1].spans[0].category, Category::kCompute);
  EXPECT_EQ(rank.lanes[1].spans[1].category, Category::kCopy);
  EXPECT_EQ(rank.lanes[2].kind, LaneKind::kHost);
  EXPECT_EQ(rank.lanes[2].spans[0].category, Category::kIteration);
  EXPECT_EQ(rank.lanes[2].spans[0].args.getString("cat"), "user_annotation");
  EXPECT_EQ(timeline.iterations(0).at(0).index, 4);
}

TEST(ChromeReaderTest, ReadsKinetoFixtureWithRightLanesAndCategories) {
  ChromeReadReport report;
  StatusOr<Timeline> read = readChromeTrace(testDataPath("kineto_ddp_small.json"), {}, &report);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  const Timeline& timeline = *read;
  EXPECT_TRUE(report.singleRankTrace);
  EXPECT_EQ(report.ignoredEvents, 0) << (report.warnings.empty() ? "" : report.warnings[0]);
  ASSERT_EQ(timeline.rankCount(), 1);
  EXPECT_EQ(timeline.rank(0).rank, 1);  // distributedInfo.rank
  EXPECT_EQ(timeline.name(), "rank1.pt.trace.json");
  EXPECT_EQ(timeline.metadata().getInt("world_size"), 2);
  EXPECT_EQ(timeline.metadata().getString("backend"), "nccl");
  EXPECT_EQ(timeline.metadata().getInt("schemaVersion"), 1);

  const RankTrack& rank = timeline.rank(0);
  std::vector<std::pair<std::string, LaneKind>> lanes;
  for (const Lane& lane : rank.lanes) lanes.emplace_back(lane.name, lane.kind);
  EXPECT_EQ(lanes, (std::vector<std::pair<std::string, LaneKind>>{
                       {"CPU: thread 4242 (python)", LaneKind::kHost},
                       {"CPU: thread 4250 (pt_autograd_0)", LaneKind::kHost},
                       {"CPU: instants", LaneKind::kHost},
                       {"GPU 0: stream 7", LaneKind::kCompute},
                       {"GPU 0: stream 20", LaneKind::kComm},
                   }));

  std::map<std::string, Category> categories;
  for (const Lane& lane : rank.lanes) {
    for (const Span& span : lane.spans) categories[lane.name + " | " + span.name] = span.category;
  }
  EXPECT_EQ(categories["CPU: thread 4242 (python) | ProfilerStep#1"], Category::kIteration);
  EXPECT_EQ(categories["CPU: thread 4242 (python) | DistributedDataParallel.forward"],
            Category::kForward);
  EXPECT_EQ(categories["CPU: thread 4242 (python) | Optimizer.step#SGD.step"],
            Category::kOptimizer);
  EXPECT_EQ(categories["CPU: thread 4242 (python) | aten::addmm"], Category::kOther);
  EXPECT_EQ(categories["CPU: thread 4250 (pt_autograd_0) | "
                       "autograd::engine::evaluate_function: AddmmBackward0"],
            Category::kBackward);
  EXPECT_EQ(categories["CPU: thread 4250 (pt_autograd_0) | nccl:all_reduce"], Category::kAllreduce);
  EXPECT_EQ(categories["GPU 0: stream 7 | ampere_sgemm_128x64_nn"], Category::kCompute);
  EXPECT_EQ(categories["GPU 0: stream 7 | Memcpy HtoD (Pageable -> Device)"], Category::kCopy);
  EXPECT_EQ(categories["GPU 0: stream 7 | ProfilerStep#1"],
            Category::kOther);  // gpu_user_annotation
  EXPECT_EQ(categories["GPU 0: stream 20 | ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, "
                       "unsigned long, ncclWork*)"],
            Category::kAllreduce);

  // The collective args Kineto copies onto the NCCL kernel survive (bucket bytes = nelems × 4).
  const Span& nccl = rank.lanes[4].spans[0];
  EXPECT_EQ(nccl.start, Nanos(270'000));
  EXPECT_EQ(nccl.duration, Nanos(100'000));
  EXPECT_EQ(nccl.args.getString("Collective name"), "allreduce");
  EXPECT_EQ(nccl.args.getInt("In msg nelems"), 1'048'576);
  EXPECT_EQ(nccl.args.getString("dtype"), "Float");
  EXPECT_EQ(nccl.args.getString("cat"), "kernel");

  // Iterations from the CPU ProfilerStep ranges only (not the GPU annotation).
  std::vector<Iteration> iterations = timeline.iterations(0);
  ASSERT_EQ(iterations.size(), 2u);
  EXPECT_EQ(iterations[0], (Iteration{1, Nanos(100'000), Nanos(400'000)}));
  EXPECT_EQ(iterations[1], (Iteration{2, Nanos(500'000), Nanos(400'000)}));

  // ac2g flow: the launch on the CPU thread to the sgemm kernel on stream 7.
  ASSERT_EQ(timeline.flows().size(), 1u);
  EXPECT_EQ(timeline.flows()[0].id, 11u);
  EXPECT_EQ(timeline.flows()[0].from, (FlowEndpoint{1, 0, Nanos(112'000)}));
  EXPECT_EQ(timeline.flows()[0].to, (FlowEndpoint{1, 3, Nanos(120'000)}));
  EXPECT_TRUE(timeline.validateNesting().isOk()) << timeline.validateNesting().message();
}

TEST(ChromeReaderTest, RankOptionOverridesDistributedInfo) {
  ChromeReadOptions options;
  options.rank = 6;
  StatusOr<Timeline> read = readChromeTrace(testDataPath("kineto_ddp_small.json"), options);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->rank(0).rank, 6);
}

TEST(ChromeReaderTest, KinetoTraceSurvivesOurWriter) {
  StatusOr<Timeline> read = readChromeTrace(testDataPath("kineto_ddp_small.json"));
  ASSERT_OK(read);
  Timeline again = parseOk(chromeTraceToString(*read));
  EXPECT_EQ(again.ranks(), read->ranks());
  EXPECT_EQ(again.flows(), read->flows());
}

#ifdef DDPSCOPE_HAVE_ZLIB
TEST(ChromeReaderTest, ReadsGzipByMagicBytes) {
  std::string json = chromeTraceToString(makeGoldenTimeline());
  // no .gz suffix on purpose: detection is by content
  std::string path =
      (std::filesystem::temp_directory_path() / "ddpscope_reader_test_gz.trace").string();
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, json.data(), static_cast<unsigned>(json.size())),
            static_cast<int>(json.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
  StatusOr<Timeline> read = readChromeTrace(path);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, makeGoldenTimeline());

  // truncated gzip → clear error naming the file
  StatusOr<std::string> bytes = readFileToString(path);
  ASSERT_OK(bytes);
  StatusOr<Timeline> truncated =
      parseChromeTrace(std::string_view(*bytes).substr(0, bytes->size() / 2), "cut.json.gz");
  ASSERT_FALSE(truncated.isOk());
  EXPECT_EQ(truncated.status().message().rfind("cut.json.gz: gzip: ", 0), 0u)
      << truncated.status().message();
  std::filesystem::remove(path);
}

// ChromeReadOptions::maxGunzipBytes replaces the environment's limit (the GUI passes its own).
TEST(ChromeReaderTest, GzipLimitFromTheOptionsReplacesTheEnvironments) {
  const std::string path = testDataPath("tiny.json.gz");
  StatusOr<std::string> bytes = readFileToString(path);
  ASSERT_OK(bytes);
  ChromeReadOptions options;
  options.maxGunzipBytes = 10;
  for (StatusOr<Timeline> read :
       {readChromeTrace(path, options), parseChromeTrace(*bytes, path, options)}) {
    ASSERT_FALSE(read.isOk());
    EXPECT_EQ(read.status().message(),
              path +
                  ": gzip: inflates to more than 10 bytes (the limit for gzip input, against "
                  "gzip bombs); set DDPSCOPE_MAX_GUNZIP_MB=MB to raise it");
  }
  // A limit the environment would refuse: the option wins, and a good one reads the trace.
  ::setenv("DDPSCOPE_MAX_GUNZIP_MB", "not a number", 1);
  options.maxGunzipBytes = 1'000'000;
  StatusOr<Timeline> read = readChromeTrace(path, options);
  StatusOr<Timeline> fromEnv = readChromeTrace(path);
  ::unsetenv("DDPSCOPE_MAX_GUNZIP_MB");
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->spanCount(), 2u);
  ASSERT_FALSE(fromEnv.isOk());
  EXPECT_NE(fromEnv.status().message().find("DDPSCOPE_MAX_GUNZIP_MB"), std::string::npos);
}

TEST(ChromeReaderTest, ReadsCommittedGzipFixture) {
  StatusOr<Timeline> read = readChromeTrace(testDataPath("tiny.json.gz"));
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->spanCount(), 2u);
}
#endif

TEST(ChromeReaderTest, MissingFileErrorNamesThePath) {
  StatusOr<Timeline> read = readChromeTrace(testDataPath("does_not_exist.json"));
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.status().message().find("does_not_exist.json"), std::string::npos);
}

TEST(ChromeReaderTest, ReportsEventIndexAndFieldForBadValues) {
  EXPECT_EQ(
      parseError(R"({"traceEvents":[{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":2,"dur":"abc"}]})"),
      R"(inline.json: traceEvents[1].dur: expected a number, got "abc")");
  EXPECT_EQ(parseError(R"([{"ph":"X","ts":false,"dur":1}])"),
            "inline.json: [0].ts: expected a number, got false");
}

// Every file of the malformed corpus fails with a message that names the file and the field.
TEST(ChromeReaderTest, MalformedCorpusGivesClearErrors) {
  std::string dir = testDataPath("malformed");
  StatusOr<std::string> manifest = readFileToString(dir + "/expected_errors.txt");
  ASSERT_TRUE(manifest.isOk()) << manifest.status().message();
  std::set<std::string> listed;
  std::istringstream lines(*manifest);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    std::string file = line.substr(0, tab);
    std::string expected = line.substr(tab + 1);
    listed.insert(file);
    std::string path = dir + "/" + file;
    StatusOr<Timeline> read = readChromeTrace(path);
    ASSERT_FALSE(read.isOk()) << file << " was accepted";
    const std::string& message = read.status().message();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(expected), std::string::npos)
        << file << "\n  message:  " << message << "\n  expected: " << expected;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument) << message;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name != "expected_errors.txt") {
      EXPECT_EQ(listed.count(name), 1u) << name << " not listed";
    }
  }
  EXPECT_GE(listed.size(), 20u);
}

}  // namespace
}  // namespace ddpscope::traces
