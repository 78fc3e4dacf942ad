#include "gui/model/zoom_stack.h"

#include <algorithm>
#include <cmath>

namespace ddpscope::gui {

namespace {
constexpr size_t kMaxHistory = 256;
}

ZoomStack::ZoomStack(QObject* parent) : QObject(parent) {}

void ZoomStack::setFullRange(Nanos start, Nanos end) {
  if (end - start < kMinSpan) end = start + kMinSpan;
  m_full = Range{start, end};
  m_history.clear();
  m_inWheelGesture = false;
  m_current = m_full;
  emit rangeChanged();
}

void ZoomStack::updateFullRange(Nanos start, Nanos end) {
  if (m_history.empty()) {
    setFullRange(start, end);
    return;
  }
  if (end - start < kMinSpan) end = start + kMinSpan;
  m_full = Range{start, end};
  emit rangeChanged();
}

ZoomStack::Range ZoomStack::clamp(Range r) const {
  if (r.end - r.start < kMinSpan) {
    Nanos mid = r.start + (r.end - r.start) / 2;
    r.start = mid - kMinSpan / 2;
    r.end = r.start + kMinSpan;
  }
  Nanos fullSpan = m_full.end - m_full.start;
  Nanos lo = m_full.start - fullSpan;
  Nanos hi = m_full.end + fullSpan;
  Nanos span = minNanos(r.end - r.start, hi - lo);
  if (r.start < lo) r = Range{lo, lo + span};
  if (r.end > hi) r = Range{hi - span, hi};
  return r;
}

void ZoomStack::apply(Range range, bool pushHistory) {
  range = clamp(range);
  if (range == m_current) return;
  if (pushHistory) {
    m_history.push_back(m_current);
    if (m_history.size() > kMaxHistory) m_history.erase(m_history.begin());
  }
  m_current = range;
  emit rangeChanged();
}

void ZoomStack::zoomTo(Nanos start, Nanos end) {
  m_inWheelGesture = false;
  if (end < start) std::swap(start, end);
  apply(Range{start, end}, true);
}

void ZoomStack::zoomAround(Nanos anchor, double factor) {
  if (!(factor > 0)) return;
  double span = static_cast<double>((m_current.end - m_current.start).count());
  double left = static_cast<double>((anchor - m_current.start).count()) * factor;
  double newSpan = span * factor;
  Nanos start = anchor - Nanos(static_cast<int64_t>(std::llround(left)));
  Nanos end = start + Nanos(static_cast<int64_t>(std::llround(newSpan)));
  bool push =
      !m_inWheelGesture || !m_lastWheel.isValid() || m_lastWheel.elapsed() > kWheelGestureMs;
  m_inWheelGesture = true;
  m_lastWheel.start();
  apply(Range{start, end}, push);
}

void ZoomStack::panBy(Nanos delta) {
  m_inWheelGesture = false;
  apply(Range{m_current.start + delta, m_current.end + delta}, false);
}

bool ZoomStack::back() {
  m_inWheelGesture = false;
  if (m_history.empty()) return false;
  m_current = m_history.back();
  m_history.pop_back();
  emit rangeChanged();
  return true;
}

void ZoomStack::reset() {
  m_inWheelGesture = false;
  apply(m_full, true);
}

}  // namespace ddpscope::gui
