// Helpers for runtime tests: run N ranks as N threads over loopback communicators, and compare
// parameter sets.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "runtime/loopback_comm.h"

namespace ddpscope::runtime::testing {

// Runs fn(rank, comm) on `world` threads and joins them.
inline void runRanks(int world, const std::function<void(int, Communicator&)>& fn) {
  auto group = makeLoopbackGroup(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { fn(r, *group[static_cast<size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
}

inline double maxAbsDiff(const std::vector<std::vector<float>>& a,
                         const std::vector<std::vector<float>>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].size() != b[i].size()) return INFINITY;
    for (size_t k = 0; k < a[i].size(); ++k) {
      worst = std::max(worst, std::fabs(static_cast<double>(a[i][k]) - b[i][k]));
    }
  }
  return worst;
}

}  // namespace ddpscope::runtime::testing
