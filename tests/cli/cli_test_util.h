// In-process driver for the ddpscope CLI in tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace ddpscope::cli::testing {

// What every CLI test uses.
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
inline const std::string kDataDir = DDPSCOPE_TEST_DATA_DIR;

struct CliResult {
  int exitCode;
  std::string out;
  std::string err;
};

inline CliResult runCliForTest(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = runCli(args, out, err);
  return {code, out.str(), err.str()};
}

// A command that must succeed and print JSON: its parsed output (null after a failed check).
inline nlohmann::json runCliJson(const std::vector<std::string>& args) {
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  if (r.exitCode != 0) return nlohmann::json();
  return nlohmann::json::parse(r.out);
}

// A scratch directory unique to the running test binary.
inline std::filesystem::path scratchDir() {
  auto dir =
      std::filesystem::temp_directory_path() / ("ddpscope_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string writeScratchFile(const std::string& name, const std::string& text) {
  auto path = scratchDir() / name;
  std::ofstream(path) << text;
  return path.string();
}

// Bad input: exit code 2, nothing on stdout, one error line on stderr containing `needle`.
inline void expectBadInput(const std::vector<std::string>& args, const std::string& needle) {
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 2) << r.err << r.out;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::HasSubstr(needle));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace ddpscope::cli::testing
