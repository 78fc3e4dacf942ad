// fitDdpOverheads: DDP's host costs from the host spans of traces (sim/replay/calibrate.h).
#include <gtest/gtest.h>

#include <vector>

#include "sim/replay/calibrate.h"
#include "traces/timeline.h"

namespace ddpscope::sim::replay {
namespace {

using traces::Category;
using traces::LaneKind;

TEST(DdpOverheadsFitTest, MediansOfTheSimulatorsAndPyTorchsHostSpans) {
  traces::Timeline timeline;
  for (int rank = 0; rank < 2; ++rank) {
    timeline.addRank(rank);
    const auto host = timeline.addLane(rank, "ddp", LaneKind::kHost);
    const auto compute = timeline.addLane(rank, "compute", LaneKind::kCompute);
    int64_t t = 0;
    auto add = [&](traces::LaneHandle lane, const char* name, int64_t durNs) {
      timeline.addSpan(lane, name, Category::kOther, Nanos(t), Nanos(durNs));
      t += durNs + 10;
    };
    // PyTorch's allreduce call on an imported trace's ddp lane: 40, 42, 44 µs and one
    // preempted call (900 µs) that the median ignores.
    for (int64_t us : {40, 42, 44, 900}) add(host, "c10d::allreduce_", us * 1000);
    for (int i = 0; i < 5; ++i) add(host, "DDP autograd hook", 17000);
    add(host, "DDP forward wrapper (_pre_forward, _post_forward)", 510000);
    // The same name on a compute lane is not host time.
    add(compute, "DDP autograd hook", 1);
  }
  const DdpOverheadsFit fit = fitDdpOverheads({&timeline});
  EXPECT_EQ(fit.allreduceLaunch.samples, 8);
  EXPECT_DOUBLE_EQ(fit.allreduceLaunch.us, 43);  // median of {40,40,42,42,44,44,900,900}
  EXPECT_EQ(fit.gradHook.samples, 10);
  EXPECT_DOUBLE_EQ(fit.gradHook.us, 17);
  EXPECT_DOUBLE_EQ(fit.stepOverhead.us, 510);
  EXPECT_EQ(fit.copyBack.samples, 0);  // not in the trace: not fitted
  EXPECT_EQ(fit.finalizeWait.samples, 0);
  EXPECT_TRUE(fit.any());
}

TEST(DdpOverheadsFitTest, UnfittedTermsKeepTheBaseClustersValues) {
  ClusterSpec base;
  base.host.ddp.copyBackUs = 7.6;
  base.host.ddp.gradHookUs = 99;
  base.device.peakTflops["fp32"] = 1;
  base.device.memoryGBps = 1;
  Calibration cal;
  cal.comm.alphaUs = 1;
  cal.comm.betaGBps = 1;
  cal.ddp.gradHook = {17, 10};
  const ClusterSpec out = applyCalibration(base, cal, "fitted");
  EXPECT_EQ(out.host.ddp.gradHookUs, 17);
  EXPECT_EQ(out.host.ddp.copyBackUs, 7.6);
  EXPECT_FALSE(fitDdpOverheads({}).any());
}

// The compute scale reaches the base's kernel fit only when the runs computed at the fit's
// dtype: at another dtype it was measured against the roofline, so the fit stays as it was.
TEST(ComputeScaleTest, KernelFitIsScaledOnlyAtItsOwnDtype) {
  ClusterSpec base;
  base.device.peakTflops = {{"fp32", 10}, {"bf16", 100}};
  base.device.memoryGBps = 1000;
  base.device.kernelFit.dtype = "bf16";
  base.device.kernelFit.source = "a test";
  base.device.kernelFit.classes["matmul"] = {KernelFitTerm{10, 500}, std::nullopt};
  Calibration cal;
  cal.compute.scale = 2;
  cal.compute.dtypes = {"fp32"};
  ClusterSpec out = applyCalibration(base, cal, "fitted");
  EXPECT_EQ(out.device.peakTflops.at("fp32"), 5);  // the peaks are scaled either way
  EXPECT_EQ(out.device.kernelFit.classes.at("matmul")[0]->rate, 500);
  EXPECT_EQ(out.device.kernelFit.classes.at("matmul")[0]->floorUs, 10);
  cal.compute.dtypes = {"bf16"};
  out = applyCalibration(base, cal, "fitted");
  EXPECT_EQ(out.device.kernelFit.classes.at("matmul")[0]->rate, 250);
  EXPECT_EQ(out.device.kernelFit.classes.at("matmul")[0]->floorUs, 20);
}

}  // namespace
}  // namespace ddpscope::sim::replay
