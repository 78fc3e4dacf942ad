#include "io/file_input.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddpscope::io {
namespace {

// A file in the temp directory, removed when the test ends. Fixtures are written at test
// time (no binary files in the repository).
class TempFile {
 public:
  TempFile(const std::string& name, std::string_view bytes)
      : m_path((std::filesystem::temp_directory_path() /
                ("ddpscope_file_input_test_" + std::to_string(::getpid()) + "_" + name))
                   .string()) {
    std::ofstream out(m_path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(m_path); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

// Bytes that are not text and contain a NUL: files are read as bytes, not as C strings.
const std::string kBinaryish = std::string("{\"a\":1}\0\xff\x1f", 10);

TEST(FileInputTest, ReadsPlainFileBytesUnchanged) {
  TempFile file("plain.json", kBinaryish);
  StatusOr<std::string> bytes = readFileBytes(file.path());
  ASSERT_TRUE(bytes.isOk()) << bytes.status().message();
  EXPECT_EQ(*bytes, kBinaryish);
  StatusOr<std::string> text = readMaybeGzippedFile(file.path());
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_EQ(*text, kBinaryish);
}

TEST(FileInputTest, ReadsEmptyFile) {
  TempFile file("empty.json", "");
  StatusOr<std::string> text = readMaybeGzippedFile(file.path());
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_EQ(*text, "");
}

TEST(FileInputTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = "/nonexistent/ddpscope/trace.json";
  for (const StatusOr<std::string>& read : {readFileBytes(path), readMaybeGzippedFile(path)}) {
    ASSERT_FALSE(read.isOk());
    EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(read.status().message(), path + ": cannot open file (No such file or directory)");
  }
}

TEST(FileInputTest, LooksGzippedChecksTheMagicBytesOnly) {
  EXPECT_TRUE(looksGzipped("\x1f\x8b"));
  EXPECT_TRUE(looksGzipped("\x1f\x8b\x08 anything"));
  EXPECT_FALSE(looksGzipped("\x1f"));
  EXPECT_FALSE(looksGzipped(""));
  EXPECT_FALSE(looksGzipped("\x8b\x1f"));
  EXPECT_FALSE(looksGzipped("{\"traceEvents\":[]}"));
}

#ifdef DDPSCOPE_HAVE_ZLIB

// One gzip member holding `text` (zlib's deflate with a gzip header: windowBits 15 + 16).
std::string gzipMember(std::string_view text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, static_cast<uLong>(text.size())) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string sampleText() {
  std::string text = "{\"traceEvents\":[";
  for (int i = 0; i < 2000; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph":"X","name":"step","pid":0,"tid":0,"ts":)" + std::to_string(i) + R"(,"dur":1})";
  }
  return text + "]}";
}

TEST(FileInputTest, InflatesGzipDetectedByMagicBytesNotByName) {
  const std::string text = sampleText();
  const std::string gz = gzipMember(text);
  ASSERT_TRUE(looksGzipped(gz));
  TempFile file("compressed.trace", gz);  // no .gz suffix on purpose
  StatusOr<std::string> read = readMaybeGzippedFile(file.path());
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, text);
  StatusOr<std::string> raw = readFileBytes(file.path());
  ASSERT_TRUE(raw.isOk()) << raw.status().message();
  EXPECT_EQ(*raw, gz);  // readFileBytes never inflates
}

TEST(FileInputTest, InflatesConcatenatedGzipMembers) {
  TempFile file("members.json.gz", gzipMember("[{\"a\":1},") + gzipMember("{\"b\":2}]"));
  StatusOr<std::string> read = readMaybeGzippedFile(file.path());
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, "[{\"a\":1},{\"b\":2}]");
}

TEST(FileInputTest, TruncatedGzipIsAnErrorNamingThePath) {
  const std::string gz = gzipMember(sampleText());
  // Cut in the middle of the deflate data, and cut only the 8-byte trailer (CRC + size).
  for (size_t keep : {gz.size() / 2, gz.size() - 8}) {
    TempFile file("truncated.json.gz", std::string_view(gz).substr(0, keep));
    StatusOr<std::string> read = readMaybeGzippedFile(file.path());
    ASSERT_FALSE(read.isOk()) << "kept " << keep << " of " << gz.size() << " bytes";
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(), file.path() + ": gzip: truncated input");
  }
}

TEST(FileInputTest, CorruptGzipIsAnErrorWithZlibsMessage) {
  std::string gz = gzipMember(sampleText());
  gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 0x55);  // first byte of the CRC
  TempFile file("corrupt.json.gz", gz);
  StatusOr<std::string> read = readMaybeGzippedFile(file.path());
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), file.path() + ": gzip: incorrect data check");
}

TEST(FileInputTest, GunzipBytesNamesTheSource) {
  StatusOr<std::string> plain = gunzipBytes(gzipMember("hello"), "mem.gz");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(*plain, "hello");
  std::string gz = gzipMember("hello");
  StatusOr<std::string> cut = gunzipBytes(std::string_view(gz).substr(0, 12), "mem.gz");
  ASSERT_FALSE(cut.isOk());
  EXPECT_EQ(cut.status().message(), "mem.gz: gzip: truncated input");
}

// Sets an environment variable for one test (unset: nullptr) and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_old) {
      ::setenv(m_name.c_str(), m_old->c_str(), 1);
    } else {
      ::unsetenv(m_name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string m_name;
  std::optional<std::string> m_old;
};

TEST(FileInputTest, GunzipBytesStopsAtTheLimit) {
  // 1 MB of zeros deflates to about 1 KB: a small gzip bomb.
  const std::string plain(1'000'000, '0');
  const std::string gz = gzipMember(plain);
  ASSERT_LT(gz.size(), 2'000u);
  StatusOr<std::string> exact = gunzipBytes(gz, "bomb.gz", 1'000'000);
  ASSERT_TRUE(exact.isOk()) << exact.status().message();
  EXPECT_EQ(*exact, plain);
  StatusOr<std::string> over = gunzipBytes(gz, "bomb.gz", 999'999);
  ASSERT_FALSE(over.isOk());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            "bomb.gz: gzip: inflates to more than 999999 bytes (the limit for gzip input, against "
            "gzip bombs); set DDPSCOPE_MAX_GUNZIP_MB=MB to raise it");
  // Concatenated members count together.
  StatusOr<std::string> two = gunzipBytes(gz + gz, "two.gz", 1'500'000);
  ASSERT_FALSE(two.isOk());
  EXPECT_EQ(two.status().message(),
            "two.gz: gzip: inflates to more than 1500000 bytes (the limit for gzip input, against "
            "gzip bombs); set DDPSCOPE_MAX_GUNZIP_MB=MB to raise it");
}

TEST(FileInputTest, GzipLimitComesFromTheEnvironment) {
  {
    ScopedEnv unset(kMaxGunzipMbVariable, nullptr);
    StatusOr<int64_t> limit = maxGunzipBytes();
    ASSERT_TRUE(limit.isOk()) << limit.status().message();
    EXPECT_EQ(*limit, kDefaultMaxGunzipBytes);
  }
  ScopedEnv one(kMaxGunzipMbVariable, "1");
  StatusOr<int64_t> limit = maxGunzipBytes();
  ASSERT_TRUE(limit.isOk()) << limit.status().message();
  EXPECT_EQ(*limit, 1'000'000);
  // The file readers use it, and the error names the file.
  TempFile file("bomb.json.gz", gzipMember(std::string(1'000'001, ' ')));
  StatusOr<std::string> read = readMaybeGzippedFile(file.path());
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().message(),
            file.path() +
                ": gzip: inflates to more than 1 MB (the limit for gzip input, against gzip "
                "bombs); set DDPSCOPE_MAX_GUNZIP_MB=MB to raise it");
  TempFile fits("fits.json.gz", gzipMember(std::string(1'000'000, ' ')));
  StatusOr<std::string> ok = readMaybeGzippedFile(fits.path());
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(ok->size(), 1'000'000u);
}

TEST(FileInputTest, BadGzipLimitIsAnErrorNamingTheVariable) {
  for (const char* value : {"", "0", "-5", "abc", "1.5", "9223372036855"}) {
    ScopedEnv bad(kMaxGunzipMbVariable, value);
    StatusOr<int64_t> limit = maxGunzipBytes();
    ASSERT_FALSE(limit.isOk()) << value;
    EXPECT_EQ(limit.status().message(),
              std::string("DDPSCOPE_MAX_GUNZIP_MB: expected a positive whole number of MB (the "
                          "most bytes a gzip input may inflate to), got '") +
                  value + "'");
    StatusOr<std::string> read = gunzipBytes(gzipMember("hello"), "mem.gz");
    ASSERT_FALSE(read.isOk()) << value;
    EXPECT_EQ(read.status().message(), limit.status().message());
  }
}

#else

TEST(FileInputTest, GzipWithoutZlibIsUnimplemented) {
  TempFile file("compressed.json.gz", "\x1f\x8b\x08\x00");
  StatusOr<std::string> read = readMaybeGzippedFile(file.path());
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(read.status().message(),
            file.path() +
                ": gzip-compressed trace, but ddpscope was built without zlib; decompress it "
                "with gunzip first");
}

#endif

}  // namespace
}  // namespace ddpscope::io
