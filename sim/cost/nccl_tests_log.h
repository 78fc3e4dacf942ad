// Reads the result table nccl-tests' all_reduce_perf prints (NVIDIA/nccl-tests, src/common.cu):
//
//   #  Rank  0 Group  0 Pid  1234 on  node-a device  0 [0x07] NVIDIA H100 80GB HBM3
//   #                                 out-of-place                  in-place
//   #  size  count   type  redop  root   time  algbw  busbw #wrong  time  algbw  busbw #wrong
//      8         2  float    sum    -1  31.09   0.00   0.00      0  30.58  0.00   0.00      0
//
// Any sizes, any GPU count; the `root` column (nccl-tests ≥ 2.10) may be absent and `#wrong` may
// read N/A (-c 0) or an old float error. Lines that are not table rows (NCCL INFO output, shell
// prompts, the closing "# Avg bus bandwidth") are skipped; a line that starts like a row (a byte
// count and an element count) but does not parse is an error naming its line. The rank lines give
// the ranks, the hosts (nodes) and the GPU; "NCCL version 2.x.y" lines the version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ddpscope::sim {

struct NcclTestsRow {
  int line = 0;  // 1-based line in the log
  int64_t bytes = 0;
  std::string redop;        // "sum", "prod", ... ("none" for all_gather, broadcast)
  int64_t root = -1;        // the root column (nccl-tests >= 2.10); -1 for allreduce or when absent
  double outOfPlaceUs = 0;  // time columns (µs); 0 when the column is absent
  double outOfPlaceBusbw = 0;  // GB/s
  double inPlaceUs = 0;
  double inPlaceBusbw = 0;
  // The time the calibration uses: out-of-place where present, else in-place.
  double timeUs() const { return outOfPlaceUs > 0 ? outOfPlaceUs : inPlaceUs; }
};

struct NcclTestsLog {
  std::string origin;
  std::string test;         // the first "<name>_perf" the log names ("" when none)
  int ranks = 0;            // "# Rank N ..." lines (0: the log has none)
  int nodes = 0;            // distinct hosts of those lines (0: unknown)
  std::string gpu;          // the device name of rank 0 ("" if not printed)
  std::string ncclVersion;  // "2.18.3" from "NCCL version 2.18.3+cuda12.2" ("" if absent)
  std::vector<NcclTestsRow> rows;
};

StatusOr<NcclTestsLog> parseNcclTestsLog(std::string_view text, const std::string& origin);
StatusOr<NcclTestsLog> loadNcclTestsLog(const std::string& path);

}  // namespace ddpscope::sim
