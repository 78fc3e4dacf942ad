// Tables in docs/ that a test computes: the block between "<!-- NAME:begin -->" and
// "<!-- NAME:end -->" in a file of the source tree must equal what the test computed, so the
// docs cannot drift from the code. DDPSCOPE_REGENERATE_DOCS=1 in the environment rewrites the
// block instead (then review the diff and commit it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ddpscope::test_docs {

inline void expectDocBlock(const std::string& relativePath, const std::string& name,
                           const std::string& content) {
  const std::string path = std::string(DDPSCOPE_SOURCE_DIR) + "/" + relativePath;
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const std::string begin = "<!-- " + name + ":begin -->\n";
  const std::string end = "<!-- " + name + ":end -->";
  const size_t a = text.find(begin);
  const size_t b = text.find(end);
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && a < b)
      << relativePath << " has no block " << begin << "..." << end;
  const size_t from = a + begin.size();
  const char* regenerate = std::getenv("DDPSCOPE_REGENERATE_DOCS");
  if (regenerate != nullptr && std::string(regenerate) == "1") {
    text.replace(from, b - from, content);
    std::ofstream(path) << text;
    return;
  }
  EXPECT_EQ(text.substr(from, b - from), content)
      << relativePath << ", block " << name
      << ": the docs differ from what the test computed; rerun with DDPSCOPE_REGENERATE_DOCS=1 "
         "and review the diff";
}

}  // namespace ddpscope::test_docs
