// File input for the loaders: the bytes of a file, and the text of a file that may be
// gzip-compressed (detected by gzip's magic bytes 1f 8b, never by the file name).
//
// Whole-buffer reads: the readers parse from memory (the Chrome reader runs nlohmann's SAX
// parser over one buffer), so a file is read into one std::string sized from the file size
// (no second copy of a plain file). A gzip file is inflated into a second string and the
// compressed bytes are released before the text is returned: peak memory is compressed +
// plain, the returned text is plain only. Time O(file bytes + plain bytes).
//
// Every error names the file (or the `sourceName` of in-memory bytes); the texts are part of
// the CLI's output and tests assert them:
//   NotFound        "<path>: cannot open file (<strerror>)"
//   InvalidArgument "<path>: read error"
//   InvalidArgument "<path>: gzip: <zlib's message>" / "<path>: gzip: truncated input"
//   InvalidArgument "<path>: gzip: inflates to more than <limit> MB (...)"   (see maxGunzipBytes)
//   Internal        "<path>: inflateInit failed"
//   Unimplemented   "<path>: gzip-compressed trace, but ddpscope was built without zlib; ..."
//                   (built without zlib: DDPSCOPE_HAVE_ZLIB is io's private definition).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ddpscope::io {

// True when `bytes` start with gzip's magic number (1f 8b).
bool looksGzipped(std::string_view bytes);

// Gzip bombs: a few MB of gzip can inflate to terabytes, and gunzipBytes holds its output in
// memory, so it stops and refuses the input once the output passes a limit (memory then peaks
// at the limit, not at what the bomb would inflate to). The limit is shared by every reader of
// gzip input (the CLI's trace readers, the Python package, published data sets):
// $DDPSCOPE_MAX_GUNZIP_MB decimal MB when set, else kDefaultMaxGunzipBytes — the GUI's default
// largest trace (DDPSCOPE_GUI_MAX_TRACE_MB), since a trace costs about 4 bytes of memory per
// byte of JSON to read (3.57 GB peak for a 1.05 GB trace).
inline constexpr int64_t kDefaultMaxGunzipBytes = 1'000'000'000;
inline constexpr const char* kMaxGunzipMbVariable = "DDPSCOPE_MAX_GUNZIP_MB";
// The limit in bytes; InvalidArgument naming the variable when it is set to anything but a
// positive whole number of MB.
StatusOr<int64_t> maxGunzipBytes();

// Decompresses gzip bytes: one member or several concatenated ones (as `cat a.gz b.gz`
// makes), at most `maxPlainBytes` of output (InvalidArgument past it, naming the limit and
// kMaxGunzipMbVariable). Errors name `sourceName`; without zlib it returns Unimplemented.
StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName,
                                  int64_t maxPlainBytes);
// The same with maxGunzipBytes() as the limit.
StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName);

// The uncompressed size of the gzip file at `path`, inflated in 64 KiB pieces (memory O(1)) and
// counted up to `limit`: returns the size, or limit + 1 as soon as it exceeds `limit` (a gzip
// bomb costs at most limit bytes of inflating). Errors as readFileBytes and gunzipBytes give them.
StatusOr<int64_t> gunzippedSize(const std::string& path, int64_t limit);

// The bytes of the file at `path`, as they are on disk.
StatusOr<std::string> readFileBytes(const std::string& path);

// The contents of the file at `path`, inflated once when they start with gzip's magic bytes
// (a plain file comes back as readFileBytes gives it; a gzip file's output is capped at
// maxGunzipBytes()).
StatusOr<std::string> readMaybeGzippedFile(const std::string& path);

}  // namespace ddpscope::io
