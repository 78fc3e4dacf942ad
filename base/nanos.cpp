#include "base/nanos.h"

#include <cmath>

namespace ddpscope {

Nanos Nanos::fromMicrosDouble(double us) {
  return Nanos(static_cast<int64_t>(std::llround(us * 1e3)));
}

Nanos Nanos::fromSecondsDouble(double s) {
  return Nanos(static_cast<int64_t>(std::llround(s * 1e9)));
}

}  // namespace ddpscope
