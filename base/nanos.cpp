#include "base/nanos.h"

#include <chrono>
#include <cmath>

namespace ddpscope {

Nanos Nanos::fromMicrosDouble(double us) {
  return Nanos(static_cast<int64_t>(std::llround(us * 1e3)));
}

Nanos Nanos::fromSecondsDouble(double s) {
  return Nanos(static_cast<int64_t>(std::llround(s * 1e9)));
}

Nanos steadyNow() {
  return Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count());
}

}  // namespace ddpscope
