#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli::testing {
namespace {

const char* kTwoParams =
    R"({"name": "two", "parameters": [{"name": "a.weight", "shape": [4, 3], "dtype": "float32"},)"
    R"( {"name": "a.bias", "shape": [4], "dtype": "float32"}]})";

TEST(CliTest, TopLevelHelpListsCommands) {
  CliResult r = runCliForTest({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  for (const char* c : {"quickstart", "model", "buckets", "overlap", "cluster"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n  ") + c + " "));
  }
}

TEST(CliTest, EveryCommandHasHelp) {
  for (std::string c : {"quickstart", "model list", "model show", "buckets", "overlap",
                        "cluster list", "cluster show"}) {
    std::vector<std::string> args;
    std::istringstream words(c);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--help");
    CliResult r = runCliForTest(args);
    EXPECT_EQ(r.exitCode, 0) << c;
    EXPECT_THAT(r.out, HasSubstr("usage: ddpscope " + c));
  }
}

TEST(CliModelsTest, JsonListsZooWithOriginalCounts) {
  CliResult r = runCliForTest({"model", "list", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json list = json::parse(r.out);
  std::map<std::string, std::pair<int64_t, int64_t>> expected = {
      {"mlp-tiny", {601, 4}},           {"mlp-wide", {8396800, 16}},
      {"resnet18", {11689512, 62}},     {"resnet50", {25557032, 161}},
      {"vgg16", {138357544, 32}},       {"mobilenet_v2", {3504872, 158}},
      {"vit-b16", {86567656, 152}},     {"bert-base", {109482240, 199}},
      {"gpt2-small", {124439808, 148}}, {"gpt2-xl", {1557611200, 580}},
      {"llama-small", {105788160, 75}}};
  ASSERT_EQ(list.size(), expected.size()) << r.out;
  for (const auto& m : list) {
    auto it = expected.find(m["name"]);
    ASSERT_NE(it, expected.end()) << m["name"];
    EXPECT_EQ(m["num_params"], it->second.first) << m["name"];
    EXPECT_EQ(m["num_tensors"], it->second.second) << m["name"];
    EXPECT_EQ(m["total_bytes"], 4 * it->second.first) << m["name"];
  }
}

TEST(CliBucketsTest, ConstructionPlanIsOneBucketWithoutFindUnused) {
  CliResult r = runCliForTest({"buckets", "--model", "resnet50", "--iteration", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json plan = json::parse(r.out);
  ASSERT_EQ(plan["buckets"].size(), 1u);
  EXPECT_EQ(plan["buckets"][0]["bytes"], 4 * 25557032);
  EXPECT_EQ(plan["buckets"][0]["params"].size(), 161u);
  EXPECT_EQ(plan["iteration"], "1");
}

TEST(CliBucketsTest, CurrentSemanticsUsesCapForEveryBucketWhenUserSetsIt) {
  // Current PyTorch: an explicit bucket_cap_mb makes the rebuild limits [cap, cap].
  CliResult cur =
      runCliForTest({"buckets", "--model", "resnet18", "--bucket-cap-mb", "5", "--json"});
  CliResult old = runCliForTest({"buckets", "--model", "resnet18", "--bucket-cap-mb", "5",
                                 "--torch-version", "1.13", "--json"});
  ASSERT_EQ(cur.exitCode, 0) << cur.err;
  ASSERT_EQ(old.exitCode, 0) << old.err;
  json c = json::parse(cur.out), o = json::parse(old.out);
  EXPECT_EQ(c["size_limits"], json::array({5242880, 5242880}));
  EXPECT_EQ(o["size_limits"], json::array({1048576, 5242880}));
  EXPECT_EQ(o["buckets"][0]["size_limit"], 1048576);
  EXPECT_EQ(c["buckets"][0]["size_limit"], 5242880);
}

TEST(CliBucketsTest, FindUnusedSteadyStateIsConstructionPlan) {
  CliResult steady = runCliForTest({"buckets", "--model", "resnet18", "--find-unused", "--json"});
  CliResult first = runCliForTest(
      {"buckets", "--model", "resnet18", "--find-unused", "--iteration", "1", "--json"});
  ASSERT_EQ(steady.exitCode, 0) << steady.err;
  EXPECT_EQ(json::parse(steady.out)["buckets"], json::parse(first.out)["buckets"]);
}

TEST(CliBucketsTest, ReadyOrderFileFormats) {
  std::string model = writeScratchFile("two.json", kTwoParams);
  std::string asArray = writeScratchFile("order.json", "[0, 1]");
  std::string asObject = writeScratchFile("order_obj.json", R"({"grad_ready_order": [1, 0]})");
  std::string asText = writeScratchFile("order.txt", "0\n1\n");
  for (const auto& [file, first] :
       std::vector<std::pair<std::string, int>>{{asArray, 0}, {asObject, 1}, {asText, 0}}) {
    CliResult r =
        runCliForTest({"buckets", "--model", model, "--ready-order-file", file, "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["buckets"][0]["params"][0], first) << file;
  }
}

TEST(CliBucketsTest, TextOutputNamesParameters) {
  CliResult r = runCliForTest({"buckets", "--model", "mlp-tiny"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2.bias .. 0.weight"));
  EXPECT_THAT(r.out, HasSubstr("1 buckets in reduction order"));
}

TEST(CliBadInputTest, MissingModelFile) {
  expectBadInput({"buckets", "--model", "/no/such/model.json"}, "/no/such/model.json");
}

TEST(CliBadInputTest, InvalidJson) {
  std::string path = writeScratchFile("broken.json", R"({"name": "m", "parameters": [)");
  expectBadInput({"buckets", "--model", path}, path);
}

TEST(CliBadInputTest, WrongTypes) {
  std::string path = writeScratchFile(
      "wrongtype.json",
      R"({"name": "m", "parameters": [{"name": "w", "shape": "10x50", "dtype": "float32"}]})");
  expectBadInput({"buckets", "--model", path}, "parameters[0].shape");
}

TEST(CliBadInputTest, NegativeAndZeroBucketCap) {
  expectBadInput({"buckets", "--model", "resnet18", "--bucket-cap-mb", "-1"},
                 "--bucket-cap-mb: expected a positive number, got '-1'");
  expectBadInput({"buckets", "--model", "resnet18", "--bucket-cap-mb", "0"},
                 "--bucket-cap-mb: expected a positive number, got '0'");
  expectBadInput({"buckets", "--model", "resnet18", "--bucket-cap-mb", "abc"}, "--bucket-cap-mb");
  expectBadInput({"buckets", "--model", "resnet18", "--first-bucket-mb", "0"}, "--first-bucket-mb");
}

TEST(CliBadInputTest, EmptyParameterList) {
  std::string path = writeScratchFile("empty.json", R"({"name": "m", "parameters": []})");
  expectBadInput({"buckets", "--model", path}, "parameters");
}

TEST(CliBadInputTest, UnknownDtype) {
  std::string path = writeScratchFile(
      "dtype.json",
      R"({"name": "m", "parameters": [{"name": "w", "shape": [2], "dtype": "float33"}]})");
  expectBadInput({"buckets", "--model", path}, "parameters[0].dtype");
  expectBadInput({"buckets", "--model", path}, "float33");
}

TEST(CliBadInputTest, ReadyOrderMissesOrRepeatsAParameter) {
  std::string model = writeScratchFile("two_b.json", kTwoParams);
  expectBadInput({"buckets", "--model", model, "--ready-order", "1"}, "parameter 0 is missing");
  expectBadInput({"buckets", "--model", model, "--ready-order", "1,1,0"},
                 "parameter 1 appears twice");
  expectBadInput({"buckets", "--model", model, "--ready-order", "0,7"}, "7");
  expectBadInput({"buckets", "--model", model, "--ready-order", "0,x"}, "--ready-order");
  std::string badFile = writeScratchFile("bad_order.json", R"({"grad_ready_order": [0, "1"]})");
  expectBadInput({"buckets", "--model", model, "--ready-order-file", badFile},
                 "grad_ready_order[1]");
}

TEST(CliBadInputTest, FlagMisuse) {
  expectBadInput({"buckets"}, "expected --model NAME|FILE");
  expectBadInput({"buckets", "--model", "resnet18", "--frobnicate"}, "unknown flag --frobnicate");
  expectBadInput({"buckets", "--model"}, "--model: expected a value");
  expectBadInput({"buckets", "--model", "resnet18", "--torch-version", "2.9"}, "2.9");
  expectBadInput({"buckets", "--model", "resnet18", "--iteration", "7"}, "--iteration");
  expectBadInput({"buckets", "--model", "resnet18", "--iteration", "1", "--ready-order", "0"},
                 "--iteration steady");
  expectBadInput({"overlap"}, "missing TRACE.json");
  expectBadInput({"nonsense"}, "unknown command 'nonsense'");
}

TEST(CliOverlapTest, ReportsHtaOverlapPerRank) {
  // Rank 0: compute [0, 100) us, comm [50, 150) us -> overlapped 50 us of 100 us comm = 50%.
  const char* trace = R"({"traceEvents": [
    {"ph": "X", "pid": 0, "tid": 0, "name": "backward", "cat": "backward", "ts": 0, "dur": 100},
    {"ph": "X", "pid": 0, "tid": 1, "name": "allreduce", "cat": "allreduce", "ts": 50, "dur": 100,
     "args": {"bucket": 0, "bytes": 1024}},
    {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "compute", "lane_kind": "compute"}},
    {"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {"name": "comm", "lane_kind": "comm"}}
  ]})";
  std::string path = writeScratchFile("overlap.json", trace);
  CliResult r = runCliForTest({"overlap", path, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json out = json::parse(r.out);
  ASSERT_EQ(out["ranks"].size(), 1u);
  EXPECT_EQ(out["ranks"][0]["comm_ns"], 100000);
  EXPECT_EQ(out["ranks"][0]["overlapped_ns"], 50000);
  EXPECT_EQ(out["ranks"][0]["exposed_comm_ns"], 50000);
  EXPECT_DOUBLE_EQ(out["ranks"][0]["overlap_percent"].get<double>(), 50.0);
}

}  // namespace
}  // namespace ddpscope::cli::testing
