#include "runtime/sampler.h"

#include <numeric>
#include <utility>

namespace ddpscope::runtime {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (rejection).
uint64_t uniformBelow(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = splitmix64(state);
  } while (x >= limit);
  return x % bound;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t datasetSize, int worldSize, int rank, uint64_t seed,
                                       bool shuffle)
    : m_datasetSize(datasetSize),
      m_worldSize(worldSize),
      m_rank(rank),
      m_seed(seed),
      m_shuffle(shuffle) {
  DDPSCOPE_CHECK_GT(datasetSize, 0);
  DDPSCOPE_CHECK_GT(worldSize, 0);
  DDPSCOPE_CHECK(rank >= 0 && rank < worldSize);
  m_numSamples = (datasetSize + worldSize - 1) / worldSize;  // ceil(N / world)
}

std::vector<int64_t> DistributedSampler::paddedOrder(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(m_datasetSize));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (m_shuffle) {
    uint64_t state = m_seed + static_cast<uint64_t>(epoch);
    for (size_t i = order.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(uniformBelow(state, i));
      std::swap(order[i - 1], order[j]);
    }
  }
  const size_t total = static_cast<size_t>(totalSize());
  for (size_t k = 0; order.size() < total; ++k) order.push_back(order[k]);  // repeat from start
  return order;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  const std::vector<int64_t> order = paddedOrder(epoch);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(m_numSamples));
  for (size_t i = static_cast<size_t>(m_rank); i < order.size();
       i += static_cast<size_t>(m_worldSize)) {
    mine.push_back(order[i]);
  }
  return mine;
}

StatusOr<BatchSchedule> BatchSchedule::create(int64_t datasetSize, int worldSize, int rank,
                                              uint64_t seed, int64_t perRankBatch) {
  if (perRankBatch <= 0) {
    return invalidArgument("batch: expected a positive per-rank batch, got " +
                           std::to_string(perRankBatch));
  }
  DistributedSampler sampler(datasetSize, worldSize, rank, seed);
  if (sampler.numSamples() < perRankBatch) {
    return invalidArgument(
        "batch: the dataset (" + std::to_string(datasetSize) + " samples) gives each of " +
        std::to_string(worldSize) + " ranks only " + std::to_string(sampler.numSamples()) +
        " samples, fewer than one per-rank batch of " + std::to_string(perRankBatch));
  }
  return BatchSchedule(std::move(sampler), perRankBatch);
}

BatchSchedule::BatchSchedule(DistributedSampler sampler, int64_t perRankBatch)
    : m_sampler(std::move(sampler)),
      m_perRankBatch(perRankBatch),
      m_stepsPerEpoch(m_sampler.numSamples() / perRankBatch) {}

std::vector<int64_t> BatchSchedule::batch(int64_t step) const {
  const int64_t epoch = step / m_stepsPerEpoch;
  const int64_t first = (step % m_stepsPerEpoch) * m_perRankBatch;
  const std::vector<int64_t> shard = m_sampler.indices(epoch);
  return {shard.begin() + first, shard.begin() + first + m_perRankBatch};
}

}  // namespace ddpscope::runtime
