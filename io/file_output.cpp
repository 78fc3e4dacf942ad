#include "io/file_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <streambuf>
#include <string_view>
#include <vector>

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddpscope::io {

// The stream's buffer over one file descriptor. The first failure's errno is kept (0 = none);
// after a failure every write fails, so the ostream goes bad too.
class OutputFile::Sink : public std::streambuf {
 public:
  ~Sink() override = default;
  // Flushes and closes the descriptor (once); the first errno of the file's life, 0 when none.
  virtual int finish() = 0;

 protected:
  int m_error = 0;
};

namespace {

constexpr size_t kPlainBufferBytes = 64 * 1024;

// Plain file: 64 KiB buffer, write(2) retried on EINTR and short writes.
class FdSink final : public OutputFile::Sink {
 public:
  explicit FdSink(int fd) : m_fd(fd), m_buffer(kPlainBufferBytes) {
    setp(m_buffer.data(), m_buffer.data() + m_buffer.size());
  }
  ~FdSink() override { (void)finish(); }

  int finish() override {
    if (m_fd < 0) return m_error;
    (void)drain();
    if (::close(m_fd) != 0 && m_error == 0) m_error = errno;
    m_fd = -1;
    return m_error;
  }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* data = pbase();
    size_t left = static_cast<size_t>(pptr() - pbase());
    setp(m_buffer.data(), m_buffer.data() + m_buffer.size());
    if (m_error != 0 || m_fd < 0) return false;
    while (left > 0) {
      const ssize_t n = ::write(m_fd, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        m_error = n < 0 ? errno : EIO;
        return false;
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    return true;
  }

  int m_fd;
  std::vector<char> m_buffer;
};

#ifdef DDPSCOPE_HAVE_ZLIB
// gzip file: every write is one gzwrite (zlib buffers inside).
class GzipSink final : public OutputFile::Sink {
 public:
  explicit GzipSink(gzFile file) : m_file(file) {}
  ~GzipSink() override { (void)finish(); }

  int finish() override {
    if (m_file == nullptr) return m_error;
    errno = 0;
    const int code = gzclose(m_file);
    if (code != Z_OK && m_error == 0) m_error = code == Z_ERRNO && errno != 0 ? errno : EIO;
    m_file = nullptr;
    return m_error;
  }

 protected:
  std::streamsize xsputn(const char* data, std::streamsize count) override {
    if (m_file == nullptr || m_error != 0 || count <= 0) return 0;
    errno = 0;
    const int written = gzwrite(m_file, data, static_cast<unsigned>(count));
    if (written != count) {
      int gzCode = Z_OK;
      gzerror(m_file, &gzCode);
      m_error = gzCode == Z_ERRNO && errno != 0 ? errno : EIO;
      return 0;
    }
    return count;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

 private:
  gzFile m_file;
};
#endif

std::string reason(int error) {
  return std::strerror(error);
}

// ".<name>.tmp-<pid>-<n>" in the destination's directory (a rename within one file system).
std::string temporaryPathFor(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path destination(path);
  std::filesystem::path temp = destination.parent_path();
  temp /= "." + destination.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
          std::to_string(counter.fetch_add(1));
  return temp.string();
}

}  // namespace

OutputFile::OutputFile(std::string path, std::string tempPath, std::unique_ptr<Sink> sink)
    : m_path(std::move(path)),
      m_tempPath(std::move(tempPath)),
      m_sink(std::move(sink)),
      m_stream(std::make_unique<std::ostream>(m_sink.get())) {}

OutputFile::~OutputFile() {
  m_stream.reset();  // the stream goes before the buffer it writes to
  if (m_sink) (void)m_sink->finish();
  if (!m_committed && !m_tempPath.empty()) ::unlink(m_tempPath.c_str());
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::open(const std::string& path) {
  const bool gzip = std::string_view(path).ends_with(".gz");
#ifndef DDPSCOPE_HAVE_ZLIB
  if (gzip) return unimplemented(path + ": cannot write gzip: ddpscope was built without zlib");
#endif
  // A regular file (or nothing yet) is replaced by a rename; anything else is written in place.
  struct stat info = {};
  const bool inPlace = ::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode);
  const std::string tempPath = inPlace ? std::string() : temporaryPathFor(path);
  const int fd = inPlace ? ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC)
                         : ::open(tempPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return invalidArgument(path + ": cannot open for writing: " + reason(errno));
  std::unique_ptr<Sink> sink;
#ifdef DDPSCOPE_HAVE_ZLIB
  if (gzip) {
    gzFile file = gzdopen(fd, "wb6");
    if (file == nullptr) {
      ::close(fd);
      if (!tempPath.empty()) ::unlink(tempPath.c_str());
      return internalError(path + ": cannot start gzip compression");
    }
    sink = std::make_unique<GzipSink>(file);
  }
#endif
  if (!sink) sink = std::make_unique<FdSink>(fd);
  return std::unique_ptr<OutputFile>(new OutputFile(path, tempPath, std::move(sink)));
}

Status OutputFile::close() {
  if (m_committed || !m_sink) return failedPrecondition(m_path + ": closed twice");
  m_stream->flush();
  const int error = m_sink->finish();
  if (error != 0) return internalError(m_path + ": write failed: " + reason(error));
  if (!m_tempPath.empty() && ::rename(m_tempPath.c_str(), m_path.c_str()) != 0) {
    return internalError(m_path + ": cannot rename " + m_tempPath + " onto it: " + reason(errno));
  }
  m_committed = true;
  return Status::ok();
}

}  // namespace ddpscope::io
