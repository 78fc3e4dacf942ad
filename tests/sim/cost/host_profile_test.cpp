// Host profiles (sim/cost/host_profile.h): the built-ins load, a profile round-trips through its
// JSON, a cluster names one or gives DDP's terms alone, and bad input names the field.
#include "sim/cost/host_profile.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cost/cluster.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

using Json = nlohmann::json;

TEST(HostProfileTest, BuiltinsLoadWithSourceAndPerOpTerms) {
  const std::vector<std::string> names = builtinHostProfileNames();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    auto p = loadBuiltinHostProfile(name);
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_EQ(p->name, name);
    EXPECT_FALSE(p->source.empty());
    EXPECT_FALSE(p->standsFor.empty());
    EXPECT_TRUE(p->perOp());
    EXPECT_GT(p->profilerEventUs, 0);  // fitted from profiled traces
  }
  auto missing = loadHostProfile("no-such-profile");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("no built-in host profile named \"no-such-profile\""),
            std::string::npos);
}

TEST(HostProfileTest, JsonRoundTrip) {
  auto p = loadBuiltinHostProfile(builtinHostProfileNames().front());
  ASSERT_OK(p);
  auto again = parseHostProfile(hostProfileJson(*p), "again.json", "");
  ASSERT_TRUE(again.isOk()) << again.status().toString();
  EXPECT_EQ(hostProfileJson(*again), hostProfileJson(*p));
}

TEST(HostProfileTest, ClustersNameAProfileOrGiveDdpTermsAlone) {
  const std::string name = builtinHostProfileNames().front();
  Json doc = Json::parse(builtinClusterJson("dgx-h100"));
  doc.erase("ddp_overheads");
  doc["host_profile"] = name;
  auto named = parseClusterJson(doc.dump(), "c.json");
  ASSERT_TRUE(named.isOk()) << named.status().toString();
  EXPECT_EQ(named->host.name, name);
  EXPECT_TRUE(named->host.perOp());
  // Inline, and both spellings at once is an error.
  doc["host_profile"] = hostProfileJson(named->host);
  auto inlined = parseClusterJson(doc.dump(), "c.json");
  ASSERT_TRUE(inlined.isOk()) << inlined.status().toString();
  EXPECT_EQ(hostProfileJson(inlined->host), hostProfileJson(named->host));
  doc["ddp_overheads"] = {{"grad_hook_us", 3}};
  auto both = parseClusterJson(doc.dump(), "c.json");
  ASSERT_FALSE(both.isOk());
  EXPECT_NE(both.status().message().find("c.json: ddp_overheads: expected absent when "
                                         "host_profile is given"),
            std::string::npos)
      << both.status().message();
  doc.erase("ddp_overheads");
  doc["host_profile"] = "h100-nonexistent";
  auto unknown = parseClusterJson(doc.dump(), "c.json");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("c.json: host_profile: expected a built-in host "
                                            "profile's name ("),
            std::string::npos)
      << unknown.status().message();
}

TEST(HostProfileTest, BadTermsNameTheirField) {
  struct Case {
    Json doc;
    std::string message;
  };
  const Json base = {{"name", "p"}, {"source", "s"}, {"stands_for", "t"}};
  auto with = [&](const char* key, Json value) {
    Json d = base;
    d[key] = std::move(value);
    return d;
  };
  const std::vector<Case> cases = {
      {with("forward_op_us", -1), "p.json: forward_op_us: expected a number of µs in [0, 1e6]"},
      {with("module_us", 2e6), "p.json: module_us: expected a number of µs in [0, 1e6]"},
      {with("forward_ops_us", 1), "p.json: forward_ops_us: unknown field"},
      {with("ddp", {{"grad_hook_us", "15"}}), "p.json: ddp.grad_hook_us: expected a number"},
      {with("profiler", {{"event_us", -3}}), "p.json: profiler.event_us: expected a number"},
      {Json{{"source", "s"}, {"stands_for", "t"}}, "p.json: name:"},
  };
  for (const Case& c : cases) {
    auto p = parseHostProfile(c.doc, "p.json", "");
    ASSERT_FALSE(p.isOk()) << c.doc.dump();
    EXPECT_NE(p.status().message().find(c.message), std::string::npos) << p.status().message();
  }
}

}  // namespace
}  // namespace ddpscope::sim
