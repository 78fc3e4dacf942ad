// Helpers shared by the libFuzzer targets (fuzz/*_fuzzer.cpp).
//
// Each target defines LLVMFuzzerTestOneInput and checks invariants of what the parser returns
// with FUZZ_CHECK: a parser may reject any input (a Status is the expected answer to garbage), but
// it must never crash, leak, hit undefined behaviour or return a result that breaks its own
// documented invariants. The same sources link either with libFuzzer (DDPSCOPE_FUZZ=ON, a
// clang build) or with replay_main.cpp, which runs the committed seeds and regression inputs in
// the normal test suite.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond, what)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                   \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)

namespace ddpscope::fuzz {

// The directory of the repository's test data (tests/data), for targets that need a fixed
// model or trace besides the fuzzed bytes.
inline std::string testDataDir() {
  return DDPSCOPE_FUZZ_TEST_DATA_DIR;
}

// Splits `data` at every occurrence of `separator` (no separator: one piece).
inline std::vector<std::string_view> splitInput(std::string_view data, std::string_view separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    const size_t at = data.find(separator, start);
    if (at == std::string_view::npos) {
      pieces.push_back(data.substr(start));
      return pieces;
    }
    pieces.push_back(data.substr(start, at - start));
    start = at + separator.size();
  }
}

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ddpscope::fuzz
