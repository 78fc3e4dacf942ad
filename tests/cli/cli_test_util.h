// In-process driver for the ddpscope CLI in tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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

// The bucket sizes PyTorch DDP reported after its rebuild (_get_ddp_logging_data()'s
// "rebuilt_bucket_sizes", "8192000, 31506336, ...") in a GPU kit job's result,
// tests/data/gpu/h100/<run>/<model>.json, for one of its configurations ("ddp-default", ...).
inline std::vector<int64_t> h100RebuiltBucketSizes(const std::string& run, const std::string& model,
                                                   const std::string& config = "ddp-default") {
  std::ifstream in(std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/" + run + "/" + model +
                   ".json");
  const nlohmann::json job = nlohmann::json::parse(in);
  std::vector<int64_t> sizes;
  std::istringstream list(job["buckets"][config]["rebuilt_bucket_sizes"].get<std::string>());
  for (std::string size; std::getline(list, size, ',');) sizes.push_back(std::stoll(size));
  return sizes;
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
