// The threaded FIFO communicator front end over the in-process loopback backend.
#include "runtime/comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "runtime/loopback_comm.h"
#include "runtime_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime {
namespace {

using testing::runRanks;
using traces::Category;

TEST(LoopbackCommTest, AllreduceSumsFloatAndInt32OnEveryRank) {
  runRanks(3, [](int rank, Communicator& comm) {
    std::vector<float> f = {1.0f * rank, 2.0f, -1.0f};
    std::vector<int32_t> i = {rank, 1};
    auto w1 = comm.allreduceAsync(std::span<float>(f), CommTag{"f"});
    auto w2 = comm.allreduceAsync(std::span<int32_t>(i), CommTag{"i"});
    ASSERT_OK(w1->wait());
    ASSERT_OK(w2->wait());
    EXPECT_EQ(f, (std::vector<float>{3.0f, 6.0f, -3.0f}));
    EXPECT_EQ(i, (std::vector<int32_t>{3, 3}));
  });
}

TEST(LoopbackCommTest, BroadcastAllgatherGathervAndBarrier) {
  runRanks(3, [](int rank, Communicator& comm) {
    std::vector<int32_t> b = {rank * 10, rank * 10 + 1};
    ASSERT_OK(comm.broadcast(std::as_writable_bytes(std::span<int32_t>(b)), 1, CommTag{}));
    EXPECT_EQ(b, (std::vector<int32_t>{10, 11}));

    const int64_t mine = 100 + rank;
    std::vector<int64_t> all(3);
    ASSERT_TRUE(comm.allgather(std::as_bytes(std::span<const int64_t>(&mine, 1)),
                               std::as_writable_bytes(std::span<int64_t>(all)), CommTag{})
                    .isOk());
    EXPECT_EQ(all, (std::vector<int64_t>{100, 101, 102}));

    std::vector<std::byte> blob(static_cast<size_t>(rank + 1),
                                std::byte{static_cast<uint8_t>(rank)});
    std::vector<std::vector<std::byte>> blobs;
    ASSERT_OK(comm.gatherv(blob, 0, &blobs, CommTag{}));
    if (rank == 0) {
      ASSERT_EQ(blobs.size(), 3u);
      EXPECT_EQ(blobs[2].size(), 3u);
      EXPECT_EQ(blobs[2][0], std::byte{2});
    }
    EXPECT_OK(comm.barrier(CommTag{}));
  });
}

TEST(LoopbackCommTest, AllgatherRejectsAWrongReceiveSize) {
  runRanks(1, [](int, Communicator& comm) {
    int64_t one = 1;
    std::vector<int64_t> out(2);
    Status status = comm.allgather(std::as_bytes(std::span<const int64_t>(&one, 1)),
                                   std::as_writable_bytes(std::span<int64_t>(out)), CommTag{});
    EXPECT_FALSE(status.isOk());
  });
}

// Records what the comm thread reports.
class RecordingObserver : public CommObserver {
 public:
  void onCollective(const CommTag& tag, int64_t bytes, Nanos start, Nanos end) override {
    std::lock_guard lock(mutex);
    names.push_back(tag.name);
    sizes.push_back(bytes);
    EXPECT_LE(start, end);
    if (!ends.empty()) {
      EXPECT_LE(ends.back(), start);  // one at a time, FIFO
    }
    ends.push_back(end);
  }
  std::mutex mutex;
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<Nanos> ends;
};

TEST(LoopbackCommTest, CollectivesRunOneAtATimeInIssueOrderAndAreTimed) {
  RecordingObserver observer;
  runRanks(2, [&](int rank, Communicator& comm) {
    if (rank == 0) comm.setObserver(&observer);
    std::vector<std::vector<float>> buffers(5, std::vector<float>(1000, 1.0f));
    std::vector<CommWorkPtr> works;
    for (int b = 0; b < 5; ++b) {
      works.push_back(
          comm.allreduceAsync(std::span<float>(buffers[static_cast<size_t>(b)]),
                              CommTag{"ar" + std::to_string(b), Category::kAllreduce, b}));
    }
    // An unrecorded one is not reported.
    ASSERT_OK(comm.barrier(CommTag{"hidden", Category::kCommOther, -1, 0, false}));
    for (auto& w : works) {
      ASSERT_OK(w->wait());
      EXPECT_TRUE(w->test());
      EXPECT_LE(w->startTime(), w->endTime());
    }
    for (int b = 1; b < 5; ++b) {
      EXPECT_LE(works[static_cast<size_t>(b - 1)]->endTime(),
                works[static_cast<size_t>(b)]->startTime());
    }
    EXPECT_EQ(buffers[4][999], 2.0f);
    comm.setObserver(nullptr);
  });
  EXPECT_EQ(observer.names, (std::vector<std::string>{"ar0", "ar1", "ar2", "ar3", "ar4"}));
  EXPECT_EQ(observer.sizes[0], 4000);
}

TEST(LoopbackCommTest, WaitTimesOutWithAMessageNamingTheCollective) {
  auto group = makeLoopbackGroup(2);
  group[0]->setTimeout(Nanos::fromMillis(100));
  std::vector<float> a(4, 1.0f);
  std::vector<float> b(4, 1.0f);
  auto work = group[0]->allreduceAsync(std::span<float>(a),
                                       CommTag{"allreduce", Category::kAllreduce, 3, 5});
  const auto start = std::chrono::steady_clock::now();
  Status status = work->wait();  // rank 1 has not joined
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("allreduce of bucket 3 in iteration 5"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("timed out"), std::string::npos);
  EXPECT_EQ(status.message(),
            "rank 0: timed out after 0.1 s waiting for the allreduce of bucket 3 in iteration 5: "
            "a peer rank died or stopped making progress (collective timeout)");
  // What a termination message names: the collective the comm thread is blocked in (it took
  // the work from the queue at once; the bound only covers a starved thread).
  for (int i = 0; i < 500 && group[0]->inFlight() == ""; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(group[0]->inFlight(), "allreduce of bucket 3 in iteration 5");
  EXPECT_EQ(group[1]->inFlight(), "");
  // Let the peer arrive so the comm threads can be joined.
  ASSERT_OK(group[1]->allreduce(std::span<float>(b), CommTag{}));
  group[0]->setTimeout(Nanos::fromSeconds(60));
  EXPECT_OK(work->wait());
  EXPECT_EQ(a[0], 2.0f);
  EXPECT_EQ(group[0]->inFlight(), "");  // cleared before the work completes
}

// After one wait timed out, a wait for another unfinished collective fails at once, naming the
// first timeout, instead of taking a timeout of its own: a rank tearing down after a timeout
// (the engine waits for every outstanding bucket) ends within one timeout, not one per bucket.
TEST(LoopbackCommTest, AfterATimeoutOtherWaitsFailAtOnce) {
  auto group = makeLoopbackGroup(2);
  group[0]->setTimeout(Nanos::fromMillis(100));
  std::vector<std::vector<float>> buffers(3, std::vector<float>(4, 1.0f));
  std::vector<CommWorkPtr> works;
  for (int b = 0; b < 3; ++b) {
    works.push_back(group[0]->allreduceAsync(std::span<float>(buffers[static_cast<size_t>(b)]),
                                             CommTag{"allreduce", Category::kAllreduce, b, 7}));
  }
  const Status first = works[0]->wait();  // rank 1 has not joined
  EXPECT_EQ(first.message(),
            "rank 0: timed out after 0.1 s waiting for the allreduce of bucket 0 in iteration 7: "
            "a peer rank died or stopped making progress (collective timeout)");
  for (int b : {2, 1}) {
    const Status later = works[static_cast<size_t>(b)]->wait();
    EXPECT_EQ(later.code(), StatusCode::kUnavailable);
    EXPECT_EQ(later.message(), "rank 0: the allreduce of bucket " + std::to_string(b) +
                                   " in iteration 7 cannot complete after an earlier collective "
                                   "timed out (" +
                                   first.message() + ")");
  }
  // A new timeout starts afresh; the peer arrives and every collective completes.
  group[0]->setTimeout(Nanos::fromSeconds(60));
  for (int b = 0; b < 3; ++b) {
    std::vector<float> peer(4, 1.0f);
    ASSERT_OK(group[1]->allreduce(std::span<float>(peer), CommTag{}));
  }
  for (const CommWorkPtr& work : works) EXPECT_OK(work->wait());
  EXPECT_EQ(buffers[2][0], 2.0f);
}

TEST(LoopbackCommTest, AFailedCollectiveFailsTheFollowingOnes) {
  runRanks(2, [](int rank, Communicator& comm) {
    std::vector<float> a(static_cast<size_t>(rank + 1), 1.0f);  // sizes differ: error
    Status first = comm.allreduce(std::span<float>(a), CommTag{"mismatch"});
    EXPECT_FALSE(first.isOk());
    std::vector<float> b(2, 1.0f);
    Status second = comm.allreduce(std::span<float>(b), CommTag{"next"});
    ASSERT_FALSE(second.isOk());
    EXPECT_NE(second.message().find("earlier failure"), std::string::npos);
  });
}

}  // namespace
}  // namespace ddpscope::runtime
