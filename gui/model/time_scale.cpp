#include "gui/model/time_scale.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ddpscope::gui {

Nanos TimeScale::toTime(double pixel) const {
  return start + durationOf(pixel - x0);
}

Nanos TimeScale::durationOf(double pixels) const {
  return Nanos(static_cast<int64_t>(std::llround(pixels * nsPerPixel())));
}

Nanos niceTickStep(Nanos span, double widthPx, double minSpacingPx) {
  if (span <= Nanos(0) || widthPx <= 0) return Nanos(1);
  double minStepNs = static_cast<double>(span.count()) * minSpacingPx / widthPx;
  int64_t step = 1;
  while (true) {
    for (int64_t mult : {1, 2, 5}) {
      if (static_cast<double>(step * mult) >= minStepNs) return Nanos(step * mult);
    }
    if (step > INT64_MAX / 100) return Nanos(step);
    step *= 10;
  }
}

std::vector<TimeTick> computeTicks(const TimeScale& scale, double minSpacingPx, Nanos origin) {
  std::vector<TimeTick> ticks;
  Nanos step = niceTickStep(scale.span(), scale.widthPx, minSpacingPx);
  // First multiple of `step` (relative to origin) at or after scale.start.
  int64_t rel = (scale.start - origin).count();
  int64_t k = rel / step.count();
  if (k * step.count() < rel) ++k;
  for (int guard = 0; guard < 10000; ++guard, ++k) {
    Nanos t = origin + step * k;
    if (t > scale.end) break;
    ticks.push_back(TimeTick{t, scale.toPixel(t), formatTickLabel(t - origin, step)});
  }
  return ticks;
}

namespace {

struct Unit {
  const char* name;
  double ns;
};

Unit unitFor(int64_t absNs) {
  if (absNs >= 1'000'000'000) return {"s", 1e9};
  if (absNs >= 1'000'000) return {"ms", 1e6};
  if (absNs >= 1'000) return {"µs", 1e3};
  return {"ns", 1};
}

}  // namespace

std::string formatDuration(Nanos duration) {
  int64_t ns = duration.count();
  Unit unit = unitFor(std::llabs(ns));
  double value = static_cast<double>(ns) / unit.ns;
  double magnitude = std::fabs(value);
  int decimals = unit.ns == 1 ? 0 : magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, value, unit.name);
  return buf;
}

std::string formatTickLabel(Nanos time, Nanos step) {
  // The unit follows the step (0.5 ms steps are labelled in ms, 500 ns steps in µs); decimals
  // are enough to show the step's digits.
  Unit unit = unitFor(step.count() * 10);
  double stepInUnit = static_cast<double>(step.count()) / unit.ns;
  int decimals = 0;
  while (decimals < 6 && std::fabs(stepInUnit * std::pow(10.0, decimals) -
                                   std::round(stepInUnit * std::pow(10.0, decimals))) > 1e-6) {
    ++decimals;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, static_cast<double>(time.count()) / unit.ns,
                unit.name);
  return buf;
}

}  // namespace ddpscope::gui
