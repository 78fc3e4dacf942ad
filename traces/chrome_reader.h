// Tolerant Chrome Trace Event JSON reader → Timeline.
//
// Accepts a bare event array or {"traceEvents": [...], "otherData": {...}, ...}; gzip input
// is detected by its magic bytes (needs zlib). The file is parsed by SAX callbacks: no DOM of
// the whole file is built, each event is decoded as it streams by. A fast scanner of our own
// drives them; on JSON it leaves to nlohmann (invalid JSON included) nlohmann's SAX parser
// parses the text again, so results and error messages are nlohmann's (chrome_tokenizer.h).
//
// Phases: X; B/E (matched per pid/tid stack); i/I (zero-length spans; scope g/p go to an
// "instants" lane of the process); C (one counter per numeric series); M (process_name,
// process_labels, process_sort_index, thread_name, thread_sort_index); flows s/t/f (matched
// on id + cat + name) and v2 flows (bind_id + flow_out / flow_in on slices). Other phases
// are counted as ignored.
//
// Fields: ts/dur are µs as integers, floats or numeric strings, converted to Nanos rounded
// to the nearest ns from the decimal text (no double round-trip unless an exponent is
// used); pid/tid are integers or strings; a missing pid/tid is 0. Missing or mistyped fields
// are errors only when they make the event unusable; the message names the file, the event
// and the field: `trace.json: traceEvents[17].dur: expected a number, got "abc"`. Invalid
// JSON: `trace.json: invalid JSON at byte N: parse error at line L, column C: ...`, N being
// the number of bytes the parser had read when it stopped.
//
// Ranks: a trace with distributedInfo (PyTorch profiler / Kineto, one file per rank) or a
// schemaVersion key, or read with options.rank, is one rank (distributedInfo.rank,
// options.rank, else 0) whose lanes are all (pid, tid) pairs. Otherwise pid = rank id.
//
// Lanes and categories: our own traces carry "lane_kind" in thread_name metadata and our
// category names in "cat", and round-trip exactly. For foreign traces a lane is a GPU lane
// when its thread is named "stream N" or it holds kernel / gpu_memcpy / gpu_memset /
// gpu_user_annotation / cuda_sync events; GPU events are classified with HTA's name rules
// (traces/classify.h) and the lane is kComm when it holds communication but no
// computation, else kCompute. Other lanes are kHost and their events are classified by name
// (ProfilerStep#N → kIteration). A foreign "cat" is kept as the arg "cat".
//
// Args: nested arrays/objects are kept as compact JSON text (a string arg); booleans become
// int 0/1; nulls are dropped. Spans are stable-sorted per lane (Timeline::sortSpans).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "traces/timeline.h"

namespace ddpscope::traces {

struct ChromeReadOptions {
  // Read as one rank with this id (overrides distributedInfo.rank).
  std::optional<int> rank;
  // > 0: the most bytes a gzip input may inflate to, instead of io::maxGunzipBytes() (the GUI
  // passes its own largest trace, DDPSCOPE_GUI_MAX_TRACE_MB, so one variable raises both).
  int64_t maxGunzipBytes = 0;
};

// What the reader skipped or guessed; optional output.
struct ChromeReadReport {
  int64_t eventCount = 0;             // entries of the event array
  int64_t ignoredEvents = 0;          // unknown phases, unmatched E / f, unclosed B, odd M
  bool singleRankTrace = false;       // read as one Kineto-style rank
  std::vector<std::string> warnings;  // the first kMaxWarnings, one line each
  static constexpr size_t kMaxWarnings = 100;
};

// Reads a trace file (plain or gzip). Errors name `path`.
StatusOr<Timeline> readChromeTrace(const std::string& path, const ChromeReadOptions& options = {},
                                   ChromeReadReport* report = nullptr);
// Parses trace bytes (plain or gzip) already in memory; errors name `sourceName`.
StatusOr<Timeline> parseChromeTrace(std::string_view bytes, const std::string& sourceName,
                                    const ChromeReadOptions& options = {},
                                    ChromeReadReport* report = nullptr);

// Decompresses gzip bytes (one or more members). Errors name `sourceName`; without zlib it
// returns an Unimplemented error.
StatusOr<std::string> gunzipBytes(std::string_view bytes, const std::string& sourceName);
bool looksGzipped(std::string_view bytes);

// Exact conversion of a decimal µs text ("1234.5678", "-3", "12e3") to Nanos, rounded to
// the nearest ns (half away from zero). nullopt when the text is not a number or overflows.
std::optional<Nanos> parseMicrosText(std::string_view text);

}  // namespace ddpscope::traces
