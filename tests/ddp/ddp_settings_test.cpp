#include "ddp/ddp_settings.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/ddp_flags.h"
#include "tests/status_matchers.h"

namespace ddpscope::ddp {
namespace {

using namespace ddpscope::api;  // the flags that set these settings

using Json = nlohmann::json;

// What a command line does with ddpSettingsFlags(): every "--flag [value]" applied in order.
StatusOr<DdpConfig> applyFlags(const std::vector<std::string>& flags) {
  DdpConfig config;
  for (size_t i = 0; i < flags.size(); ++i) {
    const DdpSettingSpec* spec = nullptr;
    for (const DdpSettingSpec& s : ddpSettingSpecs()) {
      if ("--" + std::string(s.flag) == flags[i]) spec = &s;
    }
    if (spec == nullptr) return invalidArgument("unknown flag " + flags[i]);
    const std::string value = spec->valueName.empty() ? "" : flags.at(++i);
    RETURN_IF_ERROR(applyDdpSetting(spec->id, value, config));
  }
  RETURN_IF_ERROR(validateDdpConfig(config));
  return config;
}

// Configurations that set every setting away from its default, one or several at a time.
std::vector<DdpConfig> variedConfigs() {
  std::vector<DdpConfig> out;
  out.push_back(DdpConfig());
  DdpConfig c;
  c.setBucketCapMb(1.0 / 64.0);
  out.push_back(c);
  c = DdpConfig();
  c.setBucketCapMb(25);  // explicit 25 is not the default (current PyTorch: bucket_cap_mb=None)
  c.firstBucketBytes = 123457;
  c.findUnusedParameters = true;
  out.push_back(c);
  c = DdpConfig();
  c.staticGraph = true;
  c.gradientAsBucketView = true;
  c.noSyncPeriod = 4;
  c.broadcastBuffers = false;
  c.profile = SemanticsProfile::kV1_13;
  out.push_back(c);
  for (CommHookKind kind : {CommHookKind::kAllreduce, CommHookKind::kFp16, CommHookKind::kBf16}) {
    c = DdpConfig();
    c.commHook.kind = kind;
    out.push_back(c);
  }
  c = DdpConfig();
  c.commHook.kind = CommHookKind::kPowerSgd;
  c.commHook.powerSgdRank = 4;
  c.profile = SemanticsProfile::kV1_5;
  c.setBucketCapMb(1.1);
  out.push_back(c);
  // The PyTorch 2.15 arguments.
  c = DdpConfig();
  c.bucketCapMbList = {1, 4, 25};
  c.batchedGradCopy = true;
  c.skipAllReduceUnusedParams = true;
  c.findUnusedParameters = true;
  c.lazyBucketAllocation = true;
  c.mixedPrecision = {true, models::DType::kBFloat16, models::DType::kFloat32};
  out.push_back(c);
  c = DdpConfig();
  c.broadcastBuffers = false;  // deprecated broadcast_buffers=False: no init sync either
  c.initSyncBuffers = false;
  c.mixedPrecision = {true, models::DType::kFloat16, models::DType::kFloat16};
  out.push_back(c);
  c = DdpConfig();
  c.broadcastBuffers = false;  // forward_sync_buffers=False
  out.push_back(c);
  return out;
}

TEST(DdpSettingsTest, EverySettingHasOneFlagAndThePlanSubsetIsThePlanChanging) {
  std::set<std::string_view> flags;
  for (const DdpSettingSpec& spec : ddpSettingSpecs()) {
    EXPECT_TRUE(flags.insert(spec.flag).second) << spec.flag;
    EXPECT_FALSE(spec.help.empty()) << spec.flag;
    EXPECT_TRUE(DdpSettingSet::all().contains(spec.id));
    EXPECT_EQ(DdpSettingSet::bucketPlan().contains(spec.id), spec.changesBucketPlan);
  }
  EXPECT_TRUE(DdpSettingSet::bucketPlan().contains(DdpSetting::kFindUnused));
  EXPECT_FALSE(DdpSettingSet::bucketPlan().contains(DdpSetting::kCommHook));
  EXPECT_FALSE(DdpSettingSet::all().without(DdpSetting::kCommHook).contains(DdpSetting::kCommHook));
}

TEST(DdpSettingsTest, FlagsRoundTripEveryFlagExpressibleSetting) {
  for (const DdpConfig& c : variedConfigs()) {
    const std::vector<std::string> flags = ddpSettingsFlags(c);
    StatusOr<DdpConfig> back = applyFlags(flags);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(*back, c) << c.toString() << " -> " << back->toString();
  }
  EXPECT_TRUE(ddpSettingsFlags(DdpConfig()).empty());
}

TEST(DdpSettingsTest, JsonRoundTripsEverySetting) {
  std::vector<DdpConfig> configs = variedConfigs();
  DdpConfig powerSgd;
  powerSgd.commHook.kind = CommHookKind::kPowerSgd;
  powerSgd.commHook.powerSgdRank = 8;
  powerSgd.commHook.powerSgdStartIter = 20;
  powerSgd.commHook.powerSgdMinCompressionRate = 3.5;
  powerSgd.commHook.powerSgdErrorFeedback = false;
  powerSgd.commHook.powerSgdWarmStart = false;
  powerSgd.setLastBucketCap = true;
  configs.push_back(powerSgd);
  for (const DdpConfig& c : configs) {
    const Json j = ddpSettingsJson(c);
    StatusOr<DdpConfig> back = readDdpSettingsJson(j, "run.json");
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(*back, c) << j.dump();
    EXPECT_TRUE(containsDdpSettings(j));
  }
}

TEST(DdpSettingsTest, CanonicalKeysArePyTorchsArgumentNames) {
  const Json j = ddpSettingsJson(DdpConfig());
  for (const char* key : {"bucket_cap_mb", "find_unused_parameters", "static_graph",
                          "gradient_as_bucket_view", "broadcast_buffers", "first_bucket_bytes",
                          "no_sync_steps", "comm_hook", "semantics", "bucket_cap_set_by_user"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_FALSE(j.contains("find_unused"));
  EXPECT_FALSE(j.contains("no_sync"));
  EXPECT_EQ(j["find_unused_parameters"], false);
}

TEST(DdpSettingsTest, ReadsTraceMetadataIntegersAndLegacyKeys) {
  // What the runtime and the simulator wrote before one module owned the keys.
  const Json legacy = Json::parse(
      R"({"model": "mlp-wide", "bucket_cap_mb": 5, "find_unused": 1, "no_sync": 4,
          "first_bucket_mb": 0.5, "static_graph": 0, "gradient_as_bucket_view": 1})");
  StatusOr<DdpConfig> c = readDdpSettingsJson(legacy, "old.json");
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c->bucketCapMb, 5);
  EXPECT_TRUE(c->bucketCapSetByUser);  // no bucket_cap_set_by_user: 5 != 25 was given
  EXPECT_TRUE(c->findUnusedParameters);
  EXPECT_EQ(c->noSyncPeriod, 4);
  EXPECT_EQ(c->firstBucketBytes, 524288);
  EXPECT_FALSE(c->staticGraph);
  EXPECT_TRUE(c->gradientAsBucketView);
  // 25 without bucket_cap_set_by_user counts as DDP's default (bucket_cap_mb=None).
  StatusOr<DdpConfig> d = readDdpSettingsJson(Json::parse(R"({"bucket_cap_mb": 25})"), "x");
  ASSERT_OK(d);
  EXPECT_FALSE(d->bucketCapSetByUser);
  EXPECT_FALSE(containsDdpSettings(Json::parse(R"({"model": "x", "world_size": 2})")));
}

TEST(DdpSettingsTest, BadValuesNameTheOriginAndTheKeyOnce) {
  EXPECT_EQ(
      readDdpSettingsJson(Json::parse(R"({"bucket_cap_mb": -1})"), "run.json").status().message(),
      "run.json: bucket_cap_mb: expected a positive number (MiB); got -1");
  // The legacy first_bucket_mb must give an int64 byte count.
  EXPECT_EQ(readDdpSettingsJson(Json::parse(R"({"first_bucket_mb": 1.5e14})"), "run.json")
                .status()
                .message(),
            "run.json: first_bucket_mb: expected a positive number (MiB) below 2^43; got "
            "150000000000000.0");
  EXPECT_EQ(readDdpSettingsJson(Json::parse(R"({"find_unused_parameters": 2})"), "run.json")
                .status()
                .message(),
            "run.json: find_unused_parameters: expected true or false (or 1 / 0); got 2");
  EXPECT_EQ(
      readDdpSettingsJson(Json::parse(R"({"comm_hook": "int8"})"), "run.json").status().message(),
      "run.json: comm_hook: expected one of none, allreduce, fp16, bf16, powersgd; got \"int8\"");
  EXPECT_EQ(
      readDdpSettingsJson(Json::parse(R"({"no_sync_steps": 0})"), "run.json").status().message(),
      "run.json: no_sync_steps: expected an integer >= 1 (1 = synchronize every step); "
      "got 0");
  // A cross-field rule (DdpConfig::validate), once, with the origin.
  EXPECT_EQ(readDdpSettingsJson(
                Json::parse(R"({"comm_hook": "powersgd", "powersgd_start_iter": 1})"), "run.json")
                .status()
                .message(),
            "run.json: powersgd start_powerSGD_iter: expected > 1 when use_error_feedback or "
            "warm_start is enabled (buckets are rebuilt after iteration 1), got 1");
}

TEST(DdpSettingsTest, FlagErrorsNameTheFlag) {
  DdpConfig c;
  EXPECT_EQ(applyDdpSetting(DdpSetting::kBucketCapMb, "0", c).message(),
            "--bucket-cap-mb: expected a positive number, got '0'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kFirstBucketMb, "1e-9", c).message(),
            "--first-bucket-mb: expected at least one byte, got '1e-9'");
  // 2^43 MiB and more is no int64 byte count (a fuzz finding: the conversion was undefined).
  EXPECT_EQ(applyDdpSetting(DdpSetting::kFirstBucketMb, "1.5e14", c).message(),
            "--first-bucket-mb: 1.5e14 MiB does not fit in a 64-bit byte count");
  DdpConfig large;
  EXPECT_TRUE(applyDdpSetting(DdpSetting::kFirstBucketMb, "8388607", large).isOk());  // 2^23 MiB
  EXPECT_EQ(large.firstBucketBytes, int64_t{8388607} * 1024 * 1024);
  EXPECT_EQ(applyDdpSetting(DdpSetting::kNoSyncSteps, "two", c).message(),
            "--no-sync-steps: expected a positive integer, got 'two'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kCommHook, "powersgd:0", c).message(),
            "--comm-hook: expected powersgd:R with a positive rank R, got 'powersgd:0'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kCommHook, "int8", c).message(),
            "--comm-hook: expected fp16, bf16, powersgd:R, allreduce or none, got 'int8'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kSemantics, "2.0", c).message(),
            "--torch-version: expected 2.15 (or current), 1.13 or 1.5, got '2.0'");
  EXPECT_EQ(c, DdpConfig());  // failed flags change nothing
}

}  // namespace
}  // namespace ddpscope::ddp

namespace ddpscope::ddp {
namespace {

using namespace ddpscope::api;  // the flags that set these settings

TEST(DdpSettings215Test, FlagsSetTheArgumentsAndBadValuesNameTheFlag) {
  DdpConfig c;
  ASSERT_OK(applyDdpSetting(DdpSetting::kBucketCapMbList, "1, 4,25", c));
  EXPECT_EQ(c.bucketCapMbList, (std::vector<int64_t>{1, 4, 25}));
  EXPECT_EQ(c.bucketCapBytes(), 25 * 1048576);  // the effective cap is the maximum
  EXPECT_TRUE(c.capGivenByUser());
  ASSERT_OK(applyDdpSetting(DdpSetting::kMixedPrecision, "bf16:fp32", c));
  EXPECT_EQ(c.mixedPrecision.paramDtype, models::DType::kBFloat16);
  EXPECT_EQ(c.mixedPrecision.reduceDtype, models::DType::kFloat32);
  ASSERT_OK(applyDdpSetting(DdpSetting::kMixedPrecision, "fp16", c));
  EXPECT_EQ(c.mixedPrecision.reduceDtype, models::DType::kFloat16);
  // broadcast_buffers=False drops buffers from the construction sync; forward_sync_buffers=False
  // does not, and wins when both are given (flags apply in --help order).
  DdpConfig b;
  ASSERT_OK(applyDdpSetting(DdpSetting::kNoBroadcastBuffers, "", b));
  EXPECT_FALSE(b.broadcastBuffers);
  EXPECT_FALSE(b.initSyncBuffers);
  ASSERT_OK(applyDdpSetting(DdpSetting::kNoForwardSyncBuffers, "", b));
  EXPECT_FALSE(b.broadcastBuffers);
  EXPECT_TRUE(b.initSyncBuffers);

  DdpConfig d;
  EXPECT_EQ(applyDdpSetting(DdpSetting::kBucketCapMbList, "1,0", d).message(),
            "--bucket-cap-mb-list: expected a comma-separated list of positive whole MiB (e.g. "
            "1,4,25), got '1,0'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kBucketCapMbList, "2.5", d).message(),
            "--bucket-cap-mb-list: expected a comma-separated list of positive whole MiB (e.g. "
            "1,4,25), got '2.5'");
  EXPECT_EQ(applyDdpSetting(DdpSetting::kMixedPrecision, "int8", d).message(),
            "--mixed-precision: expected P or P:R with P, R in fp16, bf16, fp32, got 'int8'");
  EXPECT_EQ(d, DdpConfig());
}

TEST(DdpSettings215Test, NewArgumentsNeedThe215ProfileAndMixedPrecisionNoHook) {
  DdpConfig c;
  c.profile = SemanticsProfile::kV1_13;
  c.batchedGradCopy = true;
  EXPECT_EQ(validateDdpConfig(c).message(),
            "batched_grad_copy: a PyTorch 2.15 argument, not available with semantics 1.13 (use "
            "semantics 2.15)");
  c = DdpConfig();
  c.mixedPrecision.enabled = true;
  c.commHook.kind = CommHookKind::kFp16;
  EXPECT_NE(validateDdpConfig(c).message().find("mixed_precision"), std::string::npos);
  EXPECT_OK(validateDdpConfig(DdpConfig()));
  EXPECT_EQ(DdpConfig().profile, SemanticsProfile::kV2_15);
  EXPECT_EQ(semanticsProfileName(DdpConfig().profile), "2.15");
}

TEST(DdpSettings215Test, ReadsTraceMetadataStringsAndRejectsBadValues) {
  // Trace metadata stores arrays as their JSON text (traces/args_json.h).
  Json meta = {{"bucket_cap_mb_list", "[1,4,25]"},
               {"mixed_precision", "float16:float32"},
               {"forward_sync_buffers", 0}};
  StatusOr<DdpConfig> c = readDdpSettingsJson(meta, "trace.json");
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c->bucketCapMbList, (std::vector<int64_t>{1, 4, 25}));
  EXPECT_TRUE(c->mixedPrecision.enabled);
  EXPECT_FALSE(c->broadcastBuffers);
  StatusOr<DdpConfig> bad = readDdpSettingsJson({{"bucket_cap_mb_list", {1, -2}}}, "run.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("bucket_cap_mb_list"), std::string::npos);
  EXPECT_NE(bad.status().message().find("run.json"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::ddp
