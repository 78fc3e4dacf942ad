// Helpers for runtime tests: run N ranks as N threads over loopback communicators, compare
// parameter sets, and bound DDP-versus-reference differences by a measured float32 noise floor.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "runtime/loopback_comm.h"
#include "runtime/training.h"

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

// Equivalence of DDP with the single-process reference, judged against a measured noise floor.
//
// DDP on N ranks computes the reference's sums in another order (per-rank GEMMs over B/N
// samples, the allreduce), and float32 addition is not associative. How far two such runs end
// apart depends on the BLAS kernels OpenBLAS picks for the CPU and on how training amplifies
// rounding: a ReLU or max-pool decision flipped by a 1e-7 difference moves a parameter by about
// the learning rate. A fixed bound is therefore tuned to one CPU (resnet18 at lr 5e-5 ends
// 1.2e-7 from the reference on one host and 4.3e-5 on an AMD EPYC). The bound here is measured
// on the machine that runs the test: the noise floor is the largest distance between reference
// runs that differ only in the order of the same samples within each batch (the concatenation
// orders of 1, 2 and 4 shards: the orders DDP's ranks induce), and the float32 resolution of
// the parameters (one unit in the last place of the largest parameter per iteration) bounds it
// from below. Measured on an AMD EPYC (runtime_mpi_test): DDP lands at 1.0x (resnet18, world 2),
// 1.0x (mlp-wide) and 1.2x (gpt2) its floor; a real error (plain BatchNorm instead of
// SyncBatchNorm, a missing 1/N, a wrong bucket mapping) moves parameters by ~lr per step,
// orders of magnitude above it.
inline constexpr double kNoiseFactor = 4.0;

struct NoiseFloor {
  double floor = 0;       // max |reference(order a) - reference(order b)| over the orders
  double resolution = 0;  // iterations x ulp(max |parameter|)
  // kNoiseFactor x max(floor, resolution): the largest difference an equivalent run may show.
  double tolerance() const { return kNoiseFactor * std::max(floor, resolution); }
};

// Trains the reference with each shard count in `shards` (each must divide the global batch)
// and measures the noise floor of `o` against the first.
inline NoiseFloor measureNoiseFloor(const TrainingOptions& o,
                                    std::initializer_list<int> shards = {1, 2, 4}) {
  NoiseFloor out;
  std::vector<std::vector<std::vector<float>>> runs;
  for (int s : shards) {
    if (o.globalBatch % s != 0) continue;
    auto r = trainReference(o, s);
    if (!r.isOk()) return {std::numeric_limits<double>::infinity(), 0};
    runs.push_back(std::move(r->params));
  }
  double largest = 0;
  for (const auto& p : runs.front()) {
    for (float v : p) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  }
  for (size_t i = 1; i < runs.size(); ++i)
    out.floor = std::max(out.floor, maxAbsDiff(runs[i], runs[0]));
  out.resolution = static_cast<double>(o.iterations) * largest *
                   static_cast<double>(std::numeric_limits<float>::epsilon());
  return out;
}

}  // namespace ddpscope::runtime::testing
