// The measured small-message latency of the built-in clusters against published all_reduce_perf
// rows (tests/data/published/nccl_tests_small.json; docs/spec/nccl-latency.md).
//
//   * BuiltinFitsAreTheFitOfTheRows: each built-in cluster's measured_latency is what fitLatency
//     makes of that cluster's rows (or, for a cluster without rows, its prior's): the numbers
//     in sim/cost/clusters/*.json cannot drift from the data. The test prints each fit as JSON.
//   * DgxA100HeldOutGpuCounts: the one cross-validation the rows allow. Every other check here
//     predicts rows that were also fitted; this one fits dgx-a100 without its 6-, 7- and
//     8-GPU rows (nccl-tests#123) and predicts them, extrapolating the per-step cost.
//   * EveryRowWithinTolerance: every row <= 1 MiB on a machine a built-in cluster describes is
//     predicted by `ddpscope allreduce` (the cluster as shipped, the row's forced algorithm)
//     within ±25 %; a row it misses must be flagged `anomalous` in the file, with its reason in
//     `notes` (a cluster its reporter calls degraded, a run with CUDA graphs).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cost/comm_model.h"
#include "sim/cost/latency_fit.h"
#include "tests/sim/cost/cost_test_util.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)
using Json = nlohmann::json;

constexpr double kTolerance = 0.25;
constexpr int64_t kMaxBytes = int64_t{1} << 20;

Json publishedRows() {
  std::ifstream in(std::string(DDPSCOPE_SOURCE_DIR) +
                   "/tests/data/published/nccl_tests_small.json");
  EXPECT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

std::string algoKey(const Json& row) {
  if (!row.contains("forced_algo") || row["forced_algo"].is_null()) return "";
  const std::string a = row["forced_algo"];
  if (a == "Ring") return "ring";
  if (a == "Tree") return "tree";
  if (a == "NVLS") return "nvls";
  if (a == "NVLSTree") return "nvls_tree";
  ADD_FAILURE() << "unknown forced_algo " << a;
  return "";
}

std::string protoKey(const Json& row) {
  if (!row.contains("forced_proto") || row["forced_proto"].is_null()) return "";
  return row["forced_proto"];
}

// The rows of one table: per-size rows, and the summary rows (one time for a range of sizes,
// taken at its smallest size: all are latency-bound).
std::vector<Json> allRows(const Json& doc) {
  std::vector<Json> out(doc["rows"].begin(), doc["rows"].end());
  if (doc.contains("summary_rows")) {
    for (const Json& r : doc["summary_rows"]) {
      if (!r["bytes"].is_null() || !r.contains("bytes_range") || !r["bytes_range"].is_array()) {
        continue;  // no size at all
      }
      Json copy = r;
      copy["bytes"] = r["bytes_range"][0];
      out.push_back(copy);
    }
  }
  return out;
}

bool describedBy(const Json& row, const std::string& cluster) {
  return row["cluster"].is_string() && row["cluster"] == cluster && row["bytes"].is_number() &&
         row["bytes"].get<int64_t>() <= kMaxBytes && row["time_us"].is_number();
}

bool usedInFit(const Json& row) {
  return !row.value("anomalous", false) && row.value("in_fit", true);
}

TimedAllreduce timed(const Json& row) {
  TimedAllreduce t;
  t.id = row["id"];
  const int gpus = row["gpus"];
  const int nodes = row["nodes"];
  t.layout = WorldLayout{nodes, gpus / nodes};
  t.bytes = row["bytes"];
  t.timeUs = row["time_us"];
  t.forcedAlgo = algoKey(row);
  t.forcedProto = protoKey(row);
  return t;
}

// Which cluster's fit a cluster without enough rows of its own starts from.
const std::vector<std::pair<std::string, std::string>>& fitOrder() {
  static const std::vector<std::pair<std::string, std::string>> order = {
      {"dgx-a100", ""},         {"dgx-v100", "dgx-a100"}, {"dgx-h100", "dgx-a100"},
      {"hgx-h200", "dgx-h100"}, {"dgx-b200", "dgx-h100"}, {"gb200-nvl72", "dgx-h100"}};
  return order;
}

std::map<std::string, LatencyFit> fitAll(const Json& doc) {
  std::map<std::string, LatencyFit> fits;
  const std::vector<Json> rows = allRows(doc);
  for (const auto& [name, priorName] : fitOrder()) {
    const LatencyFit prior = priorName.empty() ? LatencyFit{} : fits.at(priorName);
    std::vector<TimedAllreduce> mine;
    for (const Json& r : rows) {
      if (describedBy(r, name) && usedInFit(r)) mine.push_back(timed(r));
    }
    if (mine.empty()) {
      fits[name] = prior;
      continue;
    }
    auto fit = fitLatency(builtin(name), mine, prior);
    EXPECT_TRUE(fit.isOk()) << fit.status().toString();
    if (fit.isOk()) fits[name] = fit->fit;
  }
  return fits;
}

double round3(double v) {
  return std::round(v * 1000) / 1000;
}

TEST(NcclLatencyPublishedTest, BuiltinFitsAreTheFitOfTheRows) {
  const auto fits = fitAll(publishedRows());
  for (const auto& [name, prior] : fitOrder()) {
    SCOPED_TRACE(name);
    const LatencyFit& f = fits.at(name);
    std::printf("%-12s \"base_us\": %.3f, \"intra_step_us\": %.3f, \"inter_step_us\": %.3f\n",
                name.c_str(), f.baseUs, f.intraStepUs, f.interStepUs);
    const ClusterSpec c = builtin(name);
    EXPECT_TRUE(c.measuredLatency.present);
    if (!c.measuredLatency.present) continue;
    EXPECT_NEAR(c.measuredLatency.fit.baseUs, round3(f.baseUs), 1e-9);
    EXPECT_NEAR(c.measuredLatency.fit.intraStepUs, round3(f.intraStepUs), 1e-9);
    EXPECT_NEAR(c.measuredLatency.fit.interStepUs, round3(f.interStepUs), 1e-9);
  }
}

TEST(NcclLatencyPublishedTest, DgxA100HeldOutGpuCounts) {
  const Json doc = publishedRows();
  std::vector<TimedAllreduce> train;
  std::vector<TimedAllreduce> heldOut;
  for (const Json& r : allRows(doc)) {
    if (!describedBy(r, "dgx-a100") || !usedInFit(r)) continue;
    const bool held = r["id"].get<std::string>().rfind("nccltests123-", 0) == 0 && r["gpus"] >= 6;
    (held ? heldOut : train).push_back(timed(r));
  }
  ASSERT_EQ(heldOut.size(), 3u);
  auto fit = fitLatency(builtin("dgx-a100"), train, LatencyFit{});
  ASSERT_TRUE(fit.isOk()) << fit.status().toString();
  EXPECT_TRUE(fit->baseFitted && fit->intraFitted && fit->interFitted);
  ClusterSpec c = builtin("dgx-a100");
  c.measuredLatency.fit = fit->fit;
  for (const TimedAllreduce& t : heldOut) {
    ClusterSpec ring = c;
    ring.nccl.algorithms = {t.forcedAlgo};
    auto model = commModel(ring, t.layout.nodes, t.layout.gpusPerNode);
    ASSERT_NE(model, nullptr);
    const double predicted = model->estimate(Collective::kAllreduce, t.bytes).time.toMicros();
    const double error = (predicted - t.timeUs) / t.timeUs;
    std::printf("held out %-36s measured %6.2f  predicted %6.2f us  %+5.1f %%\n", t.id.c_str(),
                t.timeUs, predicted, 100 * error);
    EXPECT_LE(std::abs(error), kTolerance) << t.id;
  }
}

TEST(NcclLatencyPublishedTest, EveryRowWithinTolerance) {
  const Json doc = publishedRows();
  int checked = 0;
  int missedAsExpected = 0;
  int notDescribed = 0;
  for (const Json& row : allRows(doc)) {
    if (!row["bytes"].is_number() || row["bytes"].get<int64_t>() > kMaxBytes) continue;
    if (!row["cluster"].is_string()) {
      ++notDescribed;  // no built-in describes the machine: `cluster calibrate` covers its log
      continue;
    }
    const TimedAllreduce t = timed(row);
    SCOPED_TRACE(t.id);
    ClusterSpec c = builtin(row["cluster"].get<std::string>());
    if (!t.forcedAlgo.empty()) c.nccl.algorithms = {t.forcedAlgo};
    if (!t.forcedProto.empty()) c.nccl.protocols = {t.forcedProto};
    auto model = commModel(c, t.layout.nodes, t.layout.gpusPerNode);
    ASSERT_NE(model, nullptr);
    const CollectiveEstimate e = model->estimate(Collective::kAllreduce, t.bytes);
    const double predicted = e.time.toMicros();
    const double error = (predicted - t.timeUs) / t.timeUs;
    std::printf(
        "%-40s %-11s %3dx%-2d %8lld B  measured %8.2f  predicted %8.2f us  %+6.1f %%  %s/%s\n",
        t.id.c_str(), row["cluster"].get<std::string>().c_str(), t.layout.nodes,
        t.layout.gpusPerNode, static_cast<long long>(t.bytes), t.timeUs, predicted, 100 * error,
        e.algorithm.c_str(), e.protocol.c_str());
    if (row.value("anomalous", false)) {
      // Flagged in the file with its source's reason (notes): reported, never asserted met.
      EXPECT_FALSE(row.value("notes", std::string()).empty()) << "a flagged row needs its reason";
      if (std::abs(error) > kTolerance) ++missedAsExpected;
    } else {
      EXPECT_LE(std::abs(error), kTolerance)
          << "measured " << t.timeUs << " us, predicted " << predicted << " us";
      ++checked;
    }
  }
  std::printf(
      "%d rows within ±25 %% asserted, %d flagged rows missed, %d rows on "
      "machines no built-in describes\n",
      checked, missedAsExpected, notDescribed);
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace ddpscope::sim
