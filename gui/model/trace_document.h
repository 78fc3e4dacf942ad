// TraceDocument: an immutable, display-ready trace: the parsed Timeline plus what the views
// need to paint it in time bounded by pixels, and its overlap metrics. Built once on a worker
// thread, then shared read-only (std::shared_ptr<const TraceDocument>) with the UI thread.
//
// Rows: one row per non-empty lane, grouped by rank (the timeline's order), compute and comm
// lanes first within a rank, then host lanes. Per lane, spans are split into nesting levels: a
// span's depth is the number of spans on the stack enclosing its start (spans sorted by start,
// longer first). Spans of one level are disjoint and sorted, so both their starts and their ends
// increase: the spans visible in [t0, t1) are found by two binary searches, and a painter can
// skip everything narrower than a pixel by jumping to the first span ending after the next
// pixel (O(pixels · log n) per level, whatever the number of spans).
//
// Exposed communication per rank = ∪comm − ∪compute over its device lanes (the complement of
// the overlap in traces/overlap.h), precomputed as sorted disjoint intervals.
//
// Build cost: O(n log n) (the overlap unions); memory: about 12 bytes per span on top of the
// Timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/ddp_flags.h"
#include "base/nanos.h"
#include "traces/overlap.h"
#include "traces/timeline.h"

namespace ddpscope::gui {

// A span of the document: its row and its index in that lane's span vector.
struct SpanRef {
  int row = -1;
  int32_t span = -1;
  bool valid() const { return row >= 0 && span >= 0; }
  bool operator==(const SpanRef&) const = default;
};

struct LaneRow {
  int rankIndex = 0;
  int laneIndex = 0;
  int rankId = 0;
  traces::LaneKind kind = traces::LaneKind::kHost;
  std::string label;  // the lane's name
  bool firstOfRank = false;
};

// Spans of one nesting level of a lane, as indices into Lane::spans, sorted by start (and end).
// startNs/endNs repeat each span's start and end next to each other: the painter's searches
// (visibleRange, firstEndingAfter: one per fold mark) read these contiguous arrays instead of
// the Span objects (16 bytes per span).
struct LaneLevel {
  std::vector<int32_t> spans;
  std::vector<int64_t> startNs;
  std::vector<int64_t> endNs;
};

class TraceDocument {
 public:
  // Takes the timeline (sorted spans expected; sorts if not).
  static std::shared_ptr<const TraceDocument> build(traces::Timeline timeline,
                                                    std::string sourceName);

  const traces::Timeline& timeline() const { return m_timeline; }
  const std::string& sourceName() const { return m_sourceName; }
  const std::vector<LaneRow>& rows() const { return m_rows; }
  int rowCount() const { return static_cast<int>(m_rows.size()); }
  const traces::Lane& lane(int row) const;
  const traces::Span& span(SpanRef ref) const;
  const std::vector<LaneLevel>& levels(int row) const { return m_levels[static_cast<size_t>(row)]; }
  int levelCount(int row) const { return static_cast<int>(levels(row).size()); }
  // Level of each span of the lane (same indexing as Lane::spans).
  int spanLevel(SpanRef ref) const;

  // [first, last) positions in levels(row)[level].spans of the spans intersecting [t0, t1).
  std::pair<size_t, size_t> visibleRange(int row, int level, Nanos t0, Nanos t1) const;
  // First position ≥ from in levels(row)[level].spans whose span ends after `time`. Galloping
  // search from `from`: O(log d) for an answer d positions on (the painter's next fold).
  size_t firstEndingAfter(int row, int level, size_t from, Nanos time) const;
  // The topmost-level span containing `time` on a row's level, if any.
  std::optional<SpanRef> spanAt(int row, int level, Nanos time) const;

  Nanos startTime() const { return m_start; }
  Nanos endTime() const { return m_end; }
  size_t spanCount() const { return m_spanCount; }
  int laneCount() const { return rowCount(); }

  const std::vector<traces::RankOverlap>& overlap() const { return m_overlap; }
  // Exposed communication intervals of rank index `rankIndex` (sorted, disjoint).
  const std::vector<traces::Interval>& exposedComm(int rankIndex) const {
    return m_exposed[static_cast<size_t>(rankIndex)];
  }
  // Iteration windows per rank index (sorted by start).
  const std::vector<traces::Iteration>& iterations(int rankIndex) const {
    return m_iterations[static_cast<size_t>(rankIndex)];
  }
  // World size for busbw: metadata "world_size", else the rank count.
  int worldSize() const { return m_worldSize; }
  // The run's DDP settings from the trace metadata (ddp/ddp_settings.h's reader, as replay reads
  // them); nullopt when the trace records none. A trace whose settings do not read keeps
  // opening: ddpSettingsError() says why they are missing.
  const std::optional<ddp::DdpConfig>& ddpSettings() const { return m_ddpSettings; }
  const std::string& ddpSettingsError() const { return m_ddpSettingsError; }

 private:
  TraceDocument() = default;

  traces::Timeline m_timeline;
  std::string m_sourceName;
  std::vector<LaneRow> m_rows;
  std::vector<std::vector<LaneLevel>> m_levels;    // [row][level]
  std::vector<std::vector<uint16_t>> m_spanLevel;  // [row][span]
  std::vector<traces::RankOverlap> m_overlap;
  std::vector<std::vector<traces::Interval>> m_exposed;
  std::vector<std::vector<traces::Iteration>> m_iterations;
  Nanos m_start;
  Nanos m_end;
  size_t m_spanCount = 0;
  int m_worldSize = 1;
  std::optional<ddp::DdpConfig> m_ddpSettings;
  std::string m_ddpSettingsError;
};

using TraceDocumentPtr = std::shared_ptr<const TraceDocument>;

// Text for tooltips and the details panel (plain text, one "key: value" per line): name,
// category, lane, rank, start, duration, bucket id, bytes, busbw (the span's "busbw_gbps" arg,
// else bytes / duration × 2(n−1)/n with n the world size), then the remaining args.
std::string spanDetailsText(const TraceDocument& document, SpanRef ref);
// The span's bus bandwidth in GB/s, when it is a collective with known bytes.
std::optional<double> spanBusBandwidthGBps(const TraceDocument& document, SpanRef ref);

}  // namespace ddpscope::gui
