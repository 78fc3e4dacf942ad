#include "traces/chrome_reader.h"

// The reader in parts (internal headers, not public API):
//   io/file_input.h                 file bytes, gzip detected by magic bytes and inflated
//   chrome_tokenizer.h              SAX over the text → top-level facts + one RawEvent at a time
//   chrome_event_handler.h          per-phase decoding → RawTrace (pid / tid keyed)
//   chrome_timeline_assembly.h      RawTrace → Timeline (ranks, lanes, categories, sorting)
// This file holds the public entry points and the exact µs → ns conversion.

#include <charconv>
#include <cmath>
#include <utility>

#include "io/file_input.h"
#include "traces/chrome_event_handler.h"
#include "traces/chrome_raw_trace.h"
#include "traces/chrome_timeline_assembly.h"
#include "traces/chrome_tokenizer.h"

namespace ddpscope::traces {

std::optional<Nanos> parseMicrosText(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t pos = 0;
  bool negative = false;
  if (text[pos] == '-' || text[pos] == '+') {
    negative = text[pos] == '-';
    ++pos;
  }
  if (text.find_first_of("eE") != std::string_view::npos) {
    double value = 0;
    auto [ptr, ec] =
        std::from_chars(text.data() + (text[0] == '+' ? 1 : 0), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value) ||
        std::fabs(value) >= 9.2e15) {
      return std::nullopt;
    }
    return Nanos::fromMicrosDouble(value);
  }
  constexpr uint64_t kMaxMicros = static_cast<uint64_t>(INT64_MAX / 1000) - 1;
  uint64_t micros = 0;
  size_t integerDigits = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    micros = micros * 10 + static_cast<uint64_t>(text[pos] - '0');
    if (micros > kMaxMicros) return std::nullopt;
    ++pos;
    ++integerDigits;
  }
  uint64_t fractionNs = 0;
  size_t fractionDigits = 0;
  bool roundUp = false;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      int digit = text[pos] - '0';
      if (fractionDigits < 3) {
        fractionNs = fractionNs * 10 + static_cast<uint64_t>(digit);
      } else if (fractionDigits == 3) {
        roundUp = digit >= 5;  // half away from zero
      }
      ++pos;
      ++fractionDigits;
    }
  }
  if (pos != text.size() || (integerDigits == 0 && fractionDigits == 0)) return std::nullopt;
  for (size_t d = fractionDigits; d < 3; ++d) fractionNs *= 10;
  int64_t ns = static_cast<int64_t>(micros * 1000 + fractionNs + (roundUp ? 1 : 0));
  return Nanos(negative ? -ns : ns);
}

bool looksGzipped(std::string_view bytes) {
  return io::looksGzipped(bytes);
}

StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName) {
  return io::gunzipBytes(bytes, sourceName);
}

StatusOr<Timeline> parseChromeTrace(std::string_view bytes, const std::string& sourceName,
                                    const ChromeReadOptions& options, ChromeReadReport* report) {
  if (io::looksGzipped(bytes)) {
    ASSIGN_OR_RETURN(std::string plain,
                     options.maxGunzipBytes > 0
                         ? io::gunzipBytes(bytes, sourceName, options.maxGunzipBytes)
                         : io::gunzipBytes(bytes, sourceName));
    return parseChromeTrace(plain, sourceName, options, report);
  }
  return chrome_detail::parsePlainChromeTrace(bytes, sourceName, options, report,
                                              chrome_detail::JsonScanner::kAuto);
}

namespace chrome_detail {

StatusOr<Timeline> parsePlainChromeTrace(std::string_view text, const std::string& sourceName,
                                         const ChromeReadOptions& options, ChromeReadReport* report,
                                         JsonScanner scanner) {
  // One pass with fresh state; `declined` is null for nlohmann's parser.
  auto parse = [&](bool* declined) -> StatusOr<Timeline> {
    if (report != nullptr) *report = ChromeReadReport{};
    ChromeReadDiagnostics diagnostics{sourceName, report};
    RawTrace trace;
    ChromeEventHandler events(diagnostics, trace);
    if (declined != nullptr) {
      RETURN_IF_ERROR(tokenizeChromeTraceFast(text, diagnostics, trace, events, declined));
      if (*declined) return Timeline();  // discarded
    } else {
      RETURN_IF_ERROR(tokenizeChromeTrace(text, diagnostics, trace, events));
    }
    return assembleTimeline(std::move(trace), options, diagnostics);
  };
  if (scanner == JsonScanner::kNlohmann) return parse(nullptr);
  bool declined = false;
  StatusOr<Timeline> fast = parse(&declined);
  if (!declined) return fast;
  if (scanner == JsonScanner::kFastOnly)
    return unimplemented(sourceName + ": fast scanner declined");
  return parse(nullptr);  // from scratch: what the fast scanner filled is discarded
}

}  // namespace chrome_detail

StatusOr<Timeline> readChromeTrace(const std::string& path, const ChromeReadOptions& options,
                                   ChromeReadReport* report) {
  // Inflated here when gzip; parseChromeTrace checks the text for gzip magic again, as it
  // does for any bytes it is given.
  if (options.maxGunzipBytes > 0) {
    // parseChromeTrace inflates with the caller's limit.
    ASSIGN_OR_RETURN(std::string bytes, io::readFileBytes(path));
    return parseChromeTrace(bytes, path, options, report);
  }
  ASSIGN_OR_RETURN(std::string text, io::readMaybeGzippedFile(path));
  return parseChromeTrace(text, path, options, report);
}

}  // namespace ddpscope::traces
