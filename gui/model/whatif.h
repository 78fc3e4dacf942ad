// What-if simulation for the GUI: settings → the same simulation `ddpscope simulate` runs.
//
// WhatIfSettings holds the model, cluster, world size and the DDP settings the panel offers (a
// ddp::DdpConfig: the bucket cap is always explicit, as the slider sets it). settingValues()
// names them as `ddpscope simulate` and the Python package do, and every run here goes through
// the same request layer (api/simulation_request.h: parseSimulationRequest validates them
// once, runSimulation simulates with the automatic iteration count and the layout of
// --world-size); cliArgs() is the same settings as CLI arguments.
//
// WhatIfRunner re-simulates in the background: request() restarts a short debounce timer;
// when it fires, the latest settings run on a worker thread (QtConcurrent). Requests that
// arrive while a simulation runs are coalesced: only the newest runs next, so the UI always
// converges on the last settings. Each result carries the wall time from the request that
// produced it to the end of the simulation and document build (the panel adds the repaint).
//
// runSweep(): step time and exposed communication over bucket caps × world sizes: `ddpscope
// sweep`'s request (api/sweep_request.h: the settings with the caps and world sizes as its
// axes; on all cores, no trace), with the best (lowest step time) point per world size and
// overall.
//
// runPlan(): `ddpscope plan`'s request (api/plan_request.h: the uniform caps, the exact DP
// over the bucket_cap_mb_list layouts torch 2.15 can build, a full simulation of the chosen one)
// at each world size, with the sweep's caps and the step-time objective; its uniform points come
// from the plans' own sweeps, so the curves and the planned layouts shown together are one
// computation.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/ddp_flags.h"
#include "api/plan_request.h"
#include "api/simulation_request.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "gui/model/trace_document.h"

namespace ddpscope::gui {

// Typical bucket_cap_mb values offered by the slider (and swept by default).
inline constexpr double kTypicalBucketCapsMb[] = {1, 2, 5, 10, 25, 50, 100, 200};

struct WhatIfSettings {
  std::string model = "gpt2-small";  // any spelling models::resolveModel takes
  std::string cluster = "dgx-a100";
  int worldSize = 8;
  ddp::DdpConfig ddp = explicitCap(ddp::DdpConfig::kDefaultBucketCapMb);

  // A default DdpConfig with bucket_cap_mb `mib` given explicitly (the slider's setting).
  static ddp::DdpConfig explicitCap(double mib) {
    ddp::DdpConfig config;
    config.setBucketCapMb(mib);
    return config;
  }

  // These values as the request layer takes them (api::SimulationChoice).
  api::SimulationChoice choice() const;
  // The named settings of the request layer (api::simulationSettings: model, cluster, world size
  // and the DDP settings under their flag names; a switch that is on holds "").
  SettingValues settingValues() const;
  // "simulate" and settingValues() as command-line flags (without --json / --trace): the command
  // that reproduces this what-if.
  std::vector<std::string> cliArgs() const;
  // "gpt2-small · dgx-a100 · 64 ranks · cap 25 MiB"
  std::string describe() const;
  bool operator==(const WhatIfSettings&) const = default;
};

struct WhatIfResult {
  WhatIfSettings settings;
  sim::WorldLayout layout;
  sim::SimSummary summary;
  TraceDocumentPtr document;      // null when the trace was not recorded
  int64_t requestToResultNs = 0;  // request → result (debounce, queueing, simulate, indexing)
  int64_t simulateNs = 0;         // sim::simulate alone
  uint64_t generation = 0;
};
using WhatIfResultPtr = std::shared_ptr<const WhatIfResult>;

// Synchronous: simulate these settings (recording the trace when asked).
StatusOr<WhatIfResult> runWhatIf(const WhatIfSettings& settings, bool recordTrace = true);

class WhatIfRunner : public QObject {
  Q_OBJECT
 public:
  explicit WhatIfRunner(QObject* parent = nullptr);
  ~WhatIfRunner() override;

  void setDebounceMs(int ms) { m_debounce.setInterval(ms); }
  // Schedules a re-simulation of `settings` (debounced, coalesced).
  void request(const WhatIfSettings& settings);
  bool busy() const { return m_running || m_debounce.isActive() || m_pending.has_value(); }
  const WhatIfResultPtr& latest() const { return m_latest; }

 signals:
  void started();
  void resultReady(ddpscope::gui::WhatIfResultPtr result);
  void failed(const QString& message);

 private:
  void launch();

  QTimer m_debounce;
  std::optional<WhatIfSettings> m_pending;
  QElapsedTimer m_pendingSince;  // when the pending request was made
  bool m_running = false;
  uint64_t m_generation = 0;
  WhatIfResultPtr m_latest;
};

struct SweepPoint {
  int worldSize = 0;
  double bucketCapMb = 0;
  Nanos stepTime;
  Nanos exposedComm;
  double overlapPercent = 0;
};

struct SweepResult {
  std::vector<SweepPoint> points;  // world size major, caps in the given order
  std::vector<int> worldSizes;
  std::vector<double> capsMb;
  std::vector<size_t> bestPerWorldSize;  // index into points, one per world size
  size_t best = 0;                       // lowest step time overall
};

StatusOr<SweepResult> runSweep(const WhatIfSettings& base, const std::vector<double>& capsMb,
                               const std::vector<int>& worldSizes);

struct PlanOutcome {
  SweepResult sweep;                   // the uniform caps of every plan (no default points)
  std::vector<sim::PlanResult> plans;  // one per sweep.worldSizes entry
};

// `ddpscope plan`'s request for `base` over the uniform caps `capsMb` at base's world size (its
// bucket cap is ignored: the plan compares the default, the uniform caps and the planned list):
// the model and cluster resolved, the settings validated.
StatusOr<api::PlanRequest> planRequestOf(const WhatIfSettings& base,
                                         const std::vector<double>& capsMb);

// The plan of `input` at each world size: only the layout changes (api::planRequestAtWorldSize);
// the model and cluster are the input's, resolved once for all world sizes.
StatusOr<PlanOutcome> runPlanAt(const api::PlanRequest& input, const std::vector<int>& worldSizes);

// planRequestOf(base at the first world size, capsMb), then runPlanAt over `worldSizes`.
StatusOr<PlanOutcome> runPlan(const WhatIfSettings& base, const std::vector<double>& capsMb,
                              const std::vector<int>& worldSizes);

// `base` with the plan's bucket_cap_mb_list at `worldSize`: the settings whose simulation is
// the plan's full simulation (its timeline is the planned layout's).
WhatIfSettings plannedSettings(const WhatIfSettings& base, int worldSize,
                               const sim::PlanResult& plan);

}  // namespace ddpscope::gui

Q_DECLARE_METATYPE(ddpscope::gui::WhatIfResultPtr)
Q_DECLARE_METATYPE(ddpscope::gui::WhatIfSettings)
