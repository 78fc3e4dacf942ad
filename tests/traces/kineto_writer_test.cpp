// traces/kineto_writer.h: a timeline written as a PyTorch profiler (Kineto) trace reads back
// with the same device work in the same classes, so its overlap is the timeline's own.
#include "traces/kineto_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/status_matchers.h"
#include "tests/traces/test_timelines.h"
#include "traces/chrome_reader.h"
#include "traces/overlap.h"

namespace ddpscope::traces {
namespace {

namespace fs = std::filesystem;
using testing::us;

std::string tempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("ddpscope_kineto_" + std::to_string(::getpid()) + name))
      .string();
}

// One rank, one ProfilerStep (so HTA's last-step filter does not apply), whole-µs times (so its
// µs rounding is exact): compute with a copy and a layer whose name holds HTA's non-compute
// substrings, an allreduce half overlapped, a broadcast, and an "other" device span.
Timeline sampleTimeline() {
  Timeline t;
  t.mutableMetadata().set("world_size", int64_t{2});
  t.mutableMetadata().set("gpus_per_node", int64_t{8});
  const int rank = 1;
  LaneHandle compute = t.addLane(rank, "compute", LaneKind::kCompute);
  LaneHandle comm = t.addLane(rank, "comm", LaneKind::kComm);
  t.addSpan(compute, "conv1", Category::kForward, us(10), us(40));
  t.addSpan(compute, "SyncBatchNorm.Memcpy_dma", Category::kBackward, us(50), us(30));
  t.addSpan(compute, "copy_into_bucket", Category::kCopy, us(80), us(5));
  t.addSpan(compute, "sgd", Category::kOptimizer, us(120), us(10));
  Args ar;
  ar.set("bytes", int64_t{4096});
  ar.set("algorithm", std::string("tree"));
  ar.set("protocol", std::string("LL128"));
  t.addSpan(comm, "broadcast buffers", Category::kBroadcast, us(0), us(8));
  t.addSpan(comm, "allreduce bucket 0", Category::kAllreduce, us(70), us(40), ar);
  t.addSpan(comm, "idle marker", Category::kOther, us(112), us(2));
  t.addIteration(rank, 1, us(0), us(140));
  return t;
}

TEST(KinetoWriterTest, PerRankPathsKeepTheExtension) {
  EXPECT_EQ(perRankTracePath("run.json", 3), "run.rank3.json");
  EXPECT_EQ(perRankTracePath("out/run.json.gz", 0), "out/run.rank0.json.gz");
  EXPECT_EQ(perRankTracePath("a.b/run", 12), "a.b/run.rank12");
  EXPECT_EQ(perRankTracePath("t.gz", 1), "t.rank1.gz");
}

TEST(KinetoWriterTest, ReadsBackAsAKinetoRankWithTheSameOverlap) {
  const Timeline t = sampleTimeline();
  const std::string path = tempPath("sample.json");
  ASSERT_OK(writeKinetoTrace(t, 0, path));
  StatusOr<Timeline> back = readChromeTrace(path);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  const std::vector<RankOverlap> want = computeOverlap(t);
  const std::vector<RankOverlap> got = computeOverlap(*back);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rank, 1);  // distributedInfo.rank
  EXPECT_TRUE(got[0].kineto);
  EXPECT_FALSE(got[0].htaDroppedLastStep);
  // compute [10, 80) ∪ [120, 130) = 80 µs; comm [0, 8) ∪ [70, 110) = 48 µs; overlap [70, 80).
  EXPECT_EQ(want[0].total.compute, us(80));
  EXPECT_EQ(got[0].total.compute, want[0].total.compute);
  EXPECT_EQ(got[0].total.comm, want[0].total.comm);
  EXPECT_EQ(got[0].total.overlapped, us(10));
  EXPECT_EQ(got[0].total.overlapPercent, want[0].total.overlapPercent);
  fs::remove(path);
}

TEST(KinetoWriterTest, EventsAreWhatKinetoWrites) {
  const std::string path = tempPath("events.json");
  ASSERT_OK(writeKinetoTrace(sampleTimeline(), 0, path));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // HTA finds a file's rank with the pattern "rank":<space>N.
  EXPECT_NE(text.str().find("\"rank\": 1,"), std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  EXPECT_EQ(doc["distributedInfo"]["world_size"], 2);
  std::map<std::string, nlohmann::json> byName;
  std::map<int64_t, std::string> launches;  // correlation → runtime call
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "cuda_runtime") {
      launches[e["args"]["correlation"].get<int64_t>()] = e["name"];
    } else {
      byName[e["name"]] = e;
    }
  }
  const nlohmann::json& ar = byName.at(
      "ncclDevKernel_AllReduce_Sum_f32_TREE_LL128(ncclDevComm*, unsigned long, ncclWork*)");
  EXPECT_EQ(ar["cat"], "kernel");
  EXPECT_EQ(ar["pid"], 1);  // rank 1 of 8 GPUs per node
  EXPECT_EQ(ar["args"]["stream"], kKinetoCommStream);
  EXPECT_EQ(ar["args"]["bytes"], 4096);
  EXPECT_EQ(ar["args"]["Collective name"], "allreduce");
  EXPECT_EQ(launches.at(ar["args"]["correlation"].get<int64_t>()), "cudaLaunchKernel");
  EXPECT_EQ(byName.at("ddpscope::forward conv1")["args"]["stream"], kKinetoComputeStream);
  // HTA's non-compute substrings are broken up: the layer still counts as computation.
  EXPECT_TRUE(byName.count("ddpscope::backward S_yncBatchNorm.Mem_cpy_d_ma"));
  const nlohmann::json& copy = byName.at("Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(copy["cat"], "gpu_memcpy");
  EXPECT_EQ(launches.at(copy["args"]["correlation"].get<int64_t>()), "cudaMemcpyAsync");
  EXPECT_EQ(byName.at("ProfilerStep#1")["cat"], "user_annotation");
  EXPECT_EQ(byName.at("idle marker")["cat"], "gpu_user_annotation");
  EXPECT_FALSE(byName.at("idle marker").contains("args"));  // no stream: not a device row
  fs::remove(path);
}

TEST(KinetoWriterTest, LaunchesSitWhereAndOnTheThreadTheHostLaunchedThem) {
  // A simulated host that ran ahead: each device span says when its launch ended and which host
  // lane (thread) made it. The forward's kernel from the main thread 25 µs early, the
  // backward's from autograd's thread (its own tid), a span without a launch at its own start.
  Timeline t;
  const int rank = 0;
  LaneHandle compute = t.addLane(rank, "compute", LaneKind::kCompute);
  t.addLane(rank, "comm", LaneKind::kComm);
  LaneHandle main = t.addLane(rank, std::string(kMainThreadLane), LaneKind::kHost);
  LaneHandle autograd = t.addLane(rank, std::string(kAutogradThreadLane), LaneKind::kHost);
  t.addSpan(main, "conv1 (dispatch)", Category::kOther, us(0), us(5));
  t.addSpan(autograd, "conv1 (autograd)", Category::kOther, us(20), us(8));
  Args forward;
  forward.set(std::string(kArgLaunchNs), int64_t{5000});
  forward.set(std::string(kArgLaunchLane), int64_t{main.laneIndex});
  t.addSpan(compute, "conv1", Category::kForward, us(30), us(10), forward);
  Args backward;
  backward.set(std::string(kArgLaunchNs), int64_t{28000});
  backward.set(std::string(kArgLaunchLane), int64_t{autograd.laneIndex});
  t.addSpan(compute, "conv1", Category::kBackward, us(40), us(10), backward);
  t.addSpan(compute, "sgd", Category::kOptimizer, us(60), us(10));
  t.addIteration(rank, 1, us(0), us(80));
  const std::string path = tempPath("launches.json");
  ASSERT_OK(writeKinetoTrace(t, 0, path));
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<int64_t, nlohmann::json> launches;  // correlation → runtime call
  std::map<std::string, nlohmann::json> kernels;
  std::map<std::string, int> hostTid;
  std::set<int> namedThreads;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == kKinetoHostPid) {
      namedThreads.insert(e["tid"].get<int>());
    }
    if (e["ph"] != "X") continue;
    if (e["cat"] == "cuda_runtime") {
      launches[e["args"]["correlation"].get<int64_t>()] = e;
    } else if (e["cat"] == "kernel") {
      kernels[e["name"]] = e;
    } else if (e["cat"] == "cpu_op") {
      hostTid[e["name"]] = e["tid"].get<int>();
    }
  }
  EXPECT_EQ(hostTid.at("conv1 (dispatch)"), kKinetoHostTid);
  EXPECT_EQ(hostTid.at("conv1 (autograd)"), kKinetoAutogradTid);
  EXPECT_EQ(namedThreads, (std::set<int>{kKinetoHostTid, kKinetoAutogradTid}));
  const auto launchOf = [&](const std::string& kernel) {
    return launches.at(kernels.at(kernel)["args"]["correlation"].get<int64_t>());
  };
  EXPECT_EQ(launchOf("ddpscope::forward conv1")["ts"].get<double>(), 5.0);
  EXPECT_EQ(launchOf("ddpscope::forward conv1")["tid"], kKinetoHostTid);
  EXPECT_EQ(launchOf("ddpscope::backward conv1")["ts"].get<double>(), 28.0);
  EXPECT_EQ(launchOf("ddpscope::backward conv1")["tid"], kKinetoAutogradTid);
  EXPECT_EQ(launchOf("ddpscope::optimizer sgd")["ts"].get<double>(), 60.0);
  EXPECT_EQ(launchOf("ddpscope::optimizer sgd")["tid"], kKinetoHostTid);
  fs::remove(path);
}

}  // namespace
}  // namespace ddpscope::traces
