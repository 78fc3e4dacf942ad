// Deterministic, platform-independent random numbers for parameter init and synthetic data.
//
// SplitMix64 (Steele, Lea, Flood 2014) keyed by (seed, stream, index) so that any sample or
// parameter can be generated on its own, on any rank, in any order. Normal variates use the
// Box-Muller transform in double precision (std::normal_distribution is implementation-defined,
// so two standard libraries would give two different models).
#pragma once

#include <cmath>
#include <cstdint>

namespace ddpscope::runtime {

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Mixes several keys into one stream seed.
inline uint64_t mixKeys(uint64_t a, uint64_t b, uint64_t c = 0) {
  return splitMix64(splitMix64(splitMix64(a) ^ b) ^ c);
}

// A SplitMix64 stream: cheap, stateless apart from a counter, good enough for init and data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : m_state(seed) {}

  uint64_t next() {
    m_state += 0x9E3779B97F4A7C15ull;
    uint64_t z = m_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) (n > 0; the modulo bias is negligible for n << 2^64).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  // Standard normal (Box-Muller, one value per call; the pair's second value is discarded).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t m_state;
};

}  // namespace ddpscope::runtime
