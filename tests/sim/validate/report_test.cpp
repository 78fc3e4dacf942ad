// The report's arithmetic on hand-made rows (held-out and in-sample MAPE, MAPE per world, the
// worst configuration) and its two result files.
#include "sim/validate/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace ddpscope::sim::validate {
namespace {

const GridModel kMlp{"mlp", "mlp-wide", 16, 0};
const GridModel kGpt{"gpt", "gpt2", 4, 0};

Row row(const GridModel& model, int world, double cap, bool findUnused, int64_t measuredUs,
        int64_t predictedUs) {
  Row r;
  r.config = GridConfig{model, world, cap, findUnused, cap == 25 && !findUnused};
  r.measured = Nanos::fromMicros(measuredUs);
  r.predicted = Nanos::fromMicros(predictedUs);
  r.errorPercent = errorPercent(r.predicted, r.measured);
  return r;
}

std::vector<Row> handMadeRows() {
  return {
      row(kMlp, 1, 5, false, 1000, 1100),   // +10 %
      row(kMlp, 1, 25, false, 1000, 990),   // -1 %, calibration
      row(kMlp, 2, 5, false, 2000, 1500),   // -25 %
      row(kMlp, 2, 25, true, 2000, 2500),   // +25 % (ties with the row above: the first wins)
      row(kGpt, 2, 25, false, 4000, 4120),  // +3 %, calibration
      row(kGpt, 4, 5, true, 5000, 4750),    // -5 %
  };
}

TEST(ValidateReportTest, ErrorPercentIsSignedRelativeToMeasured) {
  EXPECT_DOUBLE_EQ(errorPercent(Nanos(110), Nanos(100)), 10.0);
  EXPECT_DOUBLE_EQ(errorPercent(Nanos(75), Nanos(100)), -25.0);
}

TEST(ValidateReportTest, MapeOverHeldOutRowsPerWorldAndWorst) {
  const Summary s = summarize(handMadeRows());
  EXPECT_EQ(s.heldOut, 4u);
  EXPECT_DOUBLE_EQ(s.heldOutMapePercent, (10.0 + 25.0 + 25.0 + 5.0) / 4);
  EXPECT_DOUBLE_EQ(s.inSampleMapePercent, (1.0 + 3.0) / 2);
  ASSERT_EQ(s.perWorld.size(), 3u);
  EXPECT_EQ(s.perWorld[0].world, 1);
  EXPECT_DOUBLE_EQ(s.perWorld[0].mapePercent, 10.0);
  EXPECT_EQ(s.perWorld[0].configurations, 1);
  EXPECT_EQ(s.perWorld[1].world, 2);
  EXPECT_DOUBLE_EQ(s.perWorld[1].mapePercent, 25.0);
  EXPECT_EQ(s.perWorld[1].configurations, 2);
  EXPECT_EQ(s.perWorld[2].world, 4);
  EXPECT_DOUBLE_EQ(s.perWorld[2].mapePercent, 5.0);
  EXPECT_EQ(s.perWorld[2].configurations, 1);
  ASSERT_TRUE(s.worst.has_value());
  EXPECT_EQ(s.worst->config.name(), "mlp-w2-cap5-fuoff");
  EXPECT_DOUBLE_EQ(s.worst->errorPercent, -25.0);
}

TEST(ValidateReportTest, OnlyCalibrationRowsGiveNoHeldOutMapeAndNoWorst) {
  const Summary s = summarize({row(kMlp, 1, 25, false, 1000, 1020)});
  EXPECT_EQ(s.heldOut, 0u);
  EXPECT_EQ(s.heldOutMapePercent, 0.0);
  EXPECT_DOUBLE_EQ(s.inSampleMapePercent, 2.0);
  EXPECT_TRUE(s.perWorld.empty());
  EXPECT_FALSE(s.worst.has_value());
  const Summary empty = summarize({});
  EXPECT_EQ(empty.heldOut, 0u);
  EXPECT_EQ(empty.inSampleMapePercent, 0.0);
}

TEST(ValidateReportTest, CsvHasOneLinePerRowInRowOrder) {
  Report report;
  report.grid = "ci";
  report.rows = {row(kMlp, 1, 5, false, 1000, 1100), row(kMlp, 2, 25, false, 2000, 1500)};
  report.summary = summarize(report.rows);
  std::ostringstream csv;
  writeCsv(report, csv);
  EXPECT_EQ(csv.str(),
            "model,world,bucket_cap_mb,find_unused_parameters,calibration,measured_ms,predicted_ms,"
            "error_percent,runs\n"
            "mlp,1,5,0,0,1,1.1,10,1\n"
            "mlp,2,25,0,1,2,1.5,-25,1\n");
}

TEST(ValidateReportTest, JsonHasTheSummaryAndTheRows) {
  Report report;
  report.grid = "ci";
  report.rows = handMadeRows();
  report.summary = summarize(report.rows);
  std::ostringstream out;
  writeJson(report, out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["grid"], "ci");
  EXPECT_DOUBLE_EQ(j["mape_percent"].get<double>(), 16.25);
  EXPECT_DOUBLE_EQ(j["in_sample_mape_percent"].get<double>(), 2.0);
  EXPECT_EQ(j["held_out"], 4);
  EXPECT_EQ(j["worst"], "mlp-w2-cap5-fuoff");
  ASSERT_EQ(j["rows"].size(), 6u);
  const nlohmann::json& r = j["rows"][5];
  EXPECT_EQ(r["model"], "gpt");
  EXPECT_EQ(r["world_size"], 4);
  EXPECT_EQ(r["bucket_cap_mb"], 5.0);
  EXPECT_EQ(r["find_unused_parameters"], true);
  EXPECT_EQ(r["calibration"], false);
  EXPECT_DOUBLE_EQ(r["measured_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(r["predicted_ms"].get<double>(), 4.75);
  EXPECT_DOUBLE_EQ(r["error_percent"].get<double>(), -5.0);
  EXPECT_EQ(r["runs"], 1);
  EXPECT_EQ(out.str().back(), '\n');
  // Held-out |errors| 10, 25, 25, 5: the nearest-rank p95 of four is the largest.
  EXPECT_DOUBLE_EQ(j["p95_error_percent"].get<double>(), 25.0);
  EXPECT_EQ(j["engine"], "runtime");
  EXPECT_TRUE(j["torch"].is_null());
  // No configuration ran twice: the noise floor is unknown, not 0.
  EXPECT_TRUE(j["noise_floor"].is_null());
  EXPECT_TRUE(j["mape_over_noise_floor"].is_null());
}

TEST(ValidateReportTest, Percentile95IsTheNearestRank) {
  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile95(twenty), 19.0);       // rank ceil(0.95 * 20) = 19
  twenty.push_back(21);
  EXPECT_DOUBLE_EQ(percentile95(twenty), 20.0);  // rank ceil(19.95) = 20
  EXPECT_DOUBLE_EQ(percentile95({7.5}), 7.5);
  EXPECT_DOUBLE_EQ(percentile95({}), 0.0);
}

TEST(ValidateReportTest, NoiseFloorPoolsEveryOrderedPairOfRunsOfOneConfiguration) {
  const auto ms = [](int64_t v) { return Nanos::fromMillis(v); };
  // (100, 110): 10 % and 100/110 - 1; a single run: no pair; (50, 50, 60): 0, 0, 20, 20 and
  // 1/6 twice.
  const NoiseFloor f = noiseFloor({{ms(100), ms(110)}, {ms(200)}, {ms(50), ms(50), ms(60)}});
  EXPECT_EQ(f.configurations, 2u);
  EXPECT_EQ(f.runs, 5u);
  EXPECT_EQ(f.pairs, 8u);
  const double expected = (10.0 + 100.0 * 10 / 110 + 0 + 0 + 20 + 20 + 100.0 / 6 + 100.0 / 6) / 8;
  EXPECT_NEAR(f.mapePercent, expected, 1e-12);
  EXPECT_DOUBLE_EQ(f.p95Percent, 20.0);
  const NoiseFloor none = noiseFloor({{ms(100)}, {}});
  EXPECT_EQ(none.pairs, 0u);
  EXPECT_EQ(none.configurations, 0u);
  EXPECT_EQ(none.mapePercent, 0.0);
}

TEST(ValidateReportTest, JsonHasTheNoiseFloorAndTheRatioToIt) {
  Report report;
  report.grid = "full";
  report.engine = Engine::kTorch;
  report.torchVersion = "2.15.0";
  report.rows = handMadeRows();
  report.summary = summarize(report.rows);
  report.noise = noiseFloor({{Nanos::fromMillis(100), Nanos::fromMillis(110)}});
  std::ostringstream out;
  writeJson(report, out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["engine"], "torch");
  EXPECT_EQ(j["torch"], "2.15.0");
  ASSERT_TRUE(j["noise_floor"].is_object());
  EXPECT_DOUBLE_EQ(j["noise_floor"]["mape_percent"].get<double>(), report.noise.mapePercent);
  EXPECT_DOUBLE_EQ(j["noise_floor"]["p95_percent"].get<double>(), 10.0);
  EXPECT_EQ(j["noise_floor"]["pairs"], 2);
  EXPECT_EQ(j["noise_floor"]["configurations"], 1);
  EXPECT_EQ(j["noise_floor"]["runs"], 2);
  EXPECT_DOUBLE_EQ(j["mape_over_noise_floor"].get<double>(), 16.25 / report.noise.mapePercent);
  ASSERT_TRUE(mapeOverNoise(report).has_value());
  EXPECT_DOUBLE_EQ(*mapeOverNoise(report), 16.25 / report.noise.mapePercent);
}

}  // namespace
}  // namespace ddpscope::sim::validate
