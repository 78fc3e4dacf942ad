// fitContentionToSteps on the committed runtime trace: the chosen contention is the grid point
// with the smallest step error (its neighbours are not better), and bad input is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/cost/cluster.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"
#include "tests/status_matchers.h"
#include "traces/chrome_reader.h"

namespace ddpscope::sim::replay {
namespace {

const std::string kTrace =
    std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/replay/mlp-wide-w2.json.gz";

struct Loaded {
  models::ModelSpec model;
  MeasuredProfile profile;
};

Loaded load() {
  auto timeline = traces::readChromeTrace(kTrace);
  EXPECT_TRUE(timeline.isOk()) << timeline.status().message();
  auto settings = readRunSettings(*timeline, kTrace);
  EXPECT_OK(settings);
  auto model = modelForTrace(*settings, kTrace);
  EXPECT_OK(model);
  auto profile = buildProfile(*timeline, *model, kTrace);
  EXPECT_TRUE(profile.isOk()) << profile.status().message();
  return Loaded{*model, *profile};
}

double errorPercentAt(const Loaded& run, const ClusterSpec& cluster, const WorldLayout& layout,
                      double c) {
  auto compute = MeasuredComputeModel::create(run.profile, run.model, cluster.device,
                                              MeasuredComputeOptions{});
  EXPECT_OK(compute);
  SimOptions options = ownSettingsOptions(run.profile);
  options.contentionSlowdown = c;
  auto p =
      predictStep(run.model, cluster, layout, options, compute->get(), run.profile.rankMaxFactor);
  EXPECT_OK(p);
  const double measured = static_cast<double>(run.profile.measuredStep.count());
  return 100.0 * std::abs(static_cast<double>(p->step.count()) - measured) / measured;
}

TEST(ContentionFitTest, PicksTheGridPointWithTheSmallestStepError) {
  const Loaded run = load();
  auto base = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(base);
  // As validate does: the α–β model calibrated on the run's own collectives first.
  auto cal = calibrate({{&run.profile, &run.model}}, base->device);
  ASSERT_TRUE(cal.isOk()) << cal.status().message();
  auto cluster = StatusOr<ClusterSpec>(applyCalibration(*base, *cal, "calibrated"));
  auto layout = makeWorldLayout(*cluster, std::nullopt, 2);
  ASSERT_OK(layout);
  auto fit = fitContentionToSteps({{&run.profile, &run.model}}, *cluster, *layout);
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  EXPECT_GE(fit->contention, 0.0);
  EXPECT_LT(fit->contention, 3.0);  // an interior optimum on this run
  EXPECT_LE(fit->meanAbsErrorPercent, 3.0);
  EXPECT_NEAR(errorPercentAt(run, *cluster, *layout, fit->contention), fit->meanAbsErrorPercent,
              1e-9);
  for (double c : {0.0, fit->contention - 0.05, fit->contention + 0.05, 1.0, 3.0}) {
    if (c < 0 || c > 3.0) continue;
    EXPECT_GE(errorPercentAt(run, *cluster, *layout, c) + 1e-9, fit->meanAbsErrorPercent)
        << "c = " << c;
  }
}

TEST(ContentionFitTest, RefusesNoRunsAndAWorldSizeMismatch) {
  const Loaded run = load();
  auto cluster = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(cluster);
  auto layout4 = makeWorldLayout(*cluster, std::nullopt, 4);
  ASSERT_OK(layout4);
  auto none = fitContentionToSteps({}, *cluster, *layout4);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(), "contention fit: no runs to fit");
  auto mismatch = fitContentionToSteps({{&run.profile, &run.model}}, *cluster, *layout4);
  ASSERT_FALSE(mismatch.isOk());
  EXPECT_NE(mismatch.status().message().find("ran at world size 2, the layout has 4"),
            std::string::npos)
      << mismatch.status().message();
}

}  // namespace
}  // namespace ddpscope::sim::replay
