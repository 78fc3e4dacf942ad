// The exit-code hand-over between `ddpscope run` and its ranks (cli/rank_exit.h); the whole path
// through mpirun is in tests/e2e/mpi_cli_test.cpp.
#include "cli/rank_exit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace ddpscope::cli {
namespace {

namespace fs = std::filesystem;

class RankExitTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv(kRankExitDirEnv); }
};

TEST_F(RankExitTest, ARankThatFailedHandsItsCodeOverAndExitsZero) {
  StatusOr<std::string> dir = makeRankExitDir();
  ASSERT_TRUE(dir.isOk()) << dir.status().message();
  EXPECT_TRUE(fs::is_directory(*dir));
  EXPECT_TRUE(fs::is_empty(*dir));
  ::setenv(kRankExitDirEnv, dir->c_str(), 1);
  EXPECT_EQ(handOverExitCode(0), 0);
  EXPECT_TRUE(fs::is_empty(*dir));  // success writes nothing
  EXPECT_EQ(handOverExitCode(2), 0);
  StatusOr<int> code = collectRankExits(*dir);
  ASSERT_TRUE(code.isOk()) << code.status().message();
  EXPECT_EQ(*code, 2);
  EXPECT_FALSE(fs::exists(*dir));  // removed
}

TEST_F(RankExitTest, TheLargestCodeOfTheRanksWinsAndNoneWrittenIsZero) {
  StatusOr<std::string> dir = makeRankExitDir();
  ASSERT_TRUE(dir.isOk());
  StatusOr<int> none = collectRankExits(*dir);
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(*none, 0);
  dir = makeRankExitDir();
  ASSERT_TRUE(dir.isOk());
  std::ofstream(fs::path(*dir) / "exit.11") << "1\n";
  std::ofstream(fs::path(*dir) / "exit.12") << "2\n";
  std::ofstream(fs::path(*dir) / "exit.13") << "1\n";
  StatusOr<int> code = collectRankExits(*dir);
  ASSERT_TRUE(code.isOk());
  EXPECT_EQ(*code, 2);
}

TEST_F(RankExitTest, WithoutTheVariableOrAWritableDirectoryTheRankKeepsItsCode) {
  EXPECT_EQ(handOverExitCode(1), 1);
  ::setenv(kRankExitDirEnv, "", 1);
  EXPECT_EQ(handOverExitCode(1), 1);
  ::setenv(kRankExitDirEnv, "/nonexistent/ddpscope/exit-dir", 1);
  EXPECT_EQ(handOverExitCode(2), 2);  // mpirun then sees it, as without the launcher
}

TEST_F(RankExitTest, AFileThatIsNotOneCodeIsAnErrorNamingIt) {
  for (const char* text : {"", "x", "0", "-1", "1 2"}) {
    StatusOr<std::string> dir = makeRankExitDir();
    ASSERT_TRUE(dir.isOk());
    const fs::path file = fs::path(*dir) / "exit.7";
    std::ofstream(file) << text;
    StatusOr<int> code = collectRankExits(*dir);
    ASSERT_FALSE(code.isOk()) << "'" << text << "'";
    EXPECT_EQ(code.status().message(),
              file.string() + ": a rank's exit code file does not hold one positive integer");
    EXPECT_FALSE(fs::exists(*dir));
  }
}

}  // namespace
}  // namespace ddpscope::cli
