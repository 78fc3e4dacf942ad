#include "gui/model/trace_document.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/ddp_flags.h"
#include "base/strings.h"
#include "gui/model/time_scale.h"
#include "traces/args_json.h"

namespace ddpscope::gui {

using traces::Category;
using traces::Interval;
using traces::IntervalSet;
using traces::Lane;
using traces::LaneKind;
using traces::Span;

namespace {

// a − b for sorted disjoint interval lists.
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& x : a) {
    Nanos cursor = x.start;
    while (j < b.size() && b[j].end <= cursor) ++j;
    size_t k = j;
    while (k < b.size() && b[k].start < x.end) {
      if (b[k].start > cursor) out.push_back(Interval{cursor, b[k].start});
      cursor = maxNanos(cursor, b[k].end);
      if (b[k].end > x.end) break;
      ++k;
    }
    if (cursor < x.end) out.push_back(Interval{cursor, x.end});
  }
  return out;
}

int laneOrder(LaneKind kind) {
  switch (kind) {
    case LaneKind::kCompute:
      return 0;
    case LaneKind::kComm:
      return 1;
    case LaneKind::kHost:
      return 2;
  }
  return 3;
}

}  // namespace

std::shared_ptr<const TraceDocument> TraceDocument::build(traces::Timeline timeline,
                                                          std::string sourceName) {
  std::shared_ptr<TraceDocument> doc(new TraceDocument());
  doc->m_sourceName = std::move(sourceName);
  // Spans must be in (start asc, duration desc) order for the level split.
  bool sorted = true;
  for (const auto& rank : timeline.ranks()) {
    for (const Lane& lane : rank.lanes) {
      if (!std::is_sorted(lane.spans.begin(), lane.spans.end(), traces::spanPrecedes)) {
        sorted = false;
      }
    }
  }
  if (!sorted) timeline.sortSpans();
  doc->m_timeline = std::move(timeline);
  const traces::Timeline& tl = doc->m_timeline;

  bool haveTime = false;
  for (int r = 0; r < tl.rankCount(); ++r) {
    const traces::RankTrack& track = tl.rank(r);
    std::vector<int> order(track.lanes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return laneOrder(track.lanes[static_cast<size_t>(x)].kind) <
             laneOrder(track.lanes[static_cast<size_t>(y)].kind);
    });
    bool first = true;
    for (int laneIndex : order) {
      const Lane& lane = track.lanes[static_cast<size_t>(laneIndex)];
      if (lane.spans.empty()) continue;  // nothing to show
      LaneRow row;
      row.rankIndex = r;
      row.laneIndex = laneIndex;
      row.rankId = track.rank;
      row.kind = lane.kind;
      row.label = lane.name;
      row.firstOfRank = first;
      first = false;
      doc->m_rows.push_back(row);

      // Level split with a nesting stack of span ends.
      std::vector<LaneLevel> levels;
      std::vector<uint16_t> spanLevel(lane.spans.size(), 0);
      std::vector<Nanos> stack;
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        const Span& span = lane.spans[i];
        while (!stack.empty() && stack.back() <= span.start) stack.pop_back();
        // A span that overlaps without nesting still goes one level down; levels stay
        // disjoint because a level is reused only after all deeper entries were popped.
        size_t level = std::min<size_t>(stack.size(), 65535);
        if (levels.size() <= level) levels.resize(level + 1);
        levels[level].spans.push_back(static_cast<int32_t>(i));
        levels[level].startNs.push_back(span.start.count());
        levels[level].endNs.push_back(span.end().count());
        spanLevel[i] = static_cast<uint16_t>(level);
        stack.push_back(span.end());
        if (!haveTime || span.start < doc->m_start) doc->m_start = span.start;
        if (!haveTime || span.end() > doc->m_end) doc->m_end = span.end();
        haveTime = true;
      }
      if (levels.empty()) levels.resize(1);
      doc->m_spanCount += lane.spans.size();
      doc->m_levels.push_back(std::move(levels));
      doc->m_spanLevel.push_back(std::move(spanLevel));
    }

    // Exposed communication of this rank.
    std::vector<Interval> compute;
    std::vector<Interval> comm;
    for (const Lane& lane : track.lanes) {
      if (lane.kind == LaneKind::kHost) continue;
      for (const Span& span : lane.spans) {
        if (traces::isDeviceCompute(span)) compute.push_back({span.start, span.end()});
        if (traces::isCommunication(span.category)) comm.push_back({span.start, span.end()});
      }
    }
    doc->m_exposed.push_back(subtract(IntervalSet::unionOf(std::move(comm)).intervals(),
                                      IntervalSet::unionOf(std::move(compute)).intervals()));
    doc->m_iterations.push_back(tl.iterations(r));
  }
  if (!haveTime) doc->m_end = doc->m_start + Nanos(1000);
  doc->m_overlap = traces::computeOverlap(tl);
  doc->m_worldSize = std::max(1, tl.rankCount());
  if (auto ws = tl.metadata().getInt("world_size")) doc->m_worldSize = static_cast<int>(*ws);
  const nlohmann::json meta = traces::argsToJson(tl.metadata());
  if (ddp::containsDdpSettings(meta)) {
    StatusOr<ddp::DdpConfig> settings = ddp::readDdpSettingsJson(meta, doc->m_sourceName);
    if (settings.isOk()) {
      doc->m_ddpSettings = *settings;
    } else {
      doc->m_ddpSettingsError = settings.status().message();
    }
  }
  return doc;
}

const Lane& TraceDocument::lane(int row) const {
  const LaneRow& r = m_rows.at(static_cast<size_t>(row));
  return m_timeline.rank(r.rankIndex).lanes.at(static_cast<size_t>(r.laneIndex));
}

const Span& TraceDocument::span(SpanRef ref) const {
  return lane(ref.row).spans.at(static_cast<size_t>(ref.span));
}

int TraceDocument::spanLevel(SpanRef ref) const {
  return m_spanLevel.at(static_cast<size_t>(ref.row)).at(static_cast<size_t>(ref.span));
}

std::pair<size_t, size_t> TraceDocument::visibleRange(int row, int level, Nanos t0,
                                                      Nanos t1) const {
  const std::vector<int64_t>& starts = levels(row).at(static_cast<size_t>(level)).startNs;
  size_t first = firstEndingAfter(row, level, 0, t0);
  auto last = std::lower_bound(starts.begin() + static_cast<std::ptrdiff_t>(first), starts.end(),
                               t1.count());
  return {first, static_cast<size_t>(last - starts.begin())};
}

size_t TraceDocument::firstEndingAfter(int row, int level, size_t from, Nanos time) const {
  const std::vector<int64_t>& ends = levels(row).at(static_cast<size_t>(level)).endNs;
  const int64_t t = time.count();
  const size_t n = ends.size();
  size_t lo = std::min(from, n);
  // Gallop: find hi with ends[hi] > t (or n), then binary-search [lo, hi).
  size_t step = 1;
  size_t hi = lo;
  while (hi < n && ends[hi] <= t) {
    lo = hi + 1;
    hi = std::min(n, hi + step);
    step *= 2;
  }
  auto it = std::upper_bound(ends.begin() + static_cast<std::ptrdiff_t>(lo),
                             ends.begin() + static_cast<std::ptrdiff_t>(hi), t);
  return static_cast<size_t>(it - ends.begin());
}

std::optional<SpanRef> TraceDocument::spanAt(int row, int level, Nanos time) const {
  if (row < 0 || row >= rowCount() || level < 0 || level >= levelCount(row)) return std::nullopt;
  const std::vector<int32_t>& ids = levels(row)[static_cast<size_t>(level)].spans;
  size_t pos = firstEndingAfter(row, level, 0, time);
  if (pos >= ids.size()) return std::nullopt;
  const Span& s = lane(row).spans[static_cast<size_t>(ids[pos])];
  if (s.start > time) return std::nullopt;
  return SpanRef{row, ids[pos]};
}

std::optional<double> spanBusBandwidthGBps(const TraceDocument& document, SpanRef ref) {
  const Span& s = document.span(ref);
  if (!traces::isCommunication(s.category)) return std::nullopt;
  if (auto busbw = s.args.getDouble("busbw_gbps")) return *busbw;
  int64_t bytes = s.args.getInt(traces::kArgBytes).value_or(0);
  if (bytes == 0) {
    if (auto nelems = s.args.getInt("In msg nelems")) {
      std::string_view dtype = s.args.getString("dtype").value_or("Float");
      int64_t size = (dtype == "Half" || dtype == "BFloat16") ? 2 : dtype == "Double" ? 8 : 4;
      bytes = *nelems * size;
    }
  }
  if (bytes <= 0 || s.duration <= Nanos(0)) return std::nullopt;
  int n = static_cast<int>(s.args.getInt("Group size").value_or(document.worldSize()));
  double algbw = static_cast<double>(bytes) / static_cast<double>(s.duration.count());  // GB/s
  if (n <= 1) return algbw;
  return algbw * 2.0 * (n - 1) / n;
}

std::string spanDetailsText(const TraceDocument& document, SpanRef ref) {
  const Span& s = document.span(ref);
  const LaneRow& row = document.rows().at(static_cast<size_t>(ref.row));
  std::ostringstream out;
  out << s.name << "\n";
  out << "category: " << traces::categoryName(s.category) << "\n";
  out << "rank " << row.rankId << ", lane: " << row.label << " (" << traces::laneKindName(row.kind)
      << ")\n";
  out << "start: " << formatDuration(s.start) << "\n";
  out << "duration: " << formatDuration(s.duration) << "\n";
  if (auto bucket = s.args.getInt(traces::kArgBucket)) out << "bucket: " << *bucket << "\n";
  if (auto bytes = s.args.getInt(traces::kArgBytes)) {
    out << "bytes: " << formatBytes(*bytes) << " (" << formatThousands(*bytes) << ")\n";
  }
  if (auto busbw = spanBusBandwidthGBps(document, ref)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "busbw: %.1f GB/s\n", *busbw);
    out << buf;
  }
  for (const auto& [key, value] : s.args) {
    if (key == traces::kArgBucket || key == traces::kArgBytes || key == "busbw_gbps") continue;
    out << key << ": ";
    if (const auto* i = std::get_if<int64_t>(&value)) out << *i;
    if (const auto* d = std::get_if<double>(&value)) out << *d;
    if (const auto* str = std::get_if<std::string>(&value)) out << *str;
    out << "\n";
  }
  std::string text = out.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace ddpscope::gui
