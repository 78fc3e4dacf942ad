// Not public API: internal to the Chrome reader (traces/chrome_reader.cpp and its parts).
//
// The tokenizer of the Chrome reader: nlohmann's SAX parser runs over the whole text, one
// callback per JSON token; no DOM of the file is built.
//
// Algorithm: a stack of contexts (top level, event array, event, args, metadata,
// distributedInfo) says what each token means. Top-level keys go to RawTrace: traceName,
// otherData / metadata (as metadata), distributedInfo (rank; world_size and backend as
// metadata), schemaVersion, other scalars as metadata; "displayTimeUnit" is display only.
// The fields of each event object fill one reused RawEvent, handed to the phase handlers
// (ChromeEventHandler::handle) when the object closes. Nested arg and metadata values are
// captured as compact JSON text (a string arg); other nested values are skipped by depth
// counting. Time O(text bytes); memory O(one event) beyond what the handlers keep.
//
// Errors name the source and the event: invalid JSON ("<source>: invalid JSON at byte N:
// parse error at line L, column C: ..."), a root that is neither an array nor an object,
// "traceEvents" that is not an array, an array entry that is not an object, and the first
// error a phase handler returns (parsing stops there).
//
// Two scanners feed the same SAX callbacks. nlohmann's lexer copies every character through
// std::string::push_back and was 60 % of opening a 1M-event trace, so the reader first runs
// a fast scanner (pointer loop, bulk copies of unescaped string runs, one reused buffer per
// token). It accepts exactly the JSON that nlohmann accepts, with the same callback values,
// for the part of JSON that traces use: objects, arrays, strings with any escape and valid
// UTF-8, numbers that nlohmann reads as int64 / uint64 / finite double, true / false / null,
// no byte-order mark. On anything else (invalid JSON included) it declines, and the text is
// parsed again from scratch by nlohmann's SAX parser, whose results and error messages
// (byte, line, column) are the reference. tests/traces/chrome_scanner_test.cpp checks both
// give equal timelines, reports and errors on the real traces in tests/data and on mutated
// ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "traces/chrome_raw_trace.h"

namespace ddpscope::traces::chrome_detail {

class ChromeEventHandler;

// Which JSON scanner parses the text.
enum class JsonScanner : uint8_t {
  kAuto,      // the fast scanner; nlohmann's SAX parser from scratch when it declines
  kFastOnly,  // the fast scanner; Unimplemented ("fast scanner declined") when it declines
  kNlohmann,  // nlohmann's SAX parser only
};

// Parses `text` (plain JSON) with nlohmann's SAX parser, filling the top-level facts of
// `trace` and handing each event to `events`. `diagnostics.bareArray` is set when the root
// is an array.
Status tokenizeChromeTrace(std::string_view text, ChromeReadDiagnostics& diagnostics,
                           RawTrace& trace, ChromeEventHandler& events);

// The same with the fast scanner. Sets `*declined` (and returns OK) when the text holds JSON
// the fast scanner leaves to nlohmann: `trace`, `events` and `diagnostics` are then partly
// filled and must be discarded.
Status tokenizeChromeTraceFast(std::string_view text, ChromeReadDiagnostics& diagnostics,
                               RawTrace& trace, ChromeEventHandler& events, bool* declined);

// parseChromeTrace on plain (not gzip) text with the scanner chosen (chrome_reader.cpp).
StatusOr<Timeline> parsePlainChromeTrace(std::string_view text, const std::string& sourceName,
                                         const ChromeReadOptions& options, ChromeReadReport* report,
                                         JsonScanner scanner);

}  // namespace ddpscope::traces::chrome_detail
