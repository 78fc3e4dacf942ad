// File output for the writers: a std::ostream onto a file, gzip-compressed (zlib, level 6)
// when the path ends in ".gz" (output is compressed by name; input is detected by content,
// see io/file_input.h).
//
// Never a truncated file reported as written: the bytes go to a temporary file next to the
// destination (".<name>.tmp-<pid>-<n>", created exclusively) that close() renames onto the
// path only when every write, the compression, the flush and the close succeeded. A failed
// close() and an OutputFile destroyed without close() remove the temporary file and leave
// whatever was at the path untouched. A path that exists and is not a regular file (a symlink,
// /dev/null, /dev/full, a FIFO) cannot be replaced by a rename: it is written in place, and its
// write errors are still reported.
//
// The plain stream buffers 64 KiB and writes with write(2); the gzip stream hands each write to
// gzwrite (zlib buffers inside). Errors name the path and carry the system's reason (errno):
//   InvalidArgument "<path>: cannot open for writing: No such file or directory" (also
//                   "Permission denied", "Not a directory", "Is a directory", ...)
//   Internal        "<path>: write failed: No space left on device" (write, flush, close)
//   Internal        "<path>: cannot rename <tmp> onto it: <reason>"
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
  // Creates the temporary file (or opens a non-regular path in place).
  static StatusOr<std::unique_ptr<OutputFile>> open(const std::string& path);
  ~OutputFile();  // without a successful close(): removes the temporary file
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return *m_stream; }
  // Flushes, closes and renames the temporary file onto the path; the first failure as an
  // error naming the path. Call once.
  Status close();
  const std::string& path() const { return m_path; }

  class Sink;  // the stream's buffer (file_output.cpp)

 private:
  OutputFile(std::string path, std::string tempPath, std::unique_ptr<Sink> sink);

  std::string m_path;
  std::string m_tempPath;  // empty when written in place
  std::unique_ptr<Sink> m_sink;
  std::unique_ptr<std::ostream> m_stream;  // destroyed before m_sink (declared after it)
  bool m_committed = false;
};

}  // namespace ddpscope::io
