#include "io/file_input.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddpscope::io {

bool looksGzipped(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName) {
#ifdef DDPSCOPE_HAVE_ZLIB
  std::string out;
  out.reserve(bytes.size() * 4);
  z_stream stream{};
  // 15 + 32: the largest window, and zlib detects the gzip (or zlib) header itself.
  if (inflateInit2(&stream, 15 + 32) != Z_OK)
    return internalError(sourceName + ": inflateInit failed");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  char buffer[1 << 16];
  while (true) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    int rc = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (rc == Z_STREAM_END) {
      if (stream.avail_in == 0) break;
      inflateReset(&stream);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK) {
      std::string message = stream.msg != nullptr ? stream.msg : "corrupt data";
      inflateEnd(&stream);
      return invalidArgument(sourceName + ": gzip: " + message);
    }
    if (stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return invalidArgument(sourceName + ": gzip: truncated input");
    }
  }
  inflateEnd(&stream);
  return out;
#else
  (void)bytes;
  return unimplemented(sourceName +
                       ": gzip-compressed trace, but ddpscope was built without zlib; "
                       "decompress it with gunzip first");
#endif
}

StatusOr<int64_t> gunzippedSize(const std::string& path, int64_t limit) {
#ifdef DDPSCOPE_HAVE_ZLIB
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return notFound(path + ": cannot open file (" + std::strerror(errno) + ")");
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 32) != Z_OK) return internalError(path + ": inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, &inflateEnd);
  char in[1 << 16];
  char out[1 << 16];
  int64_t total = 0;
  bool eof = false;
  bool ended = false;  // the last inflate() finished a gzip member
  while (true) {
    if (stream.avail_in == 0 && !eof) {
      const size_t count = std::fread(in, 1, sizeof(in), file.get());
      if (count == 0) {
        if (std::ferror(file.get())) return invalidArgument(path + ": read error");
        eof = true;
      }
      stream.next_in = reinterpret_cast<Bytef*>(in);
      stream.avail_in = static_cast<uInt>(count);
    }
    if (ended) {
      if (stream.avail_in == 0) {
        if (eof) break;
        continue;
      }
      inflateReset(&stream);  // another gzip member follows
      ended = false;
    }
    stream.next_out = reinterpret_cast<Bytef*>(out);
    stream.avail_out = sizeof(out);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    total += static_cast<int64_t>(sizeof(out) - stream.avail_out);
    if (total > limit) return limit + 1;
    if (rc == Z_STREAM_END) {
      ended = true;
    } else if (rc == Z_BUF_ERROR) {  // no progress: more input needed
      if (eof || stream.avail_in != 0) return invalidArgument(path + ": gzip: truncated input");
    } else if (rc != Z_OK) {
      return invalidArgument(path +
                             ": gzip: " + (stream.msg != nullptr ? stream.msg : "corrupt data"));
    }
  }
  return total;
#else
  (void)limit;
  return unimplemented(path +
                       ": gzip-compressed trace, but ddpscope was built without zlib; "
                       "decompress it with gunzip first");
#endif
}

StatusOr<std::string> readFileBytes(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return notFound(path + ": cannot open file (" + std::strerror(errno) + ")");
  }
  std::string data;
  if (std::fseek(file, 0, SEEK_END) == 0) {
    long size = std::ftell(file);
    if (size > 0) data.reserve(static_cast<size_t>(size));
    std::fseek(file, 0, SEEK_SET);
  }
  char buffer[1 << 16];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0) data.append(buffer, count);
  bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return invalidArgument(path + ": read error");
  return data;
}

StatusOr<std::string> readMaybeGzippedFile(const std::string& path) {
  StatusOr<std::string> bytes = readFileBytes(path);
  if (!bytes.isOk() || !looksGzipped(*bytes)) return bytes;
  return gunzipBytes(*bytes, path);  // the compressed bytes are freed on return
}

}  // namespace ddpscope::io
