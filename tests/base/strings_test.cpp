#include "base/strings.h"

#include <gtest/gtest.h>

namespace ddpscope {
namespace {

TEST(StringsTest, ParsesWholeIntegersOnly) {
  EXPECT_EQ(parseInt64("42"), 42);
  EXPECT_EQ(parseInt64(" -7 "), -7);
  EXPECT_EQ(parseInt64("+3"), 3);
  EXPECT_FALSE(parseInt64("4x").has_value());
  EXPECT_FALSE(parseInt64("").has_value());
  EXPECT_FALSE(parseInt64("99999999999999999999").has_value());
}

TEST(StringsTest, ParsesFiniteDoublesOnly) {
  EXPECT_DOUBLE_EQ(*parseDouble("2.5"), 2.5);
  EXPECT_FALSE(parseDouble("nan").has_value());
  EXPECT_FALSE(parseDouble("inf").has_value());
  EXPECT_FALSE(parseDouble("1.0mb").has_value());
}

TEST(StringsTest, SplitsAndFormats) {
  EXPECT_EQ(splitString("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(splitWhitespace("  8\t 2  float\r"),
            (std::vector<std::string_view>{"8", "2", "float"}));
  EXPECT_TRUE(splitWhitespace(" \t\r").empty());
  EXPECT_EQ(formatThousands(25557032), "25,557,032");
  EXPECT_EQ(formatThousands(-1000), "-1,000");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(26214400), "25.00 MiB");
}

TEST(StringsTest, MissingFileNamesThePath) {
  auto r = readFileToString("/nonexistent/ddpscope.json");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("/nonexistent/ddpscope.json"), std::string::npos);
  EXPECT_EQ(r.status().exitCode(), 2);
}

}  // namespace
}  // namespace ddpscope
