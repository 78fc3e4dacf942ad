// Fuzz target: the Chrome trace reader's gzip path (io/file_input.h gunzipBytes + the reader).
// libFuzzer's byte mutations would rarely keep a deflate stream valid, so the target compresses
// the fuzzed trace text itself and then damages the stream the way real files are damaged.
// The first input byte picks the shape of the gzip bytes:
//   0  one intact gzip member
//   1  the member truncated (at a point the second byte picks)
//   2  two members concatenated (`cat a.gz b.gz`), the text split between them
//   3  one byte of the member flipped (position and bits from the second byte)
//   4+ the rest of the input handed over as is after gzip's magic bytes (a raw, mostly corrupt
//      stream)
// A damaged stream must give an error naming the source; an intact one must read exactly as the
// same text read plain.
#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "fuzz/fuzz_util.h"
#include "traces/chrome_reader.h"

namespace {

std::string gzipBytes(std::string_view text) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer; level 1 keeps the target fast.
  if (deflateInit2(&stream, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&stream, text.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  FUZZ_CHECK(rc == Z_STREAM_END, "deflate did not finish");
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  const uint8_t knob = data[1];
  const std::string_view text = fuzz::asText(data + 2, size - 2);
  std::string bytes;
  bool intact = false;
  switch (mode) {
    case 0:
      bytes = gzipBytes(text);
      intact = true;
      break;
    case 1:
      bytes = gzipBytes(text);
      bytes.resize(bytes.size() * knob / 256);
      break;
    case 2: {
      const size_t cut = text.size() * knob / 256;
      bytes = gzipBytes(text.substr(0, cut)) + gzipBytes(text.substr(cut));
      intact = true;
      break;
    }
    case 3:
      bytes = gzipBytes(text);
      bytes[bytes.size() * knob / 256] ^= static_cast<char>(knob | 1);
      break;
    default:
      bytes = std::string("\x1f\x8b", 2) + std::string(text);
      break;
  }
  auto timeline = traces::parseChromeTrace(bytes, "fuzz.json.gz");
  if (!timeline.isOk()) {
    FUZZ_CHECK(timeline.status().message().find("fuzz.json.gz") != std::string::npos,
               "the error does not name the source: " + timeline.status().message());
  }
  if (intact) {
    auto plain = traces::parseChromeTrace(text, "fuzz.json.gz");
    FUZZ_CHECK(plain.isOk() == timeline.isOk(), "gzip and plain reads disagree");
    if (plain.isOk()) {
      FUZZ_CHECK(plain->rankCount() == timeline->rankCount(), "gzip and plain rank counts differ");
      FUZZ_CHECK(plain->spanCount() == timeline->spanCount(), "gzip and plain span counts differ");
    } else {
      FUZZ_CHECK(plain.status().message() == timeline.status().message(),
                 "gzip and plain errors differ: " + plain.status().message() + " vs " +
                     timeline.status().message());
    }
  }
  return 0;
}
