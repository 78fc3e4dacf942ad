#include "io/file_input.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "base/strings.h"

#ifdef DDPSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddpscope::io {
namespace {

// "1000 MB" for a whole number of decimal MB, else "<n> bytes".
[[maybe_unused]] std::string describeBytes(int64_t bytes) {
  constexpr int64_t kBytesPerMb = 1'000'000;
  if (bytes > 0 && bytes % kBytesPerMb == 0) return std::to_string(bytes / kBytesPerMb) + " MB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

bool looksGzipped(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

StatusOr<int64_t> maxGunzipBytes() {
  const char* text = std::getenv(kMaxGunzipMbVariable);
  if (text == nullptr) return kDefaultMaxGunzipBytes;
  constexpr int64_t kBytesPerMb = 1'000'000;
  const std::optional<int64_t> mb = parseInt64(text);
  if (!mb || *mb < 1 || *mb > INT64_MAX / kBytesPerMb) {
    return invalidArgument(std::string(kMaxGunzipMbVariable) +
                           ": expected a positive whole number of MB (the most bytes a gzip "
                           "input may inflate to), got '" +
                           text + "'");
  }
  return *mb * kBytesPerMb;
}

StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName) {
  ASSIGN_OR_RETURN(const int64_t limit, maxGunzipBytes());
  return gunzipBytes(bytes, sourceName, limit);
}

StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName,
                                  int64_t maxPlainBytes) {
#ifdef DDPSCOPE_HAVE_ZLIB
  const size_t limit = static_cast<size_t>(std::max<int64_t>(maxPlainBytes, 0));
  std::string out;
  out.reserve(std::min(bytes.size() * 4, limit));
  z_stream stream{};
  // 15 + 32: the largest window, and zlib detects the gzip (or zlib) header itself.
  if (inflateInit2(&stream, 15 + 32) != Z_OK)
    return internalError(sourceName + ": inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, &inflateEnd);
  // zlib counts input in uInt (32 bits): more than 4 GiB of gzip goes in slices.
  constexpr size_t kMaxSlice = size_t{1} << 30;
  size_t fed = 0;  // bytes handed to zlib so far
  const auto feed = [&] {
    if (stream.avail_in != 0 || fed == bytes.size()) return;
    const size_t slice = std::min(bytes.size() - fed, kMaxSlice);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
    stream.avail_in = static_cast<uInt>(slice);
    fed += slice;
  };
  char buffer[1 << 16];
  while (true) {
    feed();
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    const size_t produced = sizeof(buffer) - stream.avail_out;
    if (produced > limit - out.size()) {
      return invalidArgument(sourceName + ": gzip: inflates to more than " +
                             describeBytes(maxPlainBytes) +
                             " (the limit for gzip input, against gzip bombs); set " +
                             kMaxGunzipMbVariable + "=MB to raise it");
    }
    out.append(buffer, produced);
    if (rc == Z_STREAM_END) {
      feed();
      if (stream.avail_in == 0) break;
      inflateReset(&stream);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK) {
      return invalidArgument(sourceName +
                             ": gzip: " + (stream.msg != nullptr ? stream.msg : "corrupt data"));
    }
    if (stream.avail_in == 0 && fed == bytes.size() && stream.avail_out != 0) {
      return invalidArgument(sourceName + ": gzip: truncated input");
    }
  }
  return out;
#else
  (void)bytes;
  (void)maxPlainBytes;
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
