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
#pragma once

#include <string_view>

#include "base/status.h"
#include "traces/chrome_raw_trace.h"

namespace ddpscope::traces::chrome_detail {

class ChromeEventHandler;

// Parses `text` (plain JSON), filling the top-level facts of `trace` and handing each event
// to `events`. `diagnostics.bareArray` is set when the root is an array.
Status tokenizeChromeTrace(std::string_view text, ChromeReadDiagnostics& diagnostics,
                           RawTrace& trace, ChromeEventHandler& events);

}  // namespace ddpscope::traces::chrome_detail
