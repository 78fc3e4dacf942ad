#include "io/json_reader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ddpscope::io {
namespace {

using Json = nlohmann::json;

TEST(JsonReaderTest, ErrorsNameOriginPathExpectationAndWhatWasFound) {
  const JsonReader in("cluster.json");
  const Json doc = Json::parse(R"({"device": {"sm_count": -3, "arch": "pascal"}})");
  const Json& device = doc["device"];
  auto sm =
      in.integer(device, "device", "sm_count", 1, 1 << 20, std::nullopt, "a positive integer");
  EXPECT_EQ(sm.status().message(),
            "cluster.json: device.sm_count: expected a positive integer; got -3");
  auto arch = in.oneOf(device, "device", "arch", {"volta", "ampere"}, std::nullopt);
  EXPECT_EQ(arch.status().message(),
            "cluster.json: device.arch: expected one of volta, ampere; got \"pascal\"");
  auto missing = in.requiredString(device, "device", "name");
  EXPECT_EQ(missing.status().message(),
            "cluster.json: device.name: expected a non-empty string; got nothing (the field is "
            "missing)");
}

TEST(JsonReaderTest, FallbacksApplyOnlyWhenTheKeyIsMissing) {
  const JsonReader in("x.json");
  const Json doc = Json::parse(R"({"rate": 2.5, "flag": "yes"})");
  EXPECT_EQ(*in.number(doc, "", "rate", 0, 10, 1.0, "a rate"), 2.5);
  EXPECT_EQ(*in.number(doc, "", "other", 0, 10, 1.0, "a rate"), 1.0);
  EXPECT_FALSE(in.number(doc, "", "other", 0, 10, std::nullopt, "a rate").isOk());
  EXPECT_EQ(*in.boolean(doc, "", "missing", true), true);
  EXPECT_EQ(in.boolean(doc, "", "flag", true).status().message(),
            "x.json: flag: expected true or false; got \"yes\"");
  EXPECT_EQ(*in.string(doc, "", "description", "none"), "none");
}

TEST(JsonReaderTest, IntegersOutsideInt64AndRangesAreRejected) {
  const JsonReader in("m.json");
  const Json big = Json::parse("18446744073709551615");
  EXPECT_FALSE(in.integerValue(big, "shape[0]", 0, INT64_MAX, "a size").isOk());
  EXPECT_FALSE(in.integerValue(Json(1.5), "shape[0]", 0, 10, "a size").isOk());
  EXPECT_EQ(*in.integerValue(Json(7), "shape[0]", 0, 10, "a size"), 7);
}

TEST(JsonReaderTest, UnknownKeysAreErrorsListingTheAllowedOnes) {
  const JsonReader in("c.json");
  const Json doc = Json::parse(R"({"name": "a", "gpus_pre_node": 8})");
  EXPECT_EQ(in.checkKeys(doc, "", {"name", "gpus_per_node"}).message(),
            "c.json: gpus_pre_node: unknown field; expected one of name, gpus_per_node");
}

TEST(JsonReaderTest, ParseJsonObjectNamesTheByteOfASyntaxError) {
  auto bad = parseJsonObject("{\"a\": }", "f.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("f.json: (document): expected valid JSON; parse error at "
                                        "byte 7"),
            std::string::npos);
  EXPECT_EQ(parseJsonObject("[1]", "f.json").status().message(),
            "f.json: (root): expected a JSON object; got an array [1]");
}

}  // namespace
}  // namespace ddpscope::io
