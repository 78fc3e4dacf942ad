// median(): the one median of ddpscope (step times, per-layer times, fitted residuals).
//
// The middle value of an odd count; for an even count the mean of the two middle values (for
// Nanos the sum of their counts halved toward zero, an exact integer). An empty input gives
// T{} (0). O(n): std::nth_element on the copy it takes by value.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "base/nanos.h"

namespace ddpscope {

template <typename T>
T median(std::vector<T> values) {
  static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, Nanos>);
  if (values.empty()) return T{};
  const auto mid = static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const T upper = values[static_cast<size_t>(mid)];
  if (values.size() % 2 == 1) return upper;
  const T lower = *std::max_element(values.begin(), values.begin() + mid);
  if constexpr (std::is_same_v<T, Nanos>) {
    return Nanos((lower.count() + upper.count()) / 2);
  } else {
    return (lower + upper) / 2;
  }
}

}  // namespace ddpscope
