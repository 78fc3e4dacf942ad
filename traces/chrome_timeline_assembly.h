// Not public API: internal to the Chrome reader (traces/chrome_reader.cpp and its parts).
//
// The last step of the Chrome reader: RawTrace (pid / tid keyed, file order) → Timeline.
//
// Algorithm, in this order:
//   ranks       one rank when the trace is Kineto-style (distributedInfo or schemaVersion) or
//               options.rank is set: options.rank, else distributedInfo.rank, else 0. Otherwise
//               rank = pid; pids that do not fit an int (strings, huge) get the next free ids
//               above the largest pid. A process named "rank N" for its own rank N stays
//               unnamed (our writer's default).
//   lanes       per process in order of first appearance, then per lane in order of first
//               appearance; named by thread_name (else "thread <tid>"), prefixed with the
//               process (labels, name or "pid N") when one rank holds several processes.
//   categories  a lane is a GPU lane when it held GPU-category events or its thread is named
//               "stream N"; its unresolved spans are classified by HTA's kernel rules
//               (classify.h), a host lane's by the host-event rules.
//   lane kind   the declared "lane_kind" (our traces), else GPU lanes are kComm when they
//               hold communication but no computation, kCompute otherwise; other lanes kHost.
//   order       spans are stable-sorted per lane (Timeline::sortSpans); flows and counters
//               keep file order and point at the final (rank, lane).
// Unclosed B events and unfinished flows become warnings. Time O(n log n) for the sort,
// O(n) otherwise; the spans are moved, not copied.
#pragma once

#include "base/status.h"
#include "traces/chrome_raw_trace.h"
#include "traces/chrome_reader.h"
#include "traces/timeline.h"

namespace ddpscope::traces::chrome_detail {

// Consumes `trace`. Error: no event array was seen (InvalidArgument naming the source).
StatusOr<Timeline> assembleTimeline(RawTrace&& trace, const ChromeReadOptions& options,
                                    ChromeReadDiagnostics& diagnostics);

}  // namespace ddpscope::traces::chrome_detail
