// Fits a cluster's measured NCCL latency (ClusterSpec::MeasuredLatency) and bandwidth to timed
// all_reduce_perf rows, and writes the calibrated cluster (`ddpscope cluster calibrate
// --nccl-tests`, ddpscope.cluster_calibrate in Python).
//
// The model being fitted: a call's time is base + intra-node steps × intra_step + inter-node
// steps × inter_step (the latency) plus the tuner's bytes / algBw (the bandwidth part), for the
// (algorithm, protocol) NCCL's tuner picks at that size and layout. Steps are counted as NCCL's
// tuner counts them (NcclCommModel: ring allreduce 2(n−1), 2(nodes−1) of them across nodes).
//
// fitLatency: weighted least squares on the latency-bound rows (the bandwidth part at most a
// quarter of the measured time), residuals relative to the measured latency. A term the rows cannot
// tell apart from the others (one GPU count: base and intra_step move together; one node: no
// inter_step) is taken from `prior` and reported as such. docs/spec/nccl-latency.md.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/nccl_tests_log.h"

namespace ddpscope::sim {

// One measured allreduce time on a layout, optionally with NCCL_ALGO / NCCL_PROTO forced.
struct TimedAllreduce {
  std::string id;  // for messages
  WorldLayout layout;
  int64_t bytes = 0;
  double timeUs = 0;
  std::string forcedAlgo;   // "ring", "tree", "nvls", "nvls_tree" or ""
  std::string forcedProto;  // "LL", "LL128", "Simple" or ""
};

struct LatencyFitResult {
  LatencyFit fit;
  bool baseFitted = false;  // false: from the prior
  bool intraFitted = false;
  bool interFitted = false;
  int rowsUsed = 0;     // latency-bound rows that entered the fit
  int rowsSkipped = 0;  // rows whose bandwidth part is over a quarter of their time
};

// `cluster` gives the tuner (pick, steps, algBw); its own measured_latency is ignored.
StatusOr<LatencyFitResult> fitLatency(const ClusterSpec& cluster,
                                      const std::vector<TimedAllreduce>& rows,
                                      const LatencyFit& prior);

struct NcclTestsCalibrationOptions {
  std::string name;          // the new cluster's name (default: BASE-calibrated)
  std::optional<int> ranks;  // when the log has no rank lines
  std::optional<int> nodes;  // when the log has no rank lines
  std::string forcedAlgo;    // NCCL_ALGO of the run ("ring", ...): the fit's pick; "" = tuner
};

struct CalibrationCheck {
  int64_t bytes = 0;
  int line = 0;
  double measuredUs = 0;
  // The calibrated cluster as simulations use it: at the log's layout its measured curve.
  double predictedUs = 0;
  double errorPercent = 0;  // (predicted − measured) / measured
  // The fitted model alone (latency, bandwidth; no curve): what other layouts build on.
  double modelledUs = 0;
  double modelErrorPercent = 0;
  std::string algorithm;  // the model's pick
  std::string protocol;
};

// One log of a calibration: its layout, its rows against the calibrated cluster, and the sizes
// where the model disagrees with it.
struct CalibratedLog {
  NcclTestsLog log;
  WorldLayout layout;
  std::vector<CalibrationCheck> checks;  // every row of the log
  std::vector<std::string> notes;        // regions the model does not follow (knees)
};

struct NcclTestsCalibration {
  WorldLayout layout;  // of the log with the most ranks (where the graph speeds are scaled)
  LatencyFitResult latency;
  // Measured over the base cluster's bandwidth at the largest sizes (1: not fitted): of the NIC
  // (inter_node.nic_Gbps; the logs across nodes) and of the intra-node link (NVLink's link speed,
  // or on PCIe nodes the tuner's graph speeds; the single-node logs). bandwidthScale is the one of
  // the widest log's kind.
  double nicScale = 1;
  double linkScale = 1;
  double bandwidthScale = 1;
  int bandwidthRows = 0;  // rows the bandwidth fit used (each log's 3 largest >= 64 MiB)
  std::vector<CalibratedLog> logs;
  std::vector<std::string> notes;
  std::string jsonText;  // the calibrated cluster (FORMAT.md), pretty-printed
  ClusterSpec spec;      // jsonText parsed back
};

// Several logs of one cluster (different world sizes or nodes, one per layout) are fitted
// together: the latency on the latency-bound rows of all of them (so that world sizes separate
// the base from the per-step cost), the bandwidth on each one's largest sizes; every log's
// curve goes into the cluster's measured_allreduce. `baseJson`: the base cluster's JSON (a
// built-in's or a file's); it must time NCCL.
StatusOr<NcclTestsCalibration> calibrateFromNcclTests(const std::vector<NcclTestsLog>& logs,
                                                      const std::string& baseJson,
                                                      const std::string& baseOrigin,
                                                      const NcclTestsCalibrationOptions& options);

// `ddpscope cluster calibrate --json`'s document (without the cluster itself): the logs, the fit,
// the notes and, per log, the checks.
nlohmann::json ncclTestsCalibrationJson(const NcclTestsCalibration& cal);

}  // namespace ddpscope::sim
