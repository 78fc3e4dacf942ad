// The Chrome reader's two JSON scanners (traces/chrome_tokenizer.h) give the same result: the
// fast scanner (with nlohmann's parser where it declines) against nlohmann's SAX parser alone,
// on every trace in tests/data and the fuzz regressions, on hand-written JSON corner cases, and
// on deterministic mutations of real traces. Same result = equal Timeline and equal
// ChromeReadReport, or the same error message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/external_data.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_tokenizer.h"

namespace ddpscope::traces {
namespace {

using chrome_detail::JsonScanner;
using chrome_detail::parsePlainChromeTrace;

struct Parsed {
  StatusOr<Timeline> timeline;
  ChromeReadReport report;
};

Parsed parseWith(std::string_view text, JsonScanner scanner) {
  Parsed parsed{Timeline(), {}};
  parsed.timeline = parsePlainChromeTrace(text, "in.json", {}, &parsed.report, scanner);
  return parsed;
}

bool declined(const Parsed& parsed) {
  return !parsed.timeline.isOk() && parsed.timeline.status().code() == StatusCode::kUnimplemented;
}

// Empty when equal, else what differs.
std::string difference(const Parsed& a, const Parsed& b) {
  if (a.timeline.isOk() != b.timeline.isOk()) {
    return "one parsed, the other failed: " +
           (a.timeline.isOk() ? b.timeline.status() : a.timeline.status()).message();
  }
  if (!a.timeline.isOk()) {
    if (a.timeline.status().message() != b.timeline.status().message()) {
      return "errors differ: [" + a.timeline.status().message() + "] vs [" +
             b.timeline.status().message() + "]";
    }
    return "";
  }
  if (!(*a.timeline == *b.timeline)) return "timelines differ";
  if (a.report.eventCount != b.report.eventCount ||
      a.report.ignoredEvents != b.report.ignoredEvents ||
      a.report.singleRankTrace != b.report.singleRankTrace ||
      a.report.warnings != b.report.warnings) {
    return "reports differ";
  }
  return "";
}

std::string readPlain(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string text = bytes.str();
  if (looksGzipped(text)) {
    StatusOr<std::string> plain = gunzipBytes(text, path.string());
    if (plain.isOk()) return *plain;
  }
  return text;
}

// Every *.json / *.json.gz under tests/data and the chrome_trace fuzz regressions, and HTA's
// trimmed real traces (external data) where they are; of the gzipped traces over 1 MB, the first
// two of each folder: a folder of many large traces of one profiler (the H200 kit's run1: 22
// PyTorch 2.11 traces of 1.1-2.2 MB, 400 MB of JSON, the same profiler as the H100's) adds
// minutes under ASan, not coverage.
std::vector<std::filesystem::path> traceFiles() {
  std::vector<std::filesystem::path> files;
  for (const char* name : {"resnet_2gpu_rank0", "trace_diff_8gpu_rank3", "sampled_128gpu_rank0",
                           "sampled_128gpu_rank1"}) {
    const auto path = test_data::externalDataPath(std::string("hta/") + name + ".json.gz");
    if (path) files.push_back(*path);
  }
  for (const std::string& root : {std::string(DDPSCOPE_TEST_DATA_DIR),
                                  std::string(DDPSCOPE_SOURCE_DIR) + "/fuzz/regressions"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".json") || name.ends_with(".json.gz") ||
          entry.path().parent_path().filename() == "chrome_trace") {
        files.push_back(entry.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  std::map<std::filesystem::path, int> largeInFolder;
  std::erase_if(files, [&](const std::filesystem::path& f) {
    if (f.extension() != ".gz" || std::filesystem::file_size(f) <= (1 << 20)) return false;
    return ++largeInFolder[f.parent_path()] > 2;
  });
  return files;
}

TEST(ChromeScannerTest, FastEqualsNlohmannOnEveryCommittedTrace) {
  int traces = 0;
  int events = 0;
  for (const std::filesystem::path& path : traceFiles()) {
    const std::string text = readPlain(path);
    const Parsed reference = parseWith(text, JsonScanner::kNlohmann);
    const Parsed fast = parseWith(text, JsonScanner::kAuto);
    EXPECT_EQ(difference(reference, fast), "") << path;
    if (!reference.timeline.isOk()) continue;
    // Every committed trace that parses is in the fast scanner's part of JSON.
    const Parsed fastOnly = parseWith(text, JsonScanner::kFastOnly);
    EXPECT_FALSE(declined(fastOnly)) << path;
    EXPECT_EQ(difference(reference, fastOnly), "") << path;
    ++traces;
    events += static_cast<int>(reference.report.eventCount);
  }
  EXPECT_GE(traces, 15);
  EXPECT_GE(events, 10'000);
}

TEST(ChromeScannerTest, MalformedTracesGiveNlohmannsErrors) {
  const std::string text =
      readPlain(std::string(DDPSCOPE_TEST_DATA_DIR) + "/traces/malformed/truncated.json");
  EXPECT_TRUE(declined(parseWith(text, JsonScanner::kFastOnly)));
  const Parsed fast = parseWith(text, JsonScanner::kAuto);
  ASSERT_FALSE(fast.timeline.isOk());
  EXPECT_EQ(fast.timeline.status().message(),
            "in.json: invalid JSON at byte 118: parse error at line 3, column 47: syntax error "
            "while parsing object key - invalid string: missing closing quote; last read: "
            "'\"d'; expected string literal");
}

// One X event whose name and args hold `value` (a JSON value text).
std::string eventWith(const std::string& value) {
  return R"({"traceEvents":[{"ph":"X","name":"n","pid":0,"tid":0,"ts":1,"dur":2,"args":{"v":)" +
         value + R"(,"w":[)" + value + R"(,{"k":)" + value + R"(}]}},)" +
         R"({"ph":"X","pid":0,"tid":0,"ts":)" + value + R"(,"dur":1,"name":)" + value + "}]}";
}

TEST(ChromeScannerTest, CornerCasesAgreeAndTheFastScannerTakesValidOnes) {
  // Values nlohmann accepts: the fast scanner must take them and agree.
  const std::vector<std::string> accepted = {"0",
                                             "-0",
                                             "7",
                                             "-7",
                                             "1.5",
                                             "-1.25e2",
                                             "1E3",
                                             "2e-3",
                                             "0.000001",
                                             "18446744073709551615",  // uint64 max: unsigned
                                             "18446744073709551616",  // past uint64: a double
                                             "-9223372036854775808",  // int64 min
                                             "-9223372036854775809",  // past int64: a double
                                             "123456789012345678901234567890",
                                             "1.7976931348623157e308",
                                             "4.9e-324",
                                             R"("plain")",
                                             R"("")",
                                             R"("q\"b\\s\/ \b\f\n\r\t")",
                                             R"("\u0041\u00e9\u20ac")",
                                             R"("\ud83d\ude00")",
                                             R"("\u0000")",
                                             "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"",
                                             "true",
                                             "false",
                                             "null",
                                             "[]",
                                             "{}",
                                             R"({"a":[1,{"b":null}]})",
                                             " [ 1 , 2 ] "};
  for (const std::string& value : accepted) {
    const std::string text = eventWith(value);
    const Parsed reference = parseWith(text, JsonScanner::kNlohmann);
    const Parsed fastOnly = parseWith(text, JsonScanner::kFastOnly);
    EXPECT_FALSE(declined(fastOnly)) << value;
    EXPECT_EQ(difference(reference, fastOnly), "") << value;
  }
  // Values nlohmann rejects (or reads in ways left to it): the fast scanner declines.
  const std::vector<std::string> rejected = {"01",
                                             "1.",
                                             ".5",
                                             "-",
                                             "+1",
                                             "1e",
                                             "1e+",
                                             "1e400",
                                             "-1e400",
                                             "tru",
                                             "nul",
                                             "True",
                                             R"("\x")",
                                             R"("\u12")",
                                             R"("\ud83d")",
                                             R"("\ude00")",
                                             R"("\ud83d\u0041")",
                                             "\"a\x01\"",
                                             "\"\xC0\xAF\"",
                                             "\"\xED\xA0\x80\"",
                                             "\"\xF5\x80\x80\x80\"",
                                             "\"\xE2\x82\"",
                                             "[1,]",
                                             R"({"a" 1})",
                                             R"({"a":1,})",
                                             "'x'",
                                             "NaN"};
  for (const std::string& value : rejected) {
    const std::string text = eventWith(value);
    EXPECT_TRUE(declined(parseWith(text, JsonScanner::kFastOnly))) << value;
    EXPECT_EQ(
        difference(parseWith(text, JsonScanner::kNlohmann), parseWith(text, JsonScanner::kAuto)),
        "")
        << value;
  }
  // Text after the root, a byte-order mark, a scalar root: declined, nlohmann's answer.
  for (const std::string& text :
       {std::string(R"({"traceEvents":[]} x)"), std::string("\xEF\xBB\xBF{\"traceEvents\":[]}"),
        std::string("42"), std::string(""), std::string("  ")}) {
    EXPECT_TRUE(declined(parseWith(text, JsonScanner::kFastOnly))) << text;
    EXPECT_EQ(
        difference(parseWith(text, JsonScanner::kNlohmann), parseWith(text, JsonScanner::kAuto)),
        "")
        << text;
  }
}

// Deterministic mutations (replace, insert, delete a byte; cut the tail) of real traces: both
// paths agree on every mutant, and the fast scanner itself finishes (no decline) on many.
TEST(ChromeScannerTest, MutatedTracesAgree) {
  const std::string data = DDPSCOPE_TEST_DATA_DIR;
  const std::string interesting =
      "{}[]:,\"\\/0123456789.eE+-tfnulrsbux \t\n\x01\x7f\x80\xBF\xC3\xE2\xED\xF0\xF4\xFF";
  std::mt19937_64 random(14);
  int mutants = 0;
  int fastFinished = 0;
  for (const std::string& file :
       {data + "/traces/golden_small.json", data + "/traces/kineto_ddp_small.json",
        data + "/hta/hta_overlap.json", data + "/torch/compile_graph_overhead.json"}) {
    const std::string original = readPlain(file);
    ASSERT_FALSE(original.empty()) << file;
    for (int i = 0; i < 1500; ++i) {
      std::string text = original;
      const int edits = 1 + static_cast<int>(random() % 3);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const size_t at = random() % text.size();
        const char c = interesting[random() % interesting.size()];
        switch (random() % 4) {
          case 0:
            text[at] = c;
            break;
          case 1:
            text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
            break;
          case 2:
            text.erase(at, 1);
            break;
          default:
            text.resize(at);
            break;
        }
      }
      const Parsed reference = parseWith(text, JsonScanner::kNlohmann);
      const Parsed fast = parseWith(text, JsonScanner::kAuto);
      ASSERT_EQ(difference(reference, fast), "") << file << " mutant " << i << ":\n" << text;
      if (!declined(parseWith(text, JsonScanner::kFastOnly))) ++fastFinished;
      ++mutants;
    }
  }
  EXPECT_EQ(mutants, 6000);
  EXPECT_GE(fastFinished, mutants / 10);
}

}  // namespace
}  // namespace ddpscope::traces
