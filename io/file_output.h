// File output for the writers: a std::ostream onto a file, gzip-compressed (zlib, level 6)
// when the path ends in ".gz" (output is compressed by name; input is detected by content,
// see io/file_input.h).
//
// The gzip stream keeps no buffer of its own: each write is one gzwrite (zlib buffers inside;
// the Chrome writer writes 64 KiB blocks). close() reports every failure at once (a failed
// write, compression, flush or close), so the caller names the file in one error. Destroying
// an OutputFile that was not closed still closes the file.
//
// Errors of open() name the path:
//   InvalidArgument "<path>: cannot open for writing"
//   Unimplemented   "<path>: cannot write gzip: ddpscope was built without zlib" (".gz" paths,
//                   when built without zlib).
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "base/status.h"

namespace ddpscope::io {

class OutputFile {
 public:
  // Creates or truncates `path`.
  static StatusOr<std::unique_ptr<OutputFile>> open(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return *m_stream; }
  // Flushes and closes the file; false when any write or the close failed. Call once.
  bool close();

 private:
  class GzipBuffer;
  OutputFile(std::unique_ptr<GzipBuffer> gzip, std::unique_ptr<std::ostream> stream,
             std::ofstream* plain);

  std::unique_ptr<GzipBuffer> m_gzip;      // ".gz" paths: the zlib file m_stream writes to
  std::unique_ptr<std::ostream> m_stream;  // destroyed before m_gzip (declared after it)
  std::ofstream* m_plain = nullptr;        // other paths: m_stream itself
};

}  // namespace ddpscope::io
