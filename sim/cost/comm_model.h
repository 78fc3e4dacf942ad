// CommModel: how long one collective of a given size takes on a WorldLayout of a cluster.
//
// NcclCommModel reproduces NCCL's tuner (src/graph/tuning.cc, docs/spec/nccl-cost-model.md §1):
// per (algorithm, protocol) a latency and an algorithm bandwidth, time = lat + bytes/algBw,
// the size-dependent corrections, and the argmin choice NCCL makes. AlphaBetaCommModel is a
// ring α–β model for CPU/MPI profiles. Both are pure functions of (collective, bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "sim/cost/cluster.h"

namespace ddpscope::sim {

enum class Collective { kAllreduce, kBroadcast, kAllgather, kReduceScatter };
std::string_view collectiveName(Collective c);

struct CollectiveEstimate {
  Nanos time;
  std::string algorithm;  // "ring", "tree", "nvls", "nvls_tree", "alpha_beta", "local"
                          // ("local": world size 1; "none": 0 bytes — both take no time)
  std::string protocol;   // "LL", "LL128", "Simple", "" for α–β
  int ctas = 0;           // CTAs (SMs) NCCL launches for this call (contention model input)
  double algbwGBps = 0;   // bytes / time
  double busbwGBps = 0;   // algbw × nccl-tests factor (2(n−1)/n for allreduce)
  // Where the latency part comes from: "tuner" (NCCL's tuner constants + launch overhead),
  // "measured" (the cluster's measured_latency fit), "alpha_beta", "" (no time).
  std::string latencySource;
  // Where the whole time comes from: "" (the model), "measured" (the cluster's measured
  // all_reduce_perf curve at this layout), "corrected" (the model times that curve's residual;
  // measured_curve.h).
  std::string timeSource;
};

// One (algorithm, protocol) pair as NCCL's tuner sees it for one call (spec §1.1, §1.10).
struct CollectiveCandidate {
  std::string algorithm;         // "ring", "tree", "nvls", "nvls_tree"
  std::string protocol;          // "LL", "LL128", "Simple"
  bool enabled = false;          // false: NCCL would not consider it (rules of §1.8, filters)
  double baseLatencyUs = 0;      // tuner latency before the size-dependent plateau factor
  double baseAlgBwGBps = 0;      // tuner algorithm bandwidth before the Tree correction
  double latencyUs = 0;          // at this size (ring plateau applied)
  double algBwGBps = 0;          // at this size (Tree correction applied)
  double tunerTimeUs = 0;        // latency + bytes / algBw: NCCL's predicted time
  double timeUs = 0;             // what estimate() uses: non-decreasing in bytes, + launch overhead
                                 // (measured latency: its latency + bytes / algBw instead)
  double measuredLatencyUs = 0;  // the cluster's measured latency at this pair's steps (0: none)
  double baseOffsetUs = 0;       // the tuner's base latency of this pair minus Ring/LL's
  int intraSteps = 0;            // latency steps inside a node / across nodes (NCCL's count)
  int interSteps = 0;
  int ctas = 0;  // CTAs this call would launch (§1.8)
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  // `bytes` is the per-rank buffer size (nccl-tests' S). World size 1 costs zero time.
  virtual CollectiveEstimate estimate(Collective collective, int64_t bytes) const = 0;
  virtual int worldSize() const = 0;
  // Every (algorithm, protocol) pair the model weighs for this call (NCCL model); empty for
  // models without a choice (α–β).
  virtual std::vector<CollectiveCandidate> candidates(Collective /*collective*/,
                                                      int64_t /*bytes*/) const {
    return {};
  }
};

// Per nccl-tests: allreduce 2(n−1)/n; allgather/reduce-scatter (n−1)/n; broadcast 1.
double busBandwidthFactor(Collective collective, int worldSize);

// The model the cluster names (NCCL tuner or α–β) for this layout.
StatusOr<std::unique_ptr<CommModel>> makeCommModel(const ClusterSpec& cluster,
                                                   const WorldLayout& layout);

}  // namespace ddpscope::sim
