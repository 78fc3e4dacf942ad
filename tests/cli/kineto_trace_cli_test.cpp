// `--trace-format kineto`: simulated timelines as PyTorch profiler traces, one file per rank,
// that Holistic Trace Analysis reads as it reads PyTorch's. tests/data/hta/simulated/ holds
// three such simulations (commands.json; written by make_simulated.py) and hta_overlap.json HTA
// 0.5.0's get_comm_comp_overlap on each file (record_hta.py, run in a venv with HTA). Here the
// current simulator writes them again and `ddpscope overlap` must print HTA's number for every
// rank: if the simulation changes, the committed files and HTA's numbers are recorded again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "traces/chrome_reader.h"
#include "traces/overlap.h"

namespace ddpscope::cli::testing {
namespace {

json readJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(KinetoTraceCliTest, SimulatedTracesGiveHtasOverlapOnEveryRank) {
  const json commands = readJson(kDataDir + "/hta/simulated/commands.json");
  const json hta = readJson(kDataDir + "/hta/hta_overlap.json").at("traces");
  ASSERT_EQ(commands.at("traces").size(), 3u);
  int ranks = 0;
  for (const json& c : commands.at("traces")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    std::vector<std::string> args = c.at("args").get<std::vector<std::string>>();
    const std::string base = (scratchDir() / (name + ".json")).string();
    args.insert(args.end(), {"--trace-format", "kineto", "--trace", base, "--quiet"});
    const CliResult r = runCliForTest(args);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("PyTorch profiler (Kineto) traces written, one per rank:"),
              std::string::npos);
    for (const auto& [file, expected] : hta.items()) {
      const std::string prefix = "hta/simulated/" + name + ".rank";
      if (!file.starts_with(prefix)) continue;
      const std::string rank =
          file.substr(prefix.size(), file.find('.', prefix.size()) - prefix.size());
      const std::string written = (scratchDir() / (name + ".rank" + rank + ".json")).string();
      ASSERT_TRUE(std::filesystem::exists(written)) << written;
      // The committed file and the one written now read the same.
      for (const std::string& path : {written, kDataDir + "/" + file}) {
        SCOPED_TRACE(path);
        StatusOr<traces::Timeline> timeline = traces::readChromeTrace(path);
        ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
        const std::vector<traces::RankOverlap> overlap = traces::computeOverlap(*timeline);
        ASSERT_EQ(overlap.size(), 1u);
        EXPECT_EQ(std::to_string(overlap[0].rank), rank);
        EXPECT_TRUE(overlap[0].kineto);
        ASSERT_TRUE(expected.at(rank).is_number()) << "HTA found no communication";
        char text[32];
        std::snprintf(text, sizeof(text), "%.2f", expected.at(rank).get<double>());
        EXPECT_EQ(traces::formatPercent(overlap[0].total), text);
      }
      // And `ddpscope overlap` prints it.
      const CliResult printed = runCliForTest({"overlap", written});
      ASSERT_EQ(printed.exitCode, 0) << printed.err;
      char text[32];
      std::snprintf(text, sizeof(text), "%.2f", expected.at(rank).get<double>());
      EXPECT_NE(printed.out.find(text), std::string::npos) << printed.out;
      ++ranks;
    }
  }
  EXPECT_EQ(ranks, 4);  // resnet18 at world size 2 in all-ranks mode, two one-rank simulations
}

TEST(KinetoTraceCliTest, BadTraceFormatsAreOneLineErrors) {
  expectBadInput({"simulate", "--model", "resnet18", "--cluster", "dgx-a100", "--trace",
                  (scratchDir() / "x.json").string(), "--trace-format", "perfetto"},
                 "--trace-format: expected chrome or kineto, got 'perfetto'");
  expectBadInput(
      {"simulate", "--model", "resnet18", "--cluster", "dgx-a100", "--trace-format", "kineto"},
      "--trace-format needs --trace PATH");
  expectBadInput({"replay", "--from-trace", kDataDir + "/replay/mlp-wide-w2.json.gz",
                  "--trace-format", "kineto"},
                 "--trace-format needs --trace PATH");
}

TEST(KinetoTraceCliTest, ReplayWritesTheWhatIfAsKineto) {
  const std::string base = (scratchDir() / "replay-kineto.json").string();
  const CliResult r =
      runCliForTest({"replay", "--from-trace", kDataDir + "/replay/mlp-wide-w2.json.gz",
                     "--world-size", "4", "--trace-format", "kineto", "--trace", base});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  StatusOr<traces::Timeline> t =
      traces::readChromeTrace((scratchDir() / "replay-kineto.rank0.json").string());
  ASSERT_TRUE(t.isOk()) << t.status().message();
  const std::vector<traces::RankOverlap> overlap = traces::computeOverlap(*t);
  ASSERT_EQ(overlap.size(), 1u);
  EXPECT_TRUE(overlap[0].kineto);
  EXPECT_TRUE(overlap[0].total.hasCommunication);
}

}  // namespace
}  // namespace ddpscope::cli::testing
