// ReplayReport: `ddpscope replay`'s computation from named settings (base/setting_values.h): a
// measured run re-simulated with its measured per-layer compute, first at the run's own settings
// (measured vs replayed step time), then, when any what-if setting is given, with those settings
// changed. The CLI prints it as text or replayJson; the Python package's replay() returns the
// JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/simulation_request.h"
#include "base/nanos.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "sim/cost/host_profile.h"
#include "sim/replay/replay.h"

namespace ddpscope::api {

// "from-trace" (the measured run, required), "unprofiled-step-ms" and
// simulationSettingList(false, /*computeFrom=*/false).
std::vector<SettingSpec> replaySettingList();

struct ReplayReport {
  std::string trace;                // the measured run's path
  SimulationRequest request;        // measured compute; the run's DDP settings changed by the given
  sim::replay::StepPrediction own;  // the replay at the run's own settings
  Nanos measuredStep;               // the run's median step
  double ownErrorPercent = 0;       // (own.step - measured) / measured, in %
  // Each measured step replayed on its own (replay::oneIteration: that step's layer times, tail
  // and collectives), at the run's own settings; empty with one measured step. The replay above
  // runs one step from the medians of every part, which a host that stalls the forward of some
  // steps and the backward of others makes longer than its median step; these do not.
  std::vector<Nanos> stepByStep;      // per measured iteration, in profile order
  Nanos stepByStepMedian;             // their median
  double stepByStepErrorPercent = 0;  // (stepByStepMedian - measured) / measured, in %
  double rankMaxFactor = 1;           // the run's slowest-rank factor
  // The what-if (any DDP setting or kWhatIf setting given): its options, layout and result.
  bool whatIf = false;
  sim::SimOptions whatIfOptions;
  sim::WorldLayout whatIfLayout;
  std::optional<sim::SimResult> whatIfResult;  // also set without a what-if when recordTrace
  double whatIfVsMeasuredPercent = 0;
  // The what-if's kernels carried to another GPU or precision than the trace's
  // (KernelCarry::describe); empty when they are used as measured. The run's own settings
  // always replay on the traced GPU.
  std::string carried;

  // The host lane, from the host facts of a GPU trace imported with --model
  // (sim/replay/trace_host_facts.h): each layer's kernels as measured, the host's per-event
  // costs as the trace measured them (sim/replay/host_fit.h). `profiled`: at the run's own
  // settings with the host as profiled (against the measured step); `unprofiled`: the same with
  // the profiler's own cost per event and per module call removed (the run without the
  // profiler), at the run's own settings and at the what-if's. The profiler's cost comes from
  // the host profile given (--host-profile, or the cluster's) when it has one, else from the
  // built-in h100-torch211 (not calibrated for this machine: `profilerCalibrated` false).
  struct HostLane {
    Nanos profiled, unprofiled, unprofiledPlain;
    double profiledErrorPercent = 0;
    std::optional<Nanos> whatIfUnprofiled;
    // The unprofiled host's own work per step by phase (SimSummary::hostWork), at the run's own
    // settings and in the what-if: what the GPU kit's host_ms measures.
    sim::HostPhaseWork unprofiledHostWork;
    std::optional<sim::HostPhaseWork> whatIfUnprofiledHostWork;
    sim::HostProfile profile;  // the unprofiled per-event costs read from the trace
    std::string profilerFrom;  // the host profile the profiler's costs came from
    bool profilerCalibrated = false;
    int steps = 0;  // profiled steps the facts cover
  };
  std::optional<HostLane> hostLane;
  // --unprofiled-step-ms: the job's step measured without the profiler, at the trace's
  // settings; the host lane's profiler cost per event is then fitted on this trace so that its
  // unprofiled step meets it (profilerFrom "a fit to --unprofiled-step-ms X", calibrated).
  std::optional<double> unprofiledStepMs;
  std::vector<std::string> notes;  // why there is no host lane (a GPU trace); what a what-if
                                   // calibrated on this run alone could not pin down
};

// `recordTrace`: keep the what-if simulation's timeline (simulated even without a what-if).
StatusOr<ReplayReport> runReplay(const SettingValues& values, bool recordTrace);

// {"trace", "model", "world_size", "run_settings", "workload", "cluster",
// "measured_iterations", "measured_step_ms", "replayed_step_ms", "replay_error_percent",
// "step_by_step" (two or more measured steps: replayed_step_ms per step, median_ms,
// error_percent), "rank_max_factor", "what_if" (simSummaryJson + "vs_measured_percent", with a
// what-if), "host_lane" (with host facts: profiled_step_ms, profiled_error_percent,
// unprofiled_step_ms, unprofiled_plain_step_ms, what_if_unprofiled_step_ms, unprofiled_host_work_ms
// and what_if_unprofiled_host_work_ms ({forward, backward, optimizer, total}), profiler_from,
// profiler_calibrated, steps, host_profile), "kernels_carried" (ReplayReport::carried, null
// when as measured), "notes"}.
nlohmann::json replayJson(const ReplayReport& report);

}  // namespace ddpscope::api
