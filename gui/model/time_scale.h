// TimeScale: the time ↔ pixel mapping of a timeline view, a plain value type with no Qt and no
// display, unit-tested on its own.
//
// The visible window [start, end) (Nanos, in display time: a view may shift its trace by an
// offset so that two runs line up) maps linearly onto the pixel range [x0, x0 + widthPx).
// toPixel(toTime(x)) == x up to rounding to whole nanoseconds (|error| ≤ 0.5 ns in pixels);
// toTime(toPixel(t)) == t whenever one pixel is at least one nanosecond wide.
//
// computeTicks() picks a "nice" tick step (1, 2, 5 × 10^k ns) so that ticks are at least
// minSpacingPx apart, and labels each tick in the unit that suits the step (ns, µs, ms, s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/nanos.h"

namespace ddpscope::gui {

struct TimeScale {
  Nanos start;
  Nanos end;           // > start
  double x0 = 0;       // pixel of `start`
  double widthPx = 1;  // pixels between start and end (> 0)

  Nanos span() const { return end - start; }
  double nsPerPixel() const { return static_cast<double>(span().count()) / widthPx; }
  double pixelsPerNs() const { return widthPx / static_cast<double>(span().count()); }
  double toPixel(Nanos time) const {
    return x0 + static_cast<double>((time - start).count()) * pixelsPerNs();
  }
  // Rounded to the nearest nanosecond.
  Nanos toTime(double pixel) const;
  // A duration of `pixels` pixels, rounded to the nearest nanosecond.
  Nanos durationOf(double pixels) const;
};

struct TimeTick {
  Nanos time;
  double x = 0;
  std::string label;  // "12.5 ms"
};

// Ticks inside [scale.start, scale.end], at multiples of a nice step; the step's size in
// pixels is ≥ minSpacingPx. Labels show time relative to `origin` (the view's zero).
std::vector<TimeTick> computeTicks(const TimeScale& scale, double minSpacingPx,
                                   Nanos origin = Nanos(0));
// The tick step computeTicks chooses.
Nanos niceTickStep(Nanos span, double widthPx, double minSpacingPx);

// Human-readable duration with 3 significant digits and a unit: "850 ns", "12.5 µs",
// "1.25 ms", "2.31 s"; negative values keep their sign.
std::string formatDuration(Nanos duration);
// A time label for a tick of the given step: enough decimals to tell ticks apart.
std::string formatTickLabel(Nanos time, Nanos step);

}  // namespace ddpscope::gui
