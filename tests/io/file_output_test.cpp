#include "io/file_output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <ostream>
#include <string>

#include "io/file_input.h"

namespace ddpscope::io {
namespace {

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ddpscope_file_output_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Writes `text` in two pieces through an OutputFile at `path`; closes it when `close`.
void writeText(const std::string& path, const std::string& text, bool close) {
  StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.status().message();
  (*file)->stream() << text.substr(0, 3);
  (*file)->stream().write(text.data() + 3, static_cast<std::streamsize>(text.size() - 3));
  if (close) {
    EXPECT_TRUE((*file)->close());
  }
}

TEST(FileOutputTest, WritesPlainFile) {
  const std::string path = tempPath("plain.json");
  writeText(path, "{\"traceEvents\":[]}", /*close=*/true);
  StatusOr<std::string> bytes = readFileBytes(path);
  ASSERT_TRUE(bytes.isOk()) << bytes.status().message();
  EXPECT_EQ(*bytes, "{\"traceEvents\":[]}");
  std::filesystem::remove(path);
}

TEST(FileOutputTest, OpenFailureNamesThePath) {
  for (const std::string path : {"/nonexistent/ddpscope/out.json", "/nonexistent/out.json.gz"}) {
    StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(path);
    ASSERT_FALSE(file.isOk());
#ifdef DDPSCOPE_HAVE_ZLIB
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(file.status().message(), path + ": cannot open for writing");
#else
    if (path.ends_with(".gz")) {
      EXPECT_EQ(file.status().code(), StatusCode::kUnimplemented);
      EXPECT_EQ(file.status().message(),
                path + ": cannot write gzip: ddpscope was built without zlib");
    } else {
      EXPECT_EQ(file.status().message(), path + ": cannot open for writing");
    }
#endif
  }
}

#ifdef DDPSCOPE_HAVE_ZLIB

TEST(FileOutputTest, CompressesGzPathsAndReadsBack) {
  const std::string path = tempPath("trace.json.gz");
  std::string text(100'000, 'x');
  writeText(path, text, /*close=*/true);
  StatusOr<std::string> bytes = readFileBytes(path);
  ASSERT_TRUE(bytes.isOk()) << bytes.status().message();
  EXPECT_TRUE(looksGzipped(*bytes));
  EXPECT_LT(bytes->size(), text.size() / 10);
  StatusOr<std::string> read = readMaybeGzippedFile(path);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, text);
  std::filesystem::remove(path);
}

TEST(FileOutputTest, DestroyingWithoutCloseStillClosesTheFile) {
  for (const std::string name : {"unclosed.json", "unclosed.json.gz"}) {
    const std::string path = tempPath(name);
    writeText(path, "[{\"a\":1}]", /*close=*/false);
    StatusOr<std::string> read = readMaybeGzippedFile(path);
    ASSERT_TRUE(read.isOk()) << read.status().message();
    EXPECT_EQ(*read, "[{\"a\":1}]") << name;
    std::filesystem::remove(path);
  }
}

#endif

}  // namespace
}  // namespace ddpscope::io
