#include "gui/model/whatif.h"

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <sstream>

#include "api/cluster_settings.h"
#include "api/plan_request.h"
#include "api/simulation_request.h"
#include "api/sweep_request.h"
#include "base/strings.h"

namespace ddpscope::gui {

namespace {

// The request these values make, built typed (no text in the middle): the model and cluster
// resolved, the DDP settings validated, the rest as `ddpscope simulate` defaults them.
StatusOr<api::SimulationRequest> requestOf(const WhatIfSettings& s) {
  return api::simulationRequestOf(s.choice());
}

}  // namespace

api::SimulationChoice WhatIfSettings::choice() const {
  return {model, cluster, worldSize, ddp};
}

SettingValues WhatIfSettings::settingValues() const {
  return api::simulationSettings(choice());
}

std::vector<std::string> WhatIfSettings::cliArgs() const {
  std::vector<std::string> args = {"simulate"};
  const SettingValues values = settingValues();
  for (const auto& [name, value] : values.values()) {
    args.push_back("--" + name);
    if (!value.empty()) args.push_back(value);
  }
  return args;
}

std::string WhatIfSettings::describe() const {
  std::ostringstream out;
  out << model << " · " << cluster << " · " << worldSize << " ranks · ";
  if (ddp.bucketCapMbList.empty()) {
    out << "cap " << formatShortest(ddp.bucketCapMb) << " MiB";
  } else {
    out << "caps [";
    for (size_t i = 0; i < ddp.bucketCapMbList.size(); ++i) {
      out << (i > 0 ? ", " : "") << ddp.bucketCapMbList[i];
    }
    out << "] MiB";
  }
  if (ddp.findUnusedParameters) out << " · find_unused";
  if (ddp.staticGraph) out << " · static_graph";
  if (ddp.noSyncPeriod > 1) out << " · no_sync " << ddp.noSyncPeriod;
  if (ddp.commHook.present()) out << " · " << ddp::commHookKindName(ddp.commHook.kind);
  return out.str();
}

StatusOr<WhatIfResult> runWhatIf(const WhatIfSettings& settings, bool recordTrace) {
  ASSIGN_OR_RETURN(api::SimulationRequest request, requestOf(settings));
  ASSIGN_OR_RETURN(sim::WorldLayout layout,
                   sim::makeWorldLayout(request.cluster, std::nullopt, settings.worldSize));
  request.options.recordTrace = recordTrace;
  // The panel shows no DDP overhead over plain training: spare the plain simulation a host
  // profile with per-op costs would run on every change.
  request.options.simulatePlain = false;
  const Nanos t0 = steadyNow();
  ASSIGN_OR_RETURN(sim::SimResult result, api::runSimulation(request, layout));
  WhatIfResult out;
  out.simulateNs = (steadyNow() - t0).count();
  out.settings = settings;
  out.layout = layout;
  out.summary = std::move(result.summary);
  if (recordTrace) {
    out.document = TraceDocument::build(std::move(result.timeline), settings.describe());
  }
  return out;
}

// ---- WhatIfRunner ----

WhatIfRunner::WhatIfRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<WhatIfResultPtr>();
  m_debounce.setSingleShot(true);
  m_debounce.setInterval(15);
  connect(&m_debounce, &QTimer::timeout, this, [this]() {
    if (!m_running) launch();
  });
}

WhatIfRunner::~WhatIfRunner() = default;

void WhatIfRunner::request(const WhatIfSettings& settings) {
  if (!m_pending) m_pendingSince.start();
  m_pending = settings;
  m_debounce.start();
}

void WhatIfRunner::launch() {
  if (!m_pending) return;
  WhatIfSettings settings = *m_pending;
  m_pending.reset();
  int64_t waitedNs = m_pendingSince.nsecsElapsed();
  m_running = true;
  uint64_t generation = ++m_generation;
  emit started();
  using Result = std::shared_ptr<StatusOr<WhatIfResult>>;
  auto* watcher = new QFutureWatcher<Result>(this);
  QElapsedTimer clock;
  clock.start();
  connect(watcher, &QFutureWatcher<Result>::finished, this,
          [this, watcher, waitedNs, clock, generation]() {
            Result result = watcher->result();
            watcher->deleteLater();
            m_running = false;
            if (result->isOk()) {
              auto out = std::make_shared<WhatIfResult>(std::move(*result).value());
              out->requestToResultNs = waitedNs + clock.nsecsElapsed();
              out->generation = generation;
              m_latest = out;
              // Published even when a newer request waits (the user sees progress); the
              // newest settings run next.
              emit resultReady(out);
            } else {
              emit failed(QString::fromStdString(result->status().message()));
            }
            if (m_pending && !m_debounce.isActive()) launch();
          });
  watcher->setFuture(QtConcurrent::run([settings]() {
    return std::make_shared<StatusOr<WhatIfResult>>(runWhatIf(settings, true));
  }));
}

// ---- sweep and plan ----

namespace {

// Appends the points of one simulator sweep (its default-only baselines left out) and the best
// point of each of its layouts.
void appendSweepPoints(const sim::SweepResult& swept, SweepResult& out) {
  std::vector<size_t> slot(swept.points.size(), 0);  // sim point → index into out.points
  for (size_t i = 0; i < swept.points.size(); ++i) {
    const sim::SweepPoint& p = swept.points[i];
    if (p.baselineOnly) continue;
    slot[i] = out.points.size();
    out.points.push_back({p.layout.worldSize(), p.capMb, p.summary.stepTime, p.summary.exposedComm,
                          p.summary.overlapPercent});
  }
  for (const sim::SweepBest& b : swept.best) out.bestPerWorldSize.push_back(slot[b.point]);
  out.best = 0;
  for (size_t i = 0; i < out.points.size(); ++i) {
    if (out.points[i].stepTime < out.points[out.best].stepTime) out.best = i;
  }
}

}  // namespace

StatusOr<SweepResult> runSweep(const WhatIfSettings& base, const std::vector<double>& capsMb,
                               const std::vector<int>& worldSizes) {
  if (capsMb.empty() || worldSizes.empty()) return invalidArgument("sweep: nothing to sweep");
  // `ddpscope sweep`'s request: the base's settings, with its cap and find_unused as the axes.
  ASSIGN_OR_RETURN(const api::SweepRequest plan,
                   api::sweepRequestOf(base.choice(), capsMb, worldSizes));
  ASSIGN_OR_RETURN(const sim::SweepResult swept, api::runSweepRequest(plan, nullptr));
  SweepResult out;
  out.capsMb = capsMb;
  out.worldSizes = worldSizes;
  appendSweepPoints(swept, out);
  return out;
}

StatusOr<api::PlanRequest> planRequestOf(const WhatIfSettings& base,
                                         const std::vector<double>& capsMb) {
  WhatIfSettings planned = base;
  planned.ddp.bucketCapMbList.clear();  // what the plan chooses
  return api::planRequestOf(planned.choice(), capsMb);
}

StatusOr<PlanOutcome> runPlanAt(const api::PlanRequest& input, const std::vector<int>& worldSizes) {
  if (input.search.uniformCapsMb.empty() || worldSizes.empty()) {
    return invalidArgument("plan: nothing to plan");
  }
  PlanOutcome out;
  out.sweep.capsMb = input.search.uniformCapsMb;
  out.sweep.worldSizes = worldSizes;
  for (int worldSize : worldSizes) {
    ASSIGN_OR_RETURN(const api::PlanRequest atSize, api::planRequestAtWorldSize(input, worldSize));
    ASSIGN_OR_RETURN(sim::PlanResult plan, api::runPlanRequest(atSize));
    appendSweepPoints(plan.uniform, out.sweep);
    out.plans.push_back(std::move(plan));
  }
  return out;
}

StatusOr<PlanOutcome> runPlan(const WhatIfSettings& base, const std::vector<double>& capsMb,
                              const std::vector<int>& worldSizes) {
  if (capsMb.empty() || worldSizes.empty()) return invalidArgument("plan: nothing to plan");
  WhatIfSettings first = base;
  first.worldSize = worldSizes.front();
  ASSIGN_OR_RETURN(const api::PlanRequest input, planRequestOf(first, capsMb));
  return runPlanAt(input, worldSizes);
}

WhatIfSettings plannedSettings(const WhatIfSettings& base, int worldSize,
                               const sim::PlanResult& plan) {
  WhatIfSettings s = base;
  s.worldSize = worldSize;
  s.ddp.bucketCapMbList = plan.layout.capsMib();
  return s;
}

}  // namespace ddpscope::gui
