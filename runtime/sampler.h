// DistributedSampler: which dataset samples each rank trains on, with torch.utils.data.
// DistributedSampler's rules (shuffle=True, drop_last=False):
//   - every epoch the N indices are permuted by a generator seeded with (seed + epoch),
//     identically on every rank (ddpscope's own generator: a seeded Fisher-Yates shuffle over
//     splitmix64; the *rule* is PyTorch's, the random stream is not torch.randperm's);
//   - total_size = ceil(N / world) * world; the list is padded by repeating it from the start
//     (several times if N < world) up to total_size;
//   - rank r takes positions r, r + world, r + 2*world, ... : world disjoint shards of
//     total_size / world indices each (disjoint up to the padding repeats).
// BatchSchedule then cuts each rank's shard into consecutive per-rank batches (a DataLoader
// with drop_last=True) and moves to the next epoch when a shard is used up. Concatenating every
// rank's step-s batch gives the single-process reference's batch of step s.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ddpscope::runtime {

class DistributedSampler {
 public:
  DistributedSampler(int64_t datasetSize, int worldSize, int rank, uint64_t seed,
                     bool shuffle = true);

  int64_t numSamples() const { return m_numSamples; }  // per rank: total_size / world
  int64_t totalSize() const { return m_numSamples * m_worldSize; }
  // This rank's indices for `epoch` (0-based), numSamples() of them.
  std::vector<int64_t> indices(int64_t epoch) const;
  // The padded, permuted list all ranks share for `epoch` (totalSize() entries).
  std::vector<int64_t> paddedOrder(int64_t epoch) const;

 private:
  int64_t m_datasetSize;
  int m_worldSize;
  int m_rank;
  uint64_t m_seed;
  bool m_shuffle;
  int64_t m_numSamples;
};

// Consecutive per-rank batches of `perRankBatch` samples over successive epochs.
class BatchSchedule {
 public:
  // InvalidArgument when the shard is smaller than one batch.
  static StatusOr<BatchSchedule> create(int64_t datasetSize, int worldSize, int rank, uint64_t seed,
                                        int64_t perRankBatch);
  // The sample indices of 0-based `step` for this rank.
  std::vector<int64_t> batch(int64_t step) const;
  int64_t stepsPerEpoch() const { return m_stepsPerEpoch; }

 private:
  BatchSchedule(DistributedSampler sampler, int64_t perRankBatch);
  DistributedSampler m_sampler;
  int64_t m_perRankBatch;
  int64_t m_stepsPerEpoch;
};

}  // namespace ddpscope::runtime
