// The sweep: one simulation per (world layout, find_unused_parameters, compile mode, bucket cap),
// on all cores, with the best cap per (layout, find_unused, compile mode) and its gain over the
// baseline cap. The one implementation behind `ddpscope sweep`, the GUI's sweep chart and the
// sweep benchmark.
//
// Points come out in request order: layouts, then find_unused values, then compile modes, then
// caps. The baseline is PyTorch's default: bucket_cap_mb left out (None), which is 25 MiB but,
// from PyTorch 2.4 on (profile 2.15), keeps a 1 MiB first bucket that an explicit 25 does not.
// When the swept caps have no point equal to it (an explicit 25 under profile 1.13 is; under 2.15
// it is not), it is simulated too, once per (layout, find_unused, compile mode), as extra points
// after the swept ones (baselineOnly, capDefault): they are not candidates for the best. Each
// swept point's options are the base options with its cap (DdpConfig::setBucketCapMb: given by
// the user), find_unused and compile mode set.
//
// Threads take points from a shared counter; results land in their slots, so the output does not
// depend on the thread count or scheduling. Complexity: one simulate() per point.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim {

struct SweepGrid {
  const models::ModelSpec* model = nullptr;
  const ClusterSpec* cluster = nullptr;
  const ComputeModel* compute = nullptr;  // null = the cluster's roofline (simulate())
  SimOptions base;                        // recordTrace is ignored: sweeps record no trace
  std::vector<WorldLayout> layouts;
  std::vector<double> capsMb;
  std::vector<bool> findUnused = {false};
  std::vector<CompileMode> compileModes;  // empty: base.compile only
  double baselineCapMb = 25;  // ignored when the profile tells the default from an explicit 25
  unsigned threads = 0;       // 0 = std::thread::hardware_concurrency()
  // Called after each finished point with (finished, total), from the worker threads but
  // serialized.
  std::function<void(size_t finished, size_t total)> progress;
};

struct SweepPoint {
  WorldLayout layout;
  double capMb = 0;
  bool findUnused = false;
  bool baselineOnly = false;
  bool capDefault = false;  // bucket_cap_mb left out (None): PyTorch's default, capMb = 25
  SimSummary summary;
  CompileMode compile = CompileMode::kNone;
};

struct SweepBest {
  size_t point = 0;        // the lowest steady step time among the swept caps
  size_t baseline = 0;     // the baseline cap's point
  double gainPercent = 0;  // 100 · (baseline − best) / baseline step time (negative: slower)
};

struct SweepResult {
  std::vector<SweepPoint> points;
  std::vector<SweepBest> best;  // one per (layout, find_unused, compile mode), in request order
};

// The options of one point.
SimOptions sweepPointOptions(const SimOptions& base, double capMb, bool findUnused);
// The same with the point's compile mode.
SimOptions sweepPointOptions(const SimOptions& base, const SweepPoint& point);

// Errors: an empty model, cluster, layout or cap list (InvalidArgument); a failing point's error
// with "bucket_cap_mb X, world size W" as context.
StatusOr<SweepResult> runSweep(const SweepGrid& request);

}  // namespace ddpscope::sim
