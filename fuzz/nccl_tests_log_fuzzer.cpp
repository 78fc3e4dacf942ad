// Fuzz target: the nccl-tests all_reduce_perf log reader and `cluster calibrate --nccl-tests`
// (sim/cost/nccl_tests_log.h, sim/cost/latency_fit.h). An accepted log has rows of positive
// sizes and times, each with its line; a calibration that succeeds writes a cluster the loader
// reads back and checks every row of the log with a finite, non-negative prediction (the measured
// curve's) and model time; an accepted log's sizes increase.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "sim/cost/cluster.h"
#include "sim/cost/latency_fit.h"
#include "sim/cost/nccl_tests_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  auto log = sim::parseNcclTestsLog(fuzz::asText(data, size), "fuzz-ar.txt");
  if (!log.isOk()) {
    FUZZ_CHECK(!log.status().message().empty(), "an error without a message");
    return 0;
  }
  FUZZ_CHECK(!log->rows.empty(), "an accepted log without rows");
  for (size_t i = 0; i < log->rows.size(); ++i) {
    const sim::NcclTestsRow& r = log->rows[i];
    FUZZ_CHECK(r.bytes > 0 && r.timeUs() > 0 && r.line > 0, "a row without size, time or line");
    FUZZ_CHECK(i == 0 || r.bytes > log->rows[i - 1].bytes, "sizes that do not increase");
  }
  sim::NcclTestsCalibrationOptions options;
  if (log->ranks < 2) options.ranks = 8;  // a log without rank lines: calibrate it as 8 GPUs
  auto cal = sim::calibrateFromNcclTests({*log}, std::string(sim::builtinClusterJson("dgx-h100")),
                                         "cluster:dgx-h100", options);
  if (!cal.isOk()) {
    FUZZ_CHECK(!cal.status().message().empty(), "a calibration error without a message");
    return 0;
  }
  FUZZ_CHECK(sim::parseClusterJson(cal->jsonText, "calibrated").isOk(),
             "the calibrated cluster does not load");
  FUZZ_CHECK(cal->logs.size() == 1 && cal->logs[0].checks.size() == log->rows.size(),
             "a row of the log without its check");
  for (const sim::CalibrationCheck& c : cal->logs[0].checks) {
    FUZZ_CHECK(std::isfinite(c.predictedUs) && c.predictedUs >= 0, "a bad prediction");
    FUZZ_CHECK(std::isfinite(c.modelledUs) && c.modelledUs >= 0, "a bad model time");
  }
  return 0;
}
