#include "gui/model/whatif.h"

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <map>
#include <mutex>
#include <sstream>

#include "models/zoo.h"
#include "sim/cost/cluster.h"

namespace ddpscope::gui {

namespace {

std::string formatNumber(double value) {
  std::ostringstream out;
  out << value;  // shortest form: 25, 2.5
  return out.str();
}

// Parsed zoo models and clusters, shared across worker threads.
class SpecCache {
 public:
  StatusOr<models::ModelSpec> model(const std::string& name) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_models.find(name);
    if (it != m_models.end()) return it->second;
    StatusOr<models::ModelSpec> spec = models::loadZooModel(name);
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

StatusOr<sim::SimOptions> makeOptions(const WhatIfSettings& s) {
  sim::SimOptions o;
  ddp::DdpConfig& d = o.ddp;
  d.setBucketCapMb(s.bucketCapMb);
  d.findUnusedParameters = s.findUnused;
  d.staticGraph = s.staticGraph;
  d.noSyncPeriod = s.noSyncSteps;
  if (s.commHook != "none") {
    ASSIGN_OR_RETURN(d.commHook.kind, ddp::parseCommHookKind(s.commHook));
  }
  o.iterations = 0;  // automatic, as the CLI without --iterations
  RETURN_IF_ERROR(d.validate());
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
                                   std::to_string(worldSize),
                                   "--bucket-cap-mb",
                                   formatNumber(bucketCapMb)};
  if (findUnused) args.push_back("--find-unused");
  if (staticGraph) args.push_back("--static-graph");
  if (noSyncSteps > 1) {
    args.push_back("--no-sync-steps");
    args.push_back(std::to_string(noSyncSteps));
  }
  if (commHook != "none") {
    args.push_back("--comm-hook");
    args.push_back(commHook);
  }
  return args;
}

std::string WhatIfSettings::describe() const {
  std::ostringstream out;
  out << model << " · " << cluster << " · " << worldSize << " ranks · cap "
      << formatNumber(bucketCapMb) << " MiB";
  if (findUnused) out << " · find_unused";
  if (staticGraph) out << " · static_graph";
  if (noSyncSteps > 1) out << " · no_sync " << noSyncSteps;
  if (commHook != "none") out << " · " << commHook;
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

// ---- sweep ----

StatusOr<SweepResult> runSweep(const WhatIfSettings& base, const std::vector<double>& capsMb,
                               const std::vector<int>& worldSizes) {
  SweepResult out;
  out.capsMb = capsMb;
  out.worldSizes = worldSizes;
  if (capsMb.empty() || worldSizes.empty()) return invalidArgument("sweep: nothing to sweep");
  for (int worldSize : worldSizes) {
    size_t bestHere = out.points.size();
    for (double cap : capsMb) {
      WhatIfSettings s = base;
      s.worldSize = worldSize;
      s.bucketCapMb = cap;
      ASSIGN_OR_RETURN(WhatIfResult r, runWhatIf(s, /*recordTrace=*/false));
      SweepPoint p;
      p.worldSize = worldSize;
      p.bucketCapMb = cap;
      p.stepTime = r.summary.stepTime;
      p.exposedComm = r.summary.exposedComm;
      p.overlapPercent = r.summary.overlapPercent;
      out.points.push_back(p);
      if (out.points[bestHere].stepTime > p.stepTime) bestHere = out.points.size() - 1;
    }
    out.bestPerWorldSize.push_back(bestHere);
  }
  for (size_t i = 0; i < out.points.size(); ++i) {
    if (out.points[i].stepTime < out.points[out.best].stepTime) out.best = i;
  }
  return out;
}

}  // namespace ddpscope::gui
