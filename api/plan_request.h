// PlanRequest: the settings of `ddpscope plan` (the sweep's simulation settings narrowed to one
// layout, plus "torch" and "objective"), parsed from named settings (base/setting_values.h); its
// run (sim/engine/plan.h runPlan) and the result's JSON (docs/JSON.md "plan"). The CLI prints the
// result as text or this JSON; the Python package's plan() returns the JSON.
//
// From a recorded run ("from-trace": a `ddpscope run` trace, the Python recorder's, or a PyTorch
// profiler trace after `ddpscope import-torch`): the request is replay's (parseSimulationRequest
// with the trace): the trace's model, its measured per-layer compute and copy costs, cpu-mpi
// calibrated on its own collectives unless a cluster is given, its per-rank batch and inputs, its
// DDP settings (the given flags change them; the caps are planned) and, unless --nodes or
// --world-size is given, its world size.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/simulation_request.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "sim/engine/plan.h"

namespace ddpscope::api {

struct PlanRequest {
  SimulationRequest request;  // model, cluster, DDP settings (the profile is the torch version)
  sim::PlanSearch search;     // layout, caps, objective; its pointers are set by runPlanRequest
  // With "from-trace": the recorded run's step time as measured and as replayed at its own settings
  // (replay::predictStep), so the plan's numbers can be judged against the run's.
  bool fromTrace = false;
  Nanos measuredStep;
  Nanos replayedStep;
  // The run at its own settings, unscaled (replayedStep = its stepTime × rankMaxFactor), and the
  // run's slowest-rank factor: the candidates' predictions are scaled by it too.
  sim::SimSummary replayedSummary;
  double rankMaxFactor = 1;
};

// One DDP layout worth measuring in the job (ddpscope.torch.tune measures them; `plan` prints
// them as not measured). Its DDP keyword arguments are the run's own but for these.
struct PlanCandidate {
  std::string label;                // "current", "default", "bucket_cap_mb=5", "planned list", ...
  bool current = false;             // the run's own settings (without a trace: the default)
  std::optional<double> capMb;      // bucket_cap_mb; none = left out (the default) or a list
  std::vector<int64_t> capListMib;  // bucket_cap_mb_list (torch 2.15), empty otherwise
  bool gradientAsBucketView = false;
  bool staticGraph = false;
  Nanos predictedStep;  // steady step, scaled by the run's slowest-rank factor
  std::vector<int64_t> bucketBytes;
  std::string kwargs;  // "bucket_cap_mb=5, gradient_as_bucket_view=True" ("" = as DDP's defaults)
};

inline constexpr int kDefaultPlanCandidates = 3;

// The current settings first, then up to `keep` other layouts by predicted step time: every
// uniform cap of the sweep (the default included), the planned bucket_cap_mb_list (2.15) and the
// recommendation with each flag that helps. Layouts that build the same buckets with the same
// flags are measured once (the first named in that order, the current settings first). When the
// run's own settings are not PyTorch's default layout, the default stays a candidate even past
// `keep`: a prediction that cannot tell layouts apart must not drop the one most jobs run.
std::vector<PlanCandidate> planCandidates(const PlanRequest& input, const sim::PlanResult& result,
                                          int keep = kDefaultPlanCandidates);
nlohmann::json candidatesJson(const std::vector<PlanCandidate>& candidates);

// "from-trace", then simulationSettingList(/*sweep=*/true) with "nodes", "world-size",
// "bucket-cap-mb", "find-unused" and "compile" described as plan reads them, then "torch" and
// "objective".
std::vector<SettingSpec> planSettingList();

// Parses planSettingList()'s settings (names are not checked here; see checkSettingNames) and,
// with "from-trace", loads the run and replays it at its own settings. Errors name the flag
// ("--torch-version 1.5: plan supports torch 1.13 and 2.15") or the trace.
StatusOr<PlanRequest> parsePlanRequest(const SettingValues& values);

// The plan a front end holding typed values asks for (as parsePlanRequest reads
// sweepSettings(choice, capsMb)): the uniform caps `capsMb` (positive, at least one) at choice's
// world size and DDP settings; the model and cluster are resolved once, no text is parsed.
StatusOr<PlanRequest> planRequestOf(const SimulationChoice& choice,
                                    const std::vector<double>& capsMb);

// The same plan at `worldSize` ranks (a layout of the input's cluster, as --world-size makes it):
// the model, cluster, settings and, with a trace, its own-settings replay are the input's, not
// read again — a plan over several world sizes resolves the model and cluster once.
StatusOr<PlanRequest> planRequestAtWorldSize(PlanRequest input, int worldSize);

// runPlan on the input's model, cluster and compute model.
StatusOr<sim::PlanResult> runPlanRequest(const PlanRequest& input);

// {"model", "cluster", "nodes", "world_size", "torch", "objective", "workload", "default",
// "best_uniform", "planned" (null without bucket_cap_mb_list), "flags", "recommend_list",
// "ddp_kwargs", "candidates" (planCandidates: {"label", "current", "ddp_kwargs" (an object),
// "kwargs" (its text), "predicted_step_ns", "num_buckets", "bucket_bytes"}), "trace" (null
// without: {"path", "measured_step_ns", "replayed_step_ns", "run_settings"})}.
nlohmann::json planJson(const PlanRequest& input, const sim::PlanResult& result);

}  // namespace ddpscope::api
