// `ddpscope tune-report`: the reports ddpscope.torch.tune wrote in real 2-rank gloo jobs
// (tests/data/tune: python/tests/tune_job.py --case poor and --case nothing, torch 1.13; the
// confirmed report is --case poor's confirmed.json) printed as a user reads them, and every kind
// of bad report refused with the file and field named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
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

// tune_job.py --case poor's second tune: one first round (which no sign test can pass), then six
// confirmation rounds of the current settings against DDP's default cap.
TEST(TuneReportCliTest, PrintsTheConfirmationRoundsThatDecided) {
  const json report = load("confirmed-report.json");
  const json& conf = report["decision"]["confirmation"];
  ASSERT_TRUE(conf.is_object());
  CliResult r = runCliForTest({"tune-report", kDir + "confirmed-report.json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("confirmation: no candidate passed in the first 1 rounds; "
                               "measured again against the current settings in 6 rounds"));
  const json& f = conf["candidates"][0];
  char row[64];
  std::snprintf(row, sizeof(row), "%4lld/%-2d %8.4f  (eligible)",
                static_cast<long long>(f["rounds_faster"].get<int64_t>()), 6,
                f["p_value"].get<double>());
  EXPECT_THAT(r.out,
              HasSubstr(std::string("* ") + report["candidates"][1]["label"].get<std::string>()));
  EXPECT_THAT(r.out, HasSubstr(row));
  EXPECT_THAT(r.out, HasSubstr("decision: " + report["decision"]["reason"].get<std::string>()));
  // A report of the first rounds alone has no such section.
  CliResult first = runCliForTest({"tune-report", kDir + "poor-layout-report.json"});
  EXPECT_THAT(first.out, Not(HasSubstr("confirmation:")));

  auto write = [](const std::string& name, const json& doc) {
    return writeScratchFile(name, doc.dump());
  };
  json current = report;
  current["decision"]["confirmation"]["candidates"][0]["candidate"] = 0;
  std::string path = write("tune_confirm_current.json", current);
  expectBadInput({"tune-report", path},
                 path +
                     ": decision.confirmation.candidates[0].candidate: expected the index of a "
                     "candidate other than the current settings");
  json won = report;
  won["decision"]["confirmation"]["candidates"][0]["rounds_faster"] = 7;
  path = write("tune_confirm_won.json", won);
  expectBadInput({"tune-report", path},
                 "decision.confirmation.candidates[0].rounds_faster: expected an integer in "
                 "[0, rounds]");
  json empty = report;
  empty["decision"]["confirmation"]["candidates"] = json::array();
  path = write("tune_confirm_empty.json", empty);
  expectBadInput({"tune-report", path},
                 "decision.confirmation.candidates: expected a non-empty array");
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
