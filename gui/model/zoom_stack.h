// ZoomStack: the visible time window shared by a time axis and every timeline that shows it
// (both runs of a comparison use one ZoomStack, so they zoom and pan together).
//
// The window [start, end) is in display time (Nanos). History: zoomTo(), fit and reset push
// the previous window; back() restores it. A run of wheel zooms (zoomAround) pushes once, at
// its first step, so that back() undoes the whole gesture; panning never pushes. The window is
// clamped to at least kMinSpan and never leaves [full.start − full span, full.end + full span].
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <vector>

#include "base/nanos.h"

namespace ddpscope::gui {

class ZoomStack : public QObject {
  Q_OBJECT
 public:
  static constexpr Nanos kMinSpan = Nanos(100);  // 100 ns across the view at most zoom
  static constexpr int kWheelGestureMs = 800;

  explicit ZoomStack(QObject* parent = nullptr);

  struct Range {
    Nanos start;
    Nanos end;
    bool operator==(const Range&) const = default;
  };

  Range range() const { return m_current; }
  Range fullRange() const { return m_full; }
  bool canGoBack() const { return !m_history.empty(); }
  int historyDepth() const { return static_cast<int>(m_history.size()); }

  // Sets the whole extent and shows it; clears the history.
  void setFullRange(Nanos start, Nanos end);
  // Changes the extent but keeps the current window when the user has zoomed (history is not
  // empty); otherwise shows the new extent. For live updates (what-if re-simulation).
  void updateFullRange(Nanos start, Nanos end);
  // Shows [start, end), pushing the current window.
  void zoomTo(Nanos start, Nanos end);
  // Scales the window by `factor` (< 1 zooms in) keeping `anchor` at the same pixel.
  void zoomAround(Nanos anchor, double factor);
  // Shifts the window by `delta` (no history).
  void panBy(Nanos delta);
  // Restores the previous window; false when there is none.
  bool back();
  // Shows the full range (pushing the current window).
  void reset();

 signals:
  void rangeChanged();

 private:
  void apply(Range range, bool pushHistory);
  Range clamp(Range range) const;

  Range m_full{Nanos(0), Nanos(1000)};
  Range m_current{Nanos(0), Nanos(1000)};
  std::vector<Range> m_history;
  bool m_inWheelGesture = false;
  QElapsedTimer m_lastWheel;  // a pause longer than kWheelGestureMs starts a new gesture
};

}  // namespace ddpscope::gui
