// Third-party data files the tests read but the repository does not carry (other projects' traces
// and logs; tests/data/EXTERNAL.md names each file's public source). They are found under one
// folder, the CMake cache variable DDPSCOPE_EXTERNAL_DATA, compiled into the tests as
// DDPSCOPE_EXTERNAL_DATA_DIR (empty: none).
//
// A test that needs such a file takes it with DDPSCOPE_EXTERNAL_FILE(path, "hta/x.json.gz"): when
// the file is there, `path` is its path; when it is not, the test is skipped with one line naming
// the file and the variable, or fails with that line when DDPSCOPE_REQUIRE_EXTERNAL_DATA=1 is in
// the environment (scripts/test sets it, so CI cannot go green by skipping them).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ddpscope::test_data {

inline constexpr std::string_view kExternalDataVariable = "DDPSCOPE_EXTERNAL_DATA";
// How a file under the external folder is named in the repository's derived data (the keys of
// tests/data/hta/hta_overlap.json, bucket_costs.json): this prefix and its relative path.
inline constexpr std::string_view kExternalKeyPrefix = "$DDPSCOPE_EXTERNAL_DATA/";

inline std::string externalDataDir() {
  return DDPSCOPE_EXTERNAL_DATA_DIR;
}

// The path of `relative` under the external folder when that file exists, else nothing.
inline std::optional<std::string> externalDataPath(std::string_view relative) {
  const std::string dir = externalDataDir();
  if (dir.empty()) return std::nullopt;
  const std::filesystem::path path = std::filesystem::path(dir) / relative;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return path.string();
}

// Whether a missing external file fails the test instead of skipping it.
inline bool externalDataRequired() {
  const char* value = std::getenv("DDPSCOPE_REQUIRE_EXTERNAL_DATA");
  return value != nullptr && std::string_view(value) == "1";
}

// The one line a test without its external file prints.
inline std::string missingExternalMessage(std::string_view relative) {
  const std::string dir = externalDataDir();
  return "external data file " + std::string(relative) + " not found: " +
         (dir.empty() ? std::string(kExternalDataVariable) + " is empty"
                      : std::string(kExternalDataVariable) + "=" + dir) +
         " (tests/data/EXTERNAL.md says where to get it)";
}

}  // namespace ddpscope::test_data

// Declares `std::string var`, the path of the external file `relative`, or leaves the enclosing
// test (a void function) skipped — failed when DDPSCOPE_REQUIRE_EXTERNAL_DATA=1 — with a line
// naming the file and the variable.
#define DDPSCOPE_EXTERNAL_FILE(var, relative)                                      \
  std::string var;                                                                 \
  if (const auto found_ = ::ddpscope::test_data::externalDataPath(relative)) {       \
    var = *found_;                                                                 \
  } else if (::ddpscope::test_data::externalDataRequired()) {                        \
    FAIL() << ::ddpscope::test_data::missingExternalMessage(relative)                \
           << " and DDPSCOPE_REQUIRE_EXTERNAL_DATA=1";                             \
  } else {                                                                         \
    GTEST_SKIP() << ::ddpscope::test_data::missingExternalMessage(relative);         \
  }
