#include "gui/model/whatif.h"

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <map>
#include <mutex>
#include <sstream>

#include "base/strings.h"
#include "ddp/ddp_settings.h"
#include "models/model_resolver.h"
#include "sim/cost/cluster.h"
#include "sim/engine/sweep.h"

namespace ddpscope::gui {

namespace {

// Parsed zoo models and clusters, shared across worker threads.
class SpecCache {
 public:
  StatusOr<models::ModelSpec> model(const std::string& name) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_models.find(name);
    if (it != m_models.end()) return it->second;
    StatusOr<models::ModelSpec> spec = models::resolveModel(name);
    if (spec.isOk()) m_models.emplace(name, *spec);
    return spec;
  }
  StatusOr<sim::ClusterSpec> cluster(const std::string& name) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_clusters.find(name);
    if (it != m_clusters.end()) return it->second;
    StatusOr<sim::ClusterSpec> spec = sim::loadBuiltinCluster(name);
    if (spec.isOk()) m_clusters.emplace(name, *spec);
    return spec;
  }

 private:
  std::mutex m_mutex;
  std::map<std::string, models::ModelSpec> m_models;
  std::map<std::string, sim::ClusterSpec> m_clusters;
};

SpecCache& specCache() {
  static SpecCache cache;
  return cache;
}

// The GUI's boundary: the settings are validated once here (ddp/ddp_settings.h).
StatusOr<sim::SimOptions> makeOptions(const WhatIfSettings& s) {
  RETURN_IF_ERROR(ddp::validateDdpConfig(s.ddp));
  sim::SimOptions o;
  o.ddp = s.ddp;
  o.iterations = 0;  // automatic, as the CLI without --iterations
  return o;
}

}  // namespace

std::vector<std::string> WhatIfSettings::cliArgs() const {
  std::vector<std::string> args = {"simulate",
                                   "--model",
                                   model,
                                   "--cluster",
                                   cluster,
                                   "--world-size",
                                   std::to_string(worldSize)};
  for (std::string& flag : ddp::ddpSettingsFlags(ddp)) args.push_back(std::move(flag));
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
  ASSIGN_OR_RETURN(models::ModelSpec model, specCache().model(settings.model));
  ASSIGN_OR_RETURN(sim::ClusterSpec cluster, specCache().cluster(settings.cluster));
  ASSIGN_OR_RETURN(sim::WorldLayout layout,
                   sim::makeWorldLayout(cluster, std::nullopt, settings.worldSize));
  ASSIGN_OR_RETURN(sim::SimOptions options, makeOptions(settings));
  options.recordTrace = recordTrace;
  const Nanos t0 = steadyNow();
  ASSIGN_OR_RETURN(sim::SimResult result, sim::simulate(model, cluster, layout, options));
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

// The model, cluster and simulator options of a sweep's or plan's base settings.
struct LoadedBase {
  models::ModelSpec model;
  sim::ClusterSpec cluster;
  sim::SimOptions options;
};

StatusOr<LoadedBase> loadBase(const WhatIfSettings& base) {
  LoadedBase out;
  ASSIGN_OR_RETURN(out.model, specCache().model(base.model));
  ASSIGN_OR_RETURN(out.cluster, specCache().cluster(base.cluster));
  ASSIGN_OR_RETURN(out.options, makeOptions(base));
  return out;
}

}  // namespace

StatusOr<SweepResult> runSweep(const WhatIfSettings& base, const std::vector<double>& capsMb,
                               const std::vector<int>& worldSizes) {
  if (capsMb.empty() || worldSizes.empty()) return invalidArgument("sweep: nothing to sweep");
  ASSIGN_OR_RETURN(const LoadedBase loaded, loadBase(base));
  sim::SweepRequest request;
  request.model = &loaded.model;
  request.cluster = &loaded.cluster;
  request.base = loaded.options;
  request.capsMb = capsMb;
  request.findUnused = {base.ddp.findUnusedParameters};
  for (int worldSize : worldSizes) {
    ASSIGN_OR_RETURN(sim::WorldLayout layout,
                     sim::makeWorldLayout(loaded.cluster, std::nullopt, worldSize));
    request.layouts.push_back(layout);
  }
  ASSIGN_OR_RETURN(const sim::SweepResult swept, sim::runSweep(request));
  SweepResult out;
  out.capsMb = capsMb;
  out.worldSizes = worldSizes;
  appendSweepPoints(swept, out);
  return out;
}

StatusOr<PlanOutcome> runPlan(const WhatIfSettings& base, const std::vector<double>& capsMb,
                              const std::vector<int>& worldSizes) {
  if (capsMb.empty() || worldSizes.empty()) return invalidArgument("plan: nothing to plan");
  ASSIGN_OR_RETURN(const LoadedBase loaded, loadBase(base));
  PlanOutcome out;
  out.sweep.capsMb = capsMb;
  out.sweep.worldSizes = worldSizes;
  for (int worldSize : worldSizes) {
    sim::PlanRequest request;
    request.model = &loaded.model;
    request.cluster = &loaded.cluster;
    request.base = loaded.options;
    request.base.ddp.bucketCapMbList.clear();  // planned
    request.uniformCapsMb = capsMb;
    ASSIGN_OR_RETURN(request.layout, sim::makeWorldLayout(loaded.cluster, std::nullopt, worldSize));
    ASSIGN_OR_RETURN(sim::PlanResult plan, sim::runPlan(request));
    appendSweepPoints(plan.uniform, out.sweep);
    out.plans.push_back(std::move(plan));
  }
  return out;
}

WhatIfSettings plannedSettings(const WhatIfSettings& base, int worldSize,
                               const sim::PlanResult& plan) {
  WhatIfSettings s = base;
  s.worldSize = worldSize;
  s.ddp.bucketCapMbList = plan.layout.capsMib();
  return s;
}

}  // namespace ddpscope::gui
