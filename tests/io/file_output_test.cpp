#include "io/file_output.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "io/file_input.h"
#include "tests/status_matchers.h"

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
    const Status closed = (*file)->close();
    EXPECT_TRUE(closed.isOk()) << closed.message();
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

TEST(FileOutputTest, OpenFailureNamesThePathAndTheReason) {
  for (const std::string path : {"/nonexistent/ddpscope/out.json", "/nonexistent/out.json.gz"}) {
    StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(path);
    ASSERT_FALSE(file.isOk());
#ifdef DDPSCOPE_HAVE_ZLIB
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(file.status().message(),
              path + ": cannot open for writing: No such file or directory");
#else
    if (path.ends_with(".gz")) {
      EXPECT_EQ(file.status().code(), StatusCode::kUnimplemented);
      EXPECT_EQ(file.status().message(),
                path + ": cannot write gzip: ddpscope was built without zlib");
    } else {
      EXPECT_EQ(file.status().message(),
                path + ": cannot open for writing: No such file or directory");
    }
#endif
  }
  // A regular file where a directory should be: fails for root too.
  const std::string notADirectory = tempPath("plain_file");
  writeText(notADirectory, "x", /*close=*/true);
  StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(notADirectory + "/out.json");
  ASSERT_FALSE(file.isOk());
  EXPECT_EQ(file.status().message(),
            notADirectory + "/out.json: cannot open for writing: Not a directory");
  std::filesystem::remove(notADirectory);
}

TEST(FileOutputTest, ReadOnlyDirectoryIsRefusedWithTheReason) {
  // Permission bits: root ignores them, so this case runs for other users only.
  if (::geteuid() == 0) {
    std::printf("[ skipped  ] the 0555-directory case: running as root, which may write there\n");
  } else {
    const std::filesystem::path dir = tempPath("readonly_dir");
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(
        dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open((dir / "out.json").string());
    ASSERT_FALSE(file.isOk());
    EXPECT_EQ(file.status().message(),
              (dir / "out.json").string() + ": cannot open for writing: Permission denied");
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
    std::filesystem::remove_all(dir);
  }
  // A directory nobody may create files in, root included: sysfs refuses new files.
  struct stat sys = {};
  if (::stat("/sys/kernel", &sys) != 0) GTEST_SKIP() << "no /sys/kernel on this machine";
  StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open("/sys/kernel/ddpscope_out.json");
  ASSERT_FALSE(file.isOk());
  EXPECT_TRUE(file.status().message().starts_with(
      "/sys/kernel/ddpscope_out.json: cannot open for writing: "))
      << file.status().message();
}

TEST(FileOutputTest, FullDeviceFailsAtCloseWithTheReason) {
  struct stat full = {};
  if (::stat("/dev/full", &full) != 0 || !S_ISCHR(full.st_mode)) GTEST_SKIP() << "no /dev/full";
  for (const std::string path : {"/dev/full"}) {
    StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(path);
    ASSERT_TRUE(file.isOk()) << file.status().message();
    (*file)->stream() << std::string(1000, 'x');
    const Status closed = (*file)->close();
    ASSERT_FALSE(closed.isOk());
    EXPECT_EQ(closed.code(), StatusCode::kInternal);
    EXPECT_EQ(closed.message(), "/dev/full: write failed: No space left on device");
  }
}

TEST(FileOutputTest, ReplacesAnExistingFileOnlyWhenClosed) {
  const std::string path = tempPath("replace.json");
  writeText(path, "old contents", /*close=*/true);
  {
    StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::open(path);
    ASSERT_TRUE(file.isOk()) << file.status().message();
    (*file)->stream() << "new";
    // Before close() the destination still holds the old file, and the bytes are elsewhere.
    EXPECT_EQ(*readFileBytes(path), "old contents");
    ASSERT_OK((*file)->close());
  }
  EXPECT_EQ(*readFileBytes(path), "new");
  // Nothing but the destination is left in the directory (the temporary file was renamed).
  const std::string prefix = "." + std::filesystem::path(path).filename().string() + ".tmp";
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(prefix)) << entry.path();
  }
  std::filesystem::remove(path);
}

TEST(FileOutputTest, DestroyingWithoutCloseLeavesThePathUntouched) {
#ifdef DDPSCOPE_HAVE_ZLIB
  const std::vector<std::string> names = {"unclosed.json", "unclosed.json.gz"};
#else
  const std::vector<std::string> names = {"unclosed.json"};
#endif
  for (const std::string& name : names) {
    const std::string path = tempPath(name);
    std::filesystem::remove(path);
    writeText(path, "[{\"a\":1}]", /*close=*/false);
    EXPECT_FALSE(std::filesystem::exists(path)) << name;
    writeText(path, "[{\"a\":1}]", /*close=*/true);
    writeText(path, "[{\"b\":2}]", /*close=*/false);
    StatusOr<std::string> read = readMaybeGzippedFile(path);
    ASSERT_TRUE(read.isOk()) << read.status().message();
    EXPECT_EQ(*read, "[{\"a\":1}]") << name;
    std::filesystem::remove(path);
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

#endif

}  // namespace
}  // namespace ddpscope::io
