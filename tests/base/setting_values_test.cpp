#include "base/setting_values.h"

#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace ddpscope {
namespace {

SettingValues valuesOf(std::initializer_list<std::pair<std::string, std::string>> pairs) {
  SettingValues v;
  for (const auto& [name, text] : pairs) v.set(name, text);
  return v;
}

TEST(SettingValuesTest, AbsentSettingsTakeTheFallbackAndSwitchesHoldEmptyText) {
  const SettingValues v = valuesOf({{"all-ranks", ""}, {"batch", "32"}});
  EXPECT_TRUE(v.has("all-ranks"));
  EXPECT_EQ(v.value("all-ranks"), std::optional<std::string>(""));
  EXPECT_FALSE(v.value("seed").has_value());
  EXPECT_EQ(v.positiveInt("batch", 1).value(), 32);
  EXPECT_EQ(v.positiveInt("seq-len", 7).value(), 7);
  EXPECT_EQ(v.nonNegativeDouble("jitter", 0.5).value(), 0.5);
}

TEST(SettingValuesTest, MalformedValuesNameTheFlag) {
  const SettingValues v = valuesOf({{"batch", "0"}, {"seed", "-1"}, {"cap", "x"}});
  EXPECT_EQ(v.positiveInt("batch", 1).status().message(),
            "--batch: expected a positive integer, got '0'");
  EXPECT_EQ(v.nonNegativeInt("seed", 1).status().message(),
            "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(v.positiveDouble("cap", 1).status().message(),
            "--cap: expected a positive number, got 'x'");
}

TEST(SettingValuesTest, ANameOrFileSettingIsAFileWhenItLooksLikeOne) {
  EXPECT_FALSE(looksLikeFile("resnet50"));
  EXPECT_FALSE(looksLikeFile("dgx-h100"));
  EXPECT_TRUE(looksLikeFile("m.json"));
  EXPECT_TRUE(looksLikeFile("exports/bert"));
  EXPECT_TRUE(looksLikeFile(DDPSCOPE_SOURCE_DIR "/CMakeLists.txt"));  // an existing file
  EXPECT_EQ(requiredNameOrFile(valuesOf({{"model", "resnet50"}}), "model").value(), "resnet50");
  EXPECT_EQ(requiredNameOrFile(valuesOf({}), "cluster").status().message(),
            "expected --cluster NAME|FILE");
}

TEST(SettingValuesTest, UnknownNamesAreTheClisUnknownFlag) {
  const std::vector<SettingSpec> specs = {{"batch", "B", "samples"}, {"all-ranks", "", "all"}};
  EXPECT_OK(checkSettingNames(valuesOf({{"batch", "1"}, {"all-ranks", ""}}), specs));
  const Status s = checkSettingNames(valuesOf({{"bach", "1"}}), specs, " (see --help)");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown flag --bach (see --help)");
}

TEST(SettingValuesTest, PositiveListsNameTheBadEntry) {
  EXPECT_EQ(parsePositiveList("1,2.5,25", "--bucket-cap-mb").value(),
            (std::vector<double>{1, 2.5, 25}));
  EXPECT_EQ(parsePositiveList("5,-1", "--bucket-cap-mb").status().message(),
            "--bucket-cap-mb: expected positive numbers separated by commas, got '-1' in '5,-1'");
  EXPECT_EQ(parsePositiveIntList("1,2,4", "--nodes").value(), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parsePositiveIntList("1,0", "--nodes").status().message(),
            "--nodes: expected positive integers separated by commas, got '0' in '1,0'");
}

}  // namespace
}  // namespace ddpscope
