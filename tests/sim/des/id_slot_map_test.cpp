#include "sim/des/id_slot_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace ddpscope::sim {
namespace {

TEST(EventQueueIdSlotMapTest, InsertFindErase) {
  IdSlotMap map;
  map.insert(7, 70);
  map.insert(8, 80);
  EXPECT_EQ(map.find(7), 70u);
  EXPECT_EQ(map.find(8), 80u);
  EXPECT_EQ(map.find(9), IdSlotMap::kNotFound);
  EXPECT_TRUE(map.erase(7));
  EXPECT_FALSE(map.erase(7));
  EXPECT_EQ(map.find(7), IdSlotMap::kNotFound);
  EXPECT_EQ(map.find(8), 80u);
  EXPECT_EQ(map.size(), 1u);
}

TEST(EventQueueIdSlotMapTest, MatchesStdMapUnderRandomChurn) {
  IdSlotMap map;
  std::map<uint64_t, uint32_t> oracle;
  std::mt19937_64 rng(7);
  uint64_t nextKey = 1;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t r = rng() % 10;
    if (r < 5 || oracle.empty()) {
      const uint64_t key = nextKey++;
      const auto value = static_cast<uint32_t>(rng() % 1000000);
      map.insert(key, value);
      oracle[key] = value;
    } else if (r < 9) {
      // Erase a random present key (or a random maybe-absent one).
      const uint64_t key = 1 + rng() % nextKey;
      EXPECT_EQ(map.erase(key), oracle.erase(key) == 1);
    } else {
      const uint64_t key = 1 + rng() % (nextKey + 10);
      const auto it = oracle.find(key);
      EXPECT_EQ(map.find(key), it == oracle.end() ? IdSlotMap::kNotFound : it->second);
    }
    ASSERT_EQ(map.size(), oracle.size());
  }
  for (const auto& [key, value] : oracle) EXPECT_EQ(map.find(key), value);
}

}  // namespace
}  // namespace ddpscope::sim
