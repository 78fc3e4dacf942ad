// Shared helpers for the sim_cost tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/cost/nccl_model.h"

namespace ddpscope::sim::testing {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;
inline constexpr int64_t kGiB = 1024 * kMiB;

// The bars against published nccl-tests figures: saturated busbw within 10 %, latency-bound
// times within 2x.
inline constexpr double kBusbwTolerance = 0.10;
inline constexpr double kLatencyFactor = 2.0;

inline ClusterSpec builtin(std::string_view name) {
  auto cluster = loadBuiltinCluster(name);
  EXPECT_TRUE(cluster.isOk()) << cluster.status().toString();
  return cluster.isOk() ? *cluster : ClusterSpec{};
}

// The assumptions of the worked examples of docs/spec/nccl-cost-model.md §1.10: the tuner alone
// (no launch overhead), Intel CPUs (net overhead 1 µs, llMaxBw row 0 across nodes).
inline ClusterSpec tunerExact(ClusterSpec cluster) {
  cluster.nccl.launchOverheadUs = 0;
  cluster.measuredLatency = MeasuredLatency{};
  cluster.cpuVendor = "intel";
  return cluster;
}

inline std::unique_ptr<NcclCommModel> ncclModel(const ClusterSpec& cluster, int nodes,
                                                int gpusPerNode = 8) {
  auto model = NcclCommModel::create(cluster, WorldLayout{nodes, gpusPerNode});
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? std::move(model).value() : nullptr;
}

inline std::unique_ptr<CommModel> commModel(const ClusterSpec& cluster, int nodes,
                                            int gpusPerNode) {
  auto model = makeCommModel(cluster, WorldLayout{nodes, gpusPerNode});
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? std::move(model).value() : nullptr;
}

inline CollectiveCandidate candidate(const CommModel& model, std::string_view algorithm,
                                     std::string_view protocol, int64_t bytes = 1,
                                     Collective collective = Collective::kAllreduce) {
  for (const CollectiveCandidate& c : model.candidates(collective, bytes)) {
    if (c.algorithm == algorithm && c.protocol == protocol) return c;
  }
  ADD_FAILURE() << "no candidate " << algorithm << "/" << protocol;
  return {};
}

// |actual − expected| within `relative` of expected, or within half a unit of the last digit the
// spec printed (`decimals`), whichever is looser.
inline ::testing::AssertionResult nearSpec(double actual, double expected, int decimals,
                                           double relative = 0.02) {
  double tol = std::max(relative * std::abs(expected), 0.5 * std::pow(10.0, -decimals));
  if (std::abs(actual - expected) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " is not within " << tol << " of " << expected;
}

inline ::testing::AssertionResult withinFactor(double actual, double expected, double factor) {
  if (actual >= expected / factor && actual <= expected * factor) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << actual << " is not within " << factor << "x of " << expected;
}

inline ::testing::AssertionResult withinRelative(double actual, double expected, double relative) {
  if (std::abs(actual - expected) <= relative * std::abs(expected)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << actual << " is not within " << relative * 100 << " % of " << expected << " (off by "
         << (actual / expected - 1) * 100 << " %)";
}

}  // namespace ddpscope::sim::testing
