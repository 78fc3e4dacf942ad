// Nanos: the one time type of ddpscope. A strong int64 count of nanoseconds.
//
// Every clock, duration and timestamp in memory is a Nanos. Conversion to
// Chrome's microseconds happens only in traces/'s reader and writer; doubles
// appear only at presentation boundaries (toMicros()/toMillis()).
#pragma once

#include <compare>
#include <cstdint>
#include <type_traits>

namespace ddpscope {

class Nanos {
 public:
  constexpr Nanos() = default;
  constexpr explicit Nanos(int64_t ns) : m_ns(ns) {}

  static constexpr Nanos fromMicros(int64_t us) { return Nanos(us * 1000); }
  static constexpr Nanos fromMillis(int64_t ms) { return Nanos(ms * 1000 * 1000); }
  static constexpr Nanos fromSeconds(int64_t s) { return Nanos(s * 1000 * 1000 * 1000); }
  // Rounds to the nearest nanosecond (half away from zero).
  static Nanos fromMicrosDouble(double us);
  static Nanos fromSecondsDouble(double s);
  static constexpr Nanos zero() { return Nanos(0); }
  static constexpr Nanos max() { return Nanos(INT64_MAX); }

  constexpr int64_t count() const { return m_ns; }
  constexpr double toMicros() const { return static_cast<double>(m_ns) / 1e3; }
  constexpr double toMillis() const { return static_cast<double>(m_ns) / 1e6; }
  constexpr double toSeconds() const { return static_cast<double>(m_ns) / 1e9; }

  constexpr auto operator<=>(const Nanos&) const = default;
  constexpr Nanos operator+(Nanos o) const { return Nanos(m_ns + o.m_ns); }
  constexpr Nanos operator-(Nanos o) const { return Nanos(m_ns - o.m_ns); }
  constexpr Nanos operator-() const { return Nanos(-m_ns); }
  constexpr Nanos operator*(int64_t k) const { return Nanos(m_ns * k); }
  constexpr Nanos operator/(int64_t k) const { return Nanos(m_ns / k); }
  // A fraction would silently become a whole factor (x * 1.8 == x * 1, x / 0.5 divides by zero):
  // scale in seconds instead, Nanos::fromSecondsDouble(x.toSeconds() * f).
  template <typename F>
  requires std::is_floating_point_v<F> Nanos operator*(F) const = delete;
  template <typename F>
  requires std::is_floating_point_v<F> Nanos operator/(F) const = delete;
  constexpr Nanos& operator+=(Nanos o) {
    m_ns += o.m_ns;
    return *this;
  }
  constexpr Nanos& operator-=(Nanos o) {
    m_ns -= o.m_ns;
    return *this;
  }

 private:
  int64_t m_ns = 0;
};

// The host's monotonic clock (std::chrono::steady_clock) as Nanos since its epoch: the one
// conversion from a steady clock to Nanos (profilers, watchdogs, progress, timing).
Nanos steadyNow();

constexpr Nanos minNanos(Nanos a, Nanos b) {
  return a < b ? a : b;
}
constexpr Nanos maxNanos(Nanos a, Nanos b) {
  return a < b ? b : a;
}

}  // namespace ddpscope
