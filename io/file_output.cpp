#include "io/file_output.h"

#include <fstream>
#include <ostream>
#include <streambuf>
#include <string_view>

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddpscope::io {

#ifdef DDPSCOPE_HAVE_ZLIB
// A streambuf that hands every write to gzwrite (no buffer of its own).
class OutputFile::GzipBuffer : public std::streambuf {
 public:
  explicit GzipBuffer(gzFile file) : m_file(file) {}
  ~GzipBuffer() override { close(); }
  bool close() {
    if (m_file == nullptr) return m_ok;
    m_ok = gzclose(m_file) == Z_OK && m_ok;
    m_file = nullptr;
    return m_ok;
  }

 protected:
  std::streamsize xsputn(const char* data, std::streamsize count) override {
    if (m_file == nullptr || count <= 0) return 0;
    int written = gzwrite(m_file, data, static_cast<unsigned>(count));
    if (written != count) {
      m_ok = false;
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
  bool m_ok = true;
};
#else
class OutputFile::GzipBuffer : public std::streambuf {
 public:
  bool close() { return false; }
};
#endif

OutputFile::OutputFile(std::unique_ptr<GzipBuffer> gzip, std::unique_ptr<std::ostream> stream,
                       std::ofstream* plain)
    : m_gzip(std::move(gzip)), m_stream(std::move(stream)), m_plain(plain) {}

OutputFile::~OutputFile() {
  m_stream.reset();  // the stream goes before the gzip buffer it writes to
  m_gzip.reset();
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::open(const std::string& path) {
  if (std::string_view(path).ends_with(".gz")) {
#ifdef DDPSCOPE_HAVE_ZLIB
    gzFile file = gzopen(path.c_str(), "wb6");
    if (file == nullptr) return invalidArgument(path + ": cannot open for writing");
    auto gzip = std::make_unique<GzipBuffer>(file);
    auto stream = std::make_unique<std::ostream>(gzip.get());
    return std::unique_ptr<OutputFile>(new OutputFile(std::move(gzip), std::move(stream), nullptr));
#else
    return unimplemented(path + ": cannot write gzip: ddpscope was built without zlib");
#endif
  }
  auto stream = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*stream) return invalidArgument(path + ": cannot open for writing");
  std::ofstream* plain = stream.get();
  return std::unique_ptr<OutputFile>(new OutputFile(nullptr, std::move(stream), plain));
}

bool OutputFile::close() {
  m_stream->flush();
  bool ok = static_cast<bool>(*m_stream);
  if (m_gzip) ok = m_gzip->close() && ok;
  if (m_plain != nullptr) {
    m_plain->close();
    ok = ok && !m_plain->fail();
  }
  return ok;
}

}  // namespace ddpscope::io
