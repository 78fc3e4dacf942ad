#include "traces/chrome_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "tests/status_matchers.h"
#include "tests/traces/test_timelines.h"
#include "traces/chrome_reader.h"

namespace ddpscope::traces {
namespace {

using testing::makeGoldenTimeline;
using testing::testDataPath;

std::string micros(int64_t ns) {
  std::string out;
  appendMicros(out, Nanos(ns));
  return out;
}

std::string jsonString(std::string_view text) {
  std::string out;
  appendJsonString(out, text);
  return out;
}

std::string jsonDouble(double value) {
  std::string out;
  appendJsonDouble(out, value);
  return out;
}

TEST(ChromeWriterTest, WritesMicrosWithNanosecondPrecision) {
  EXPECT_EQ(micros(1'234'567), "1234.567");
  EXPECT_EQ(micros(2'000), "2");
  EXPECT_EQ(micros(1'500), "1.5");
  EXPECT_EQ(micros(1'050), "1.05");
  EXPECT_EQ(micros(1), "0.001");
  EXPECT_EQ(micros(0), "0");
  EXPECT_EQ(micros(-1'500), "-1.5");
  EXPECT_EQ(micros(-7), "-0.007");
  // 2^53 + 1 ns: not representable as a double, exact here.
  EXPECT_EQ(micros(9'007'199'254'740'993), "9007199254740.993");
  EXPECT_EQ(micros(INT64_MAX), "9223372036854775.807");
  EXPECT_EQ(micros(INT64_MIN), "-9223372036854775.808");
}

TEST(ChromeWriterTest, EscapesJsonStrings) {
  EXPECT_EQ(jsonString("plain"), "\"plain\"");
  EXPECT_EQ(jsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(jsonString("t\tn\nr\r"), "\"t\\tn\\nr\\r\"");
  EXPECT_EQ(jsonString(std::string_view("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(jsonString("µs → ✓"), "\"µs → ✓\"");                            // valid UTF-8 kept
  EXPECT_EQ(jsonString("bad\xff byte\xc3"), "\"bad\\ufffd byte\\ufffd\"");  // invalid replaced
  std::string tricky = "q\"\\/\b\f\x7f é 𝄞";
  EXPECT_EQ(nlohmann::json::parse(jsonString(tricky)).get<std::string>(), tricky);
}

TEST(ChromeWriterTest, DoublesKeepTheirTypeAndShortestForm) {
  EXPECT_EQ(jsonDouble(2.0), "2.0");
  EXPECT_EQ(jsonDouble(0.1), "0.1");
  EXPECT_EQ(jsonDouble(-1.5e-7), "-1.5e-07");
  EXPECT_EQ(jsonDouble(1e300), "1e+300");
  EXPECT_EQ(jsonDouble(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(jsonDouble(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(nlohmann::json::parse(jsonDouble(0.1 + 0.2)).get<double>(), 0.1 + 0.2);
}

TEST(ChromeWriterTest, MatchesGoldenFileByteForByte) {
  std::string written = chromeTraceToString(makeGoldenTimeline());
  StatusOr<std::string> golden = readFileToString(testDataPath("golden_small.json"));
  ASSERT_TRUE(golden.isOk()) << golden.status().message();
  EXPECT_EQ(written, *golden) << "regenerate with DDPSCOPE_REGENERATE_GOLDEN=1 if intended";
  if (std::getenv("DDPSCOPE_REGENERATE_GOLDEN") != nullptr) {
    std::ofstream(testDataPath("golden_small.json"), std::ios::binary) << written;
  }
}

TEST(ChromeWriterTest, WritesViewerFriendlyStructure) {
  nlohmann::json trace = nlohmann::json::parse(chromeTraceToString(makeGoldenTimeline()));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  // Perfetto would read ts as ns (docs/spec/trace-formats.md §4.1).
  EXPECT_NE(trace["displayTimeUnit"], "ns");
  EXPECT_EQ(trace["traceName"], "golden \"small\" run");
  EXPECT_EQ(trace["otherData"]["model"], "mlp-3");
  EXPECT_EQ(trace["otherData"]["world_size"], 2);
  EXPECT_EQ(trace["otherData"]["bucket_cap_mb"], 25.0);

  int processNames = 0;
  int threadNames = 0;
  int flowStarts = 0;
  int flowEnds = 0;
  int counters = 0;
  std::map<std::pair<int, int>, double> lastTs;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    std::string ph = event["ph"];
    if (ph == "M" && event["name"] == "process_name") {
      ++processNames;
      EXPECT_EQ(event["args"]["name"], "rank " + std::to_string(event["pid"].get<int>()));
    } else if (ph == "M" && event["name"] == "thread_name") {
      ++threadNames;
      EXPECT_TRUE(event["args"].contains("lane_kind"));
    } else if (ph == "X") {
      for (const char* key : {"name", "cat", "pid", "tid", "ts", "dur"}) {
        EXPECT_TRUE(event.contains(key)) << key;
      }
      auto key = std::make_pair(event["pid"].get<int>(), event["tid"].get<int>());
      double ts = event["ts"];
      if (lastTs.count(key) > 0) {
        EXPECT_LE(lastTs[key], ts);
      }
      lastTs[key] = ts;
    } else if (ph == "s") {
      ++flowStarts;
    } else if (ph == "f") {
      ++flowEnds;
      EXPECT_EQ(event["bp"], "e");
    } else if (ph == "C") {
      ++counters;
      EXPECT_TRUE(event["args"]["value"].is_number());
    }
  }
  EXPECT_EQ(processNames, 2);
  EXPECT_EQ(threadNames, 6);  // compute, comm, iterations per rank
  EXPECT_EQ(flowStarts, 2);
  EXPECT_EQ(flowEnds, 2);
  EXPECT_EQ(counters, 4);
}

TEST(ChromeWriterTest, WritesParentBeforeChildAtEqualTs) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(0, "compute", LaneKind::kCompute);
  // Inserted child first and left unsorted: the writer still emits the parent first.
  timeline.addSpan(lane, "child", Category::kBackward, Nanos(1000), Nanos(10));
  timeline.addSpan(lane, "parent", Category::kBackward, Nanos(1000), Nanos(500));
  timeline.addSpan(lane, "early", Category::kForward, Nanos(0), Nanos(10));
  std::string text = chromeTraceToString(timeline);
  size_t early = text.find("\"early\"");
  size_t parent = text.find("\"parent\"");
  size_t child = text.find("\"child\"");
  ASSERT_NE(child, std::string::npos);
  EXPECT_LT(early, parent);
  EXPECT_LT(parent, child);
}

TEST(ChromeWriterTest, StreamingWriterWritesIncrementallyAndFinishesOnce) {
  std::ostringstream out;
  ChromeTraceWriter writer(out);
  writer.setMetadata(Args{{"world_size", int64_t{1}}});
  writer.beginRank(0);
  writer.declareLane(0, 0, "compute", LaneKind::kCompute, 0);
  Span span{"fwd", Category::kForward, Nanos(1'000), Nanos(2'500), {}};
  writer.addSpan(0, 0, span);
  writer.addCounter(Counter{0, "mem", Nanos(1'000), 3.0});
  EXPECT_EQ(writer.eventCount(), 6);
  ASSERT_OK(writer.finish());
  EXPECT_FALSE(writer.finish().isOk());
  nlohmann::json trace = nlohmann::json::parse(out.str());
  EXPECT_EQ(trace["traceEvents"].size(), 6u);
  EXPECT_EQ(trace["traceEvents"][4]["dur"], 2.5);
  EXPECT_EQ(writer.bytesWritten(), static_cast<int64_t>(out.str().size()));
}

TEST(ChromeWriterTest, EmptyTimelineIsValidJson) {
  nlohmann::json trace = nlohmann::json::parse(chromeTraceToString(Timeline()));
  EXPECT_TRUE(trace["traceEvents"].empty());
  EXPECT_TRUE(trace["otherData"].is_object());
}

TEST(ChromeWriterTest, WriteToUnwritablePathNamesThePath) {
  Status status = writeChromeTrace(makeGoldenTimeline(), "/nonexistent-dir/out.json");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(),
            "/nonexistent-dir/out.json: cannot open for writing: No such file or directory");
}

TEST(ChromeWriterTest, FullDeviceIsAnErrorNotATraceReportedAsWritten) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const Status status = writeChromeTrace(makeGoldenTimeline(), "/dev/full");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "/dev/full: write failed: No space left on device");
}

TEST(ChromeWriterTest, AnUnfinishedWriterLeavesThePreviousFileInPlace) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "ddpscope_writer_unfinished.json").string();
  ASSERT_OK(writeChromeTrace(Timeline(), path));
  const StatusOr<std::string> before = readFileToString(path);
  ASSERT_OK(before);
  {
    StatusOr<std::unique_ptr<ChromeTraceWriter>> writer = ChromeTraceWriter::open(path);
    ASSERT_TRUE(writer.isOk()) << writer.status().message();
    (*writer)->beginRank(0);
    (*writer)->declareLane(0, 0, "compute", LaneKind::kCompute, 0);
  }  // destroyed without finish(): an interrupted write
  EXPECT_EQ(readFileToString(path).value(), *before);
  std::filesystem::remove(path);
}

#ifdef DDPSCOPE_HAVE_ZLIB
TEST(ChromeWriterTest, WritesGzipWhenPathEndsInGz) {
  std::string path =
      (std::filesystem::temp_directory_path() / "ddpscope_writer_test.json.gz").string();
  Timeline timeline = makeGoldenTimeline();
  ASSERT_OK(writeChromeTrace(timeline, path));
  StatusOr<std::string> bytes = readFileToString(path);
  ASSERT_OK(bytes);
  EXPECT_TRUE(looksGzipped(*bytes));
  StatusOr<Timeline> read = readChromeTrace(path);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, timeline);
  std::filesystem::remove(path);
}
#endif

}  // namespace
}  // namespace ddpscope::traces
