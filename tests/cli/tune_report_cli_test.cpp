// `ddpscope tune-report`: the reports ddpscope.torch.tune wrote in real 2-rank gloo jobs
// (tests/data/tune: python/tests/tune_job.py --case poor and --case nothing, torch 1.13) printed
// as a user reads them, and every kind of bad report refused with the file and field named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli::testing {
namespace {

const std::string kDir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/tune/";

json load(const std::string& name) {
  std::ifstream in(kDir + name);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

TEST(TuneReportCliTest, PrintsEveryCandidateTheDecisionAndItsCost) {
  const json report = load("poor-layout-report.json");
  CliResult r = runCliForTest({"tune-report", kDir + "poor-layout-report.json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Deep, world size 2, gloo on cpu, torch 1.13"));
  for (const json& c : report["candidates"]) {
    const std::string label = c["label"];
    EXPECT_THAT(r.out, HasSubstr((c["chosen"].get<bool>() ? "* " : "  ") + label)) << label;
  }
  // The job started with a bucket per tensor; the chosen layout has a handful.
  EXPECT_THAT(r.out, HasSubstr("269 "));
  EXPECT_THAT(r.out, HasSubstr("(current)"));
  EXPECT_THAT(r.out, HasSubstr("decision: " + report["decision"]["reason"].get<std::string>()));
  EXPECT_THAT(r.out, HasSubstr("cost: 106 training steps (8 recorded, 8 warm-up, 90 measured)"));
  EXPECT_THAT(r.out, HasSubstr("next time: " + report["decision"]["paste"].get<std::string>()));

  CliResult kept = runCliForTest({"tune-report", kDir + "kept-report.json"});
  ASSERT_EQ(kept.exitCode, 0) << kept.err;
  EXPECT_THAT(kept.out, HasSubstr("decision: kept the current settings: no candidate"));
  EXPECT_THAT(kept.out, HasSubstr("next time: DistributedDataParallel(model)"));
  EXPECT_THAT(kept.out, HasSubstr("cost: 58 training steps (0 recorded, 4 warm-up, 54 measured)"));
}

TEST(TuneReportCliTest, BadReportsNameTheFileAndTheField) {
  const json good = load("poor-layout-report.json");
  auto write = [](const std::string& name, const json& doc) {
    return writeScratchFile(name, doc.dump());
  };
  json notReport = {{"traceEvents", json::array()}};
  std::string path = write("tune_not_report.json", notReport);
  expectBadInput({"tune-report", path},
                 path + ": not a ddpscope.torch.tune report (its \"format\" is nothing");

  json newer = good;
  newer["version"] = 2;
  path = write("tune_newer.json", newer);
  expectBadInput({"tune-report", path},
                 path + ": report version 2 is newer than this ddpscope reads (1)");

  json missing = good;
  missing["candidates"][1].erase("measured_step_ms");
  path = write("tune_missing.json", missing);
  expectBadInput({"tune-report", path}, "candidates[1].measured_step_ms");

  json chosen = good;
  chosen["decision"]["chosen"] = 9;
  path = write("tune_chosen.json", chosen);
  expectBadInput({"tune-report", path}, "decision.chosen: expected the index of a candidate");

  json inconsistent = good;
  inconsistent["decision"]["switched"] = false;
  path = write("tune_inconsistent.json", inconsistent);
  expectBadInput({"tune-report", path}, "decision: \"switched\" is false but \"chosen\" is");

  json noCurrent = good;
  noCurrent["candidates"][0]["current"] = false;
  path = write("tune_no_current.json", noCurrent);
  expectBadInput({"tune-report", path}, "candidates[0]: expected the current settings");

  expectBadInput({"tune-report", kDir + "no-such-report.json"}, "no-such-report.json");
}

}  // namespace
}  // namespace ddpscope::cli::testing
