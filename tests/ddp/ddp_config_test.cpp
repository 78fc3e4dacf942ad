#include "ddp/ddp_config.h"

#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace ddpscope::ddp {
namespace {

TEST(DdpConfigTest, DefaultsMatchPyTorch) {
  DdpConfig config;
  EXPECT_EQ(config.bucketCapMb, 25.0);
  EXPECT_FALSE(config.bucketCapSetByUser);
  EXPECT_EQ(config.bucketCapBytes(), 26214400);
  EXPECT_EQ(config.firstBucketBytes, 1048576);
  EXPECT_EQ(config.noSyncPeriod, 1);
  EXPECT_EQ(config.profile, SemanticsProfile::kCurrent);
  EXPECT_OK(config.validate());
}

TEST(DdpConfigTest, BucketCapBytesTruncatesLikePythonInt) {
  DdpConfig config;
  config.setBucketCapMb(0.5);
  EXPECT_TRUE(config.bucketCapSetByUser);
  EXPECT_EQ(config.bucketCapBytes(), 524288);
  config.setBucketCapMb(1.1);  // 1153433.6 -> 1153433
  EXPECT_EQ(config.bucketCapBytes(), 1153433);
  config.setBucketCapMb(100);
  EXPECT_EQ(config.bucketCapBytes(), 104857600);
}

TEST(DdpConfigTest, ValidateNamesTheField) {
  DdpConfig config;
  config.bucketCapMb = -1;
  Status status = config.validate();
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bucket_cap_mb: expected a positive number of MiB, got -1");

  config = DdpConfig();
  config.bucketCapMb = 0;
  EXPECT_FALSE(config.validate().isOk());

  config = DdpConfig();
  config.firstBucketBytes = 0;
  EXPECT_NE(config.validate().message().find("first_bucket_bytes"), std::string::npos);

  config = DdpConfig();
  config.noSyncPeriod = 0;
  EXPECT_NE(config.validate().message().find("no_sync_period"), std::string::npos);

  config = DdpConfig();
  config.worldSize = 0;
  EXPECT_NE(config.validate().message().find("world_size"), std::string::npos);

  config = DdpConfig();
  config.bucketCapMb = 1e300;
  EXPECT_NE(config.validate().message().find("bucket_cap_mb"), std::string::npos);
}

TEST(DdpConfigTest, PowerSgdStartIterMustExceedOneWithErrorFeedback) {
  DdpConfig config;
  config.commHook.kind = CommHookKind::kPowerSgd;
  config.commHook.powerSgdStartIter = 1;
  Status status = config.validate();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("start_powerSGD_iter"), std::string::npos);
  config.commHook.powerSgdErrorFeedback = false;
  config.commHook.powerSgdWarmStart = false;
  EXPECT_OK(config.validate());
  config.commHook.powerSgdRank = 0;
  EXPECT_FALSE(config.validate().isOk());
}

TEST(DdpConfigTest, ParsesSemanticsProfiles) {
  EXPECT_EQ(*parseSemanticsProfile("1.13"), SemanticsProfile::kV1_13);
  EXPECT_EQ(*parseSemanticsProfile("current"), SemanticsProfile::kCurrent);
  EXPECT_EQ(*parseSemanticsProfile("1.5"), SemanticsProfile::kV1_5);
  StatusOr<SemanticsProfile> bad = parseSemanticsProfile("2.0");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("\"2.0\""), std::string::npos);
  for (SemanticsProfile profile :
       {SemanticsProfile::kV1_5, SemanticsProfile::kV1_13, SemanticsProfile::kCurrent}) {
    EXPECT_EQ(*parseSemanticsProfile(semanticsProfileName(profile)), profile);
  }
}

TEST(DdpConfigTest, ParsesCommHooks) {
  for (CommHookKind kind : {CommHookKind::kNone, CommHookKind::kAllreduce, CommHookKind::kFp16,
                            CommHookKind::kBf16, CommHookKind::kPowerSgd}) {
    EXPECT_EQ(*parseCommHookKind(commHookKindName(kind)), kind);
  }
  EXPECT_FALSE(parseCommHookKind("quantize").isOk());
}

TEST(DdpConfigTest, NoSyncPeriodSelectsSyncedIterations) {
  DdpConfig config;
  config.noSyncPeriod = 3;
  EXPECT_FALSE(config.syncEnabled(1));
  EXPECT_FALSE(config.syncEnabled(2));
  EXPECT_TRUE(config.syncEnabled(3));
  EXPECT_FALSE(config.syncEnabled(4));
  EXPECT_TRUE(config.syncEnabled(6));
  config.noSyncPeriod = 1;
  EXPECT_TRUE(config.syncEnabled(1));
}

TEST(DdpConfigTest, ToStringMentionsKeyFields) {
  DdpConfig config;
  config.findUnusedParameters = true;
  const std::string text = config.toString();
  EXPECT_NE(text.find("bucket_cap_mb=25 (default)"), std::string::npos);
  EXPECT_NE(text.find("find_unused_parameters=true"), std::string::npos);
  EXPECT_NE(text.find("semantics=2.15"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::ddp
