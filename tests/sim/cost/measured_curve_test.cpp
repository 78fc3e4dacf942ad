// Measured all_reduce_perf curves in a cluster (sim/cost/measured_curve.h): the interpolation,
// which layouts a curve applies to, the loader's errors and calibration from several logs. The
// logs here are written from a model ("truth" clusters) so that every expected value is known;
// the published logs are in nccl_tests_log_test.cpp.
#include "sim/cost/measured_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cost/comm_model.h"
#include "sim/cost/latency_fit.h"
#include "sim/cost/nccl_tests_log.h"
#include "tests/sim/cost/cost_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

std::vector<std::pair<int64_t, double>> points(
    std::initializer_list<std::pair<int64_t, double>> p) {
  return {p};
}

TEST(MeasuredCurveTest, InterpolatesInLogLogAndExtendsTheBandwidthRegime) {
  const auto curve = points({{1024, 10.0}, {4096, 40.0}, {16384, 60.0}});
  EXPECT_DOUBLE_EQ(interpolateCurveUs(curve, 1024), 10.0);
  EXPECT_DOUBLE_EQ(interpolateCurveUs(curve, 4096), 40.0);
  // Halfway in log(bytes) is halfway in log(time): sqrt(10 · 40) = 20 at 2048.
  EXPECT_NEAR(interpolateCurveUs(curve, 2048), 20.0, 1e-12);
  EXPECT_NEAR(interpolateCurveUs(curve, 8192), std::sqrt(40.0 * 60.0), 1e-12);
  // Below the smallest size: its time (the latency floor).
  EXPECT_DOUBLE_EQ(interpolateCurveUs(curve, 8), 10.0);
  // Above the largest: the last segment's µs per byte, 20 us / 12288 bytes, continued.
  EXPECT_NEAR(interpolateCurveUs(curve, 16384 + 12288), 80.0, 1e-9);
  // A last segment that gets faster does not make a larger size cheaper.
  const auto falling = points({{1024, 10.0}, {2048, 9.0}});
  EXPECT_DOUBLE_EQ(interpolateCurveUs(falling, 1 << 20), 9.0);
}

// A cluster JSON with `curves` as its measured_allreduce.
std::string withCurves(const nlohmann::json& curves, const std::string& base = "dgx-h100") {
  nlohmann::json doc = nlohmann::json::parse(builtinClusterJson(base));
  doc["measured_allreduce"] = curves;
  return doc.dump();
}

TEST(MeasuredCurveTest, AppliesExactlyAtItsLayoutAndAsAResidualAtLayoutsOfTheSameKind) {
  const nlohmann::json curve = {{"source", "ar16.txt"},
                                {"ranks", 16},
                                {"nodes", 2},
                                {"points", {{8, 40.0}, {1 << 20, 400.0}, {64 << 20, 4000.0}}}};
  auto cluster = parseClusterJson(withCurves(nlohmann::json::array({curve})), "c.json");
  ASSERT_TRUE(cluster.isOk()) << cluster.status().toString();
  ClusterSpec bare = *cluster;
  bare.measuredAllreduce.clear();

  // 16 ranks on 2 nodes: the curve's own times; the model still names its pick.
  auto exact = makeCommModel(*cluster, WorldLayout{2, 8});
  ASSERT_OK(exact);
  const CollectiveEstimate at1M = (*exact)->estimate(Collective::kAllreduce, 1 << 20);
  EXPECT_NEAR(at1M.time.toMicros(), 400.0, 1e-3);
  EXPECT_EQ(at1M.timeSource, "measured");
  EXPECT_FALSE(at1M.algorithm.empty());
  EXPECT_NEAR(at1M.busbwGBps, (1 << 20) / 400e-6 * 1e-9 * 2 * 15 / 16, 1e-3);
  EXPECT_EQ(allreduceTimeSource(*cluster, WorldLayout{2, 8}),
            "allreduce times from your measured all_reduce_perf at 16 ranks (2 nodes) (ar16.txt)");
  // Other collectives keep the model.
  auto bareExact = makeCommModel(bare, WorldLayout{2, 8});
  EXPECT_EQ((*exact)->estimate(Collective::kBroadcast, 1 << 20).time,
            (*bareExact)->estimate(Collective::kBroadcast, 1 << 20).time);

  // 32 ranks on 4 nodes: the model there times the residual at 16 ranks.
  auto wider = makeCommModel(*cluster, WorldLayout{4, 8});
  auto bareWider = makeCommModel(bare, WorldLayout{4, 8});
  ASSERT_OK(wider);
  ASSERT_OK(bareWider);
  const double residual =
      400.0 / (*bareExact)->estimate(Collective::kAllreduce, 1 << 20).time.toMicros();
  const CollectiveEstimate corrected = (*wider)->estimate(Collective::kAllreduce, 1 << 20);
  EXPECT_NEAR(corrected.time.toMicros(),
              (*bareWider)->estimate(Collective::kAllreduce, 1 << 20).time.toMicros() * residual,
              1e-3);
  EXPECT_EQ(corrected.timeSource, "corrected");
  EXPECT_NE(allreduceTimeSource(*cluster, WorldLayout{4, 8}).find("modelled, corrected by"),
            std::string::npos);

  // One node: a two-node curve says nothing about NVLink; the model, and the line says why.
  auto single = makeCommModel(*cluster, WorldLayout{1, 8});
  auto bareSingle = makeCommModel(bare, WorldLayout{1, 8});
  EXPECT_EQ((*single)->estimate(Collective::kAllreduce, 1 << 20).time,
            (*bareSingle)->estimate(Collective::kAllreduce, 1 << 20).time);
  EXPECT_EQ(allreduceTimeSource(*cluster, WorldLayout{1, 8}),
            "allreduce times modelled: the measured all_reduce_perf curves (across nodes) do not "
            "carry to 8 ranks on 1 node");
  // A cluster without curves says nothing.
  EXPECT_EQ(allreduceTimeSource(bare, WorldLayout{2, 8}), "");
}

TEST(MeasuredCurveTest, BadCurvesNameTheirField) {
  struct Case {
    nlohmann::json curves;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{{"source", "a"}, {"ranks", 16}, {"nodes", 2}, {"points", {{8, 1.0}, {8, 2.0}}}}},
       "c.json: measured_allreduce[0].points[1]: expected sizes in increasing order"},
      {{{{"source", "a"}, {"ranks", 16}, {"nodes", 2}, {"points", {{8, 1.0}, {16, -2.0}}}}},
       "c.json: measured_allreduce[0].points[1]: expected [bytes, us]"},
      {{{{"source", "a"}, {"ranks", 16}, {"nodes", 2}, {"points", {{8, 1.0}}}}},
       "c.json: measured_allreduce[0].points: expected an array of at least 2"},
      {{{{"source", "a"}, {"ranks", 12}, {"nodes", 1}, {"points", {{8, 1.0}, {16, 2.0}}}}},
       "c.json: measured_allreduce[0].nodes: expected a node count that splits the ranks evenly "
       "into nodes of at most gpus_per_node (8) GPUs"},
      {{{{"source", "a"}, {"ranks", 16}, {"nodes", 2}, {"points", {{8, 1.0}, {16, 2.0}}}},
        {{"source", "b"}, {"ranks", 16}, {"nodes", 2}, {"points", {{8, 1.0}, {16, 2.0}}}}},
       "c.json: measured_allreduce[1]: expected one curve per layout"},
      {{{{"source", "a"},
         {"ranks", 16},
         {"nodes", 2},
         {"points", {{8, 1.0}, {16, 2.0}}},
         {"rank", 3}}},
       "c.json: measured_allreduce[0]"},
  };
  for (const Case& c : cases) {
    auto cluster = parseClusterJson(withCurves(c.curves), "c.json");
    ASSERT_FALSE(cluster.isOk()) << c.curves.dump();
    EXPECT_NE(cluster.status().message().find(c.message), std::string::npos)
        << cluster.status().message();
  }
  auto cpu = parseClusterJson(
      withCurves({{{"source", "a"}, {"ranks", 8}, {"nodes", 2}, {"points", {{8, 1.0}, {16, 2.0}}}}},
                 "cpu-mpi"),
      "c.json");
  ASSERT_FALSE(cpu.isOk());
  EXPECT_NE(cpu.status().message().find("measured_allreduce: expected absent when comm_model is "
                                        "\"alpha_beta\""),
            std::string::npos)
      << cpu.status().message();
}

// An all_reduce_perf log (8 B to `maxBytes`, factor 2) of `truth` at `layout`, times to 0.01 µs as
// nccl-tests prints them, hosts node0, node1, ...
std::string logOf(const ClusterSpec& truth, const WorldLayout& layout, int64_t maxBytes) {
  auto model = makeCommModel(truth, layout);
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  std::string text = "# nThread 1 nGpus 1 minBytes 8 maxBytes " + std::to_string(maxBytes) +
                     " step: 2(factor) warmup iters: 5 iters: 20\n";
  char line[256];
  for (int r = 0; r < layout.worldSize(); ++r) {
    std::snprintf(line, sizeof(line),
                  "#  Rank %2d Group  0 Pid %5d on node%d device %2d [0x%02x] NVIDIA H100 80GB "
                  "HBM3\n",
                  r, 1000 + r, r / layout.gpusPerNode, r % layout.gpusPerNode, r);
    text += line;
  }
  text +=
      "#                                                              out-of-place"
      "                       in-place\n";
  for (int64_t bytes = 8; bytes <= maxBytes; bytes *= 2) {
    const double us = (*model)->estimate(Collective::kAllreduce, bytes).time.toMicros();
    std::snprintf(line, sizeof(line),
                  "%12lld %12lld     float     sum      -1 %8.2f    0.00    0.00      0 %8.2f    "
                  "0.00    0.00      0\n",
                  static_cast<long long>(bytes), static_cast<long long>(bytes / 4), us, us);
    text += line;
  }
  return text;
}

// A world unlike the base cluster's in known ways: the inter-node network half as fast, every
// latency term different. Its logs are written from its model.
ClusterSpec truthCluster() {
  nlohmann::json doc = nlohmann::json::parse(builtinClusterJson("dgx-h100"));
  doc["name"] = "truth";
  doc["inter_node"]["nic_Gbps"] = 200;
  doc["measured_latency"]["base_us"] = 9.0;
  doc["measured_latency"]["intra_step_us"] = 2.5;
  doc["measured_latency"]["inter_step_us"] = 25.0;
  auto truth = parseClusterJson(doc.dump(), "truth");
  EXPECT_TRUE(truth.isOk()) << truth.status().toString();
  return *truth;
}

// Two logs of one cluster (8 ranks on 1 node, 16 on 2) fitted together: both world sizes separate
// the base latency from the per-step cost (one log alone cannot), each log's curve is in the
// cluster and used at its own layout, and each log's rows are checked.
TEST(MeasuredCurveTest, CalibratesSeveralLogsOfOneClusterTogether) {
  const ClusterSpec truth = truthCluster();
  auto one = parseNcclTestsLog(logOf(truth, WorldLayout{1, 8}, 1 << 30), "one-node.txt");
  auto two = parseNcclTestsLog(logOf(truth, WorldLayout{2, 8}, 1 << 30), "two-nodes.txt");
  ASSERT_OK(one);
  ASSERT_OK(two);
  const std::string base(builtinClusterJson("dgx-h100"));
  auto single = calibrateFromNcclTests({*one}, base, "cluster:dgx-h100", {});
  auto both = calibrateFromNcclTests({*one, *two}, base, "cluster:dgx-h100", {});
  ASSERT_TRUE(single.isOk()) << single.status().toString();
  ASSERT_TRUE(both.isOk()) << both.status().toString();
  // One node alone has no inter-node step to fit; with the two-node log every term is fitted.
  EXPECT_FALSE(single->latency.interFitted);
  EXPECT_TRUE(both->latency.baseFitted && both->latency.intraFitted && both->latency.interFitted);
  ASSERT_EQ(both->logs.size(), 2u);
  ASSERT_EQ(both->spec.measuredAllreduce.size(), 2u);
  for (const CalibratedLog& l : both->logs) {
    EXPECT_EQ(l.checks.size(), l.log.rows.size()) << l.log.origin;
    for (const CalibrationCheck& c : l.checks) {
      EXPECT_LE(std::abs(c.errorPercent), 0.01) << l.log.origin << " " << c.bytes;
    }
  }
  // The same layout twice is refused, naming both logs.
  auto twice = calibrateFromNcclTests({*two, *two}, base, "cluster:dgx-h100", {});
  ASSERT_FALSE(twice.isOk());
  EXPECT_NE(twice.status().message().find("two-nodes.txt: the same layout as two-nodes.txt (16 "
                                          "ranks on 2 node(s)): give one log per layout"),
            std::string::npos)
      << twice.status().message();
  NcclTestsCalibrationOptions withRanks;
  withRanks.ranks = 8;
  auto ranks = calibrateFromNcclTests({*one, *two}, base, "cluster:dgx-h100", withRanks);
  ASSERT_FALSE(ranks.isOk());
  EXPECT_NE(ranks.status().message().find("--ranks / --nodes: for one log only"),
            std::string::npos);
}

// Across world sizes, constructed from the model (no published pair of logs of one machine at
// two layouts exists; docs/spec/nccl-latency.md): a 2-node log of `truth` calibrates dgx-h100,
// and the calibrated cluster predicts truth at 4 and 8 nodes (the model with the NIC speed the
// log implies, corrected by the 2-node curve's residual) and on 1 node (the fitted model alone).
// Printed per size. Asserted: from 64 MiB, where the link sets the time, within 5 % at every
// layout (the fit moves the NIC, which the log measured, not NVLink); at 4 and 8 nodes every
// size within 15 %. The latency-bound sizes on one node are not asserted: a 2-node log cannot
// tell the base latency from NVLink's per-step cost, and they come out up to 50 % low — how far
// that extrapolation can be trusted (docs/spec/nccl-latency.md).
TEST(MeasuredCurveTest, ATwoNodeLogPredictsOtherLayoutsOfTheSameCluster) {
  const ClusterSpec truth = truthCluster();
  auto two = parseNcclTestsLog(logOf(truth, WorldLayout{2, 8}, 1 << 30), "two-nodes.txt");
  ASSERT_OK(two);
  auto cal = calibrateFromNcclTests({*two}, std::string(builtinClusterJson("dgx-h100")),
                                    "cluster:dgx-h100", {});
  ASSERT_TRUE(cal.isOk()) << cal.status().toString();
  for (int nodes : {1, 4, 8}) {
    auto predicted = makeCommModel(cal->spec, WorldLayout{nodes, 8});
    auto actual = makeCommModel(truth, WorldLayout{nodes, 8});
    ASSERT_OK(predicted);
    ASSERT_OK(actual);
    for (int64_t bytes = 64 << 10; bytes <= (int64_t{1} << 30); bytes *= 4) {
      const double p = (*predicted)->estimate(Collective::kAllreduce, bytes).time.toMicros();
      const double a = (*actual)->estimate(Collective::kAllreduce, bytes).time.toMicros();
      const double error = 100 * (p - a) / a;
      std::printf("  %d node(s) %12lld bytes: predicted %10.2f us, truth %10.2f us, %+6.1f %%\n",
                  nodes, static_cast<long long>(bytes), p, a, error);
      if (bytes >= (64 << 20)) {
        EXPECT_LE(std::abs(error), 5.0) << nodes << " node(s), " << bytes << " bytes";
      } else if (nodes > 1) {
        EXPECT_LE(std::abs(error), 15.0) << nodes << " node(s), " << bytes << " bytes";
      }
    }
  }
}

}  // namespace
}  // namespace ddpscope::sim
