#include "sim/engine/sweep.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "base/strings.h"
#include "ddp/bucket_plan.h"

namespace ddpscope::sim {
namespace {}  // namespace

SimOptions sweepPointOptions(const SimOptions& base, double capMb, bool findUnused) {
  SimOptions o = base;
  o.ddp.setBucketCapMb(capMb);
  o.ddp.findUnusedParameters = findUnused;
  o.recordTrace = false;
  o.threads = 1;  // the sweep already runs one point per core
  return o;
}

SimOptions sweepPointOptions(const SimOptions& base, const SweepPoint& point) {
  SimOptions o = sweepPointOptions(base, point.capMb, point.findUnused);
  if (point.capDefault) {
    o.ddp.bucketCapMb = ddp::DdpConfig::kDefaultBucketCapMb;
    o.ddp.bucketCapSetByUser = false;
  }
  o.compile = point.compile;
  return o;
}

namespace {

// Whether leaving bucket_cap_mb out gives other bucket limits than passing `capMb` explicitly.
bool defaultDiffersFromExplicit(const ddp::DdpConfig& base, double capMb) {
  ddp::DdpConfig unset = base;
  unset.bucketCapMb = ddp::DdpConfig::kDefaultBucketCapMb;
  unset.bucketCapSetByUser = false;
  ddp::DdpConfig given = base;
  given.setBucketCapMb(capMb);
  return ddp::constructionLimits(unset) != ddp::constructionLimits(given) ||
         ddp::rebuildLimits(unset) != ddp::rebuildLimits(given);
}

}  // namespace

StatusOr<SweepResult> runSweep(const SweepGrid& request) {
  if (request.model == nullptr || request.cluster == nullptr) {
    return invalidArgument("sweep: a model and a cluster are required");
  }
  if (request.layouts.empty() || request.capsMb.empty() || request.findUnused.empty()) {
    return invalidArgument("sweep: nothing to sweep (no world size, bucket cap or find_unused)");
  }
  const std::vector<CompileMode> modes = request.compileModes.empty()
                                             ? std::vector<CompileMode>{request.base.compile}
                                             : request.compileModes;
  SweepResult out;
  for (const WorldLayout& layout : request.layouts) {
    for (bool fu : request.findUnused) {
      for (CompileMode mode : modes) {
        for (double cap : request.capsMb)
          out.points.push_back({layout, cap, fu, false, false, {}, mode});
      }
    }
  }
  const bool defaultBaseline =
      defaultDiffersFromExplicit(request.base.ddp, ddp::DdpConfig::kDefaultBucketCapMb);
  const double baselineCap =
      defaultBaseline ? ddp::DdpConfig::kDefaultBucketCapMb : request.baselineCapMb;
  const bool baselineSwept =
      !defaultBaseline &&
      std::find(request.capsMb.begin(), request.capsMb.end(), baselineCap) != request.capsMb.end();
  if (!baselineSwept) {
    for (const WorldLayout& layout : request.layouts) {
      for (bool fu : request.findUnused) {
        for (CompileMode mode : modes) {
          SweepPoint p{layout, baselineCap, fu, true, defaultBaseline, {}, mode};
          out.points.push_back(p);
        }
      }
    }
  }

  // Simulate every point on the thread pool.
  const size_t total = out.points.size();
  std::vector<Status> statuses(total);
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::mutex progressMutex;
  auto worker = [&] {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= total) return;
      SweepPoint& p = out.points[i];
      auto result = simulate(*request.model, *request.cluster, p.layout,
                             sweepPointOptions(request.base, p), request.compute);
      if (result.isOk()) {
        p.summary = std::move(result->summary);
      } else {
        statuses[i] = result.status();
      }
      const size_t done = finished.fetch_add(1) + 1;
      if (request.progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        request.progress(done, total);
      }
    }
  };
  unsigned threads = request.threads ? request.threads : std::thread::hardware_concurrency();
  threads = std::clamp<unsigned>(threads, 1, static_cast<unsigned>(total));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < total; ++i) {
    if (!statuses[i].isOk()) {
      return statuses[i].withContext("bucket_cap_mb " + formatShortest(out.points[i].capMb) +
                                     ", world size " +
                                     std::to_string(out.points[i].layout.worldSize()));
    }
  }

  // Best per (layout, find_unused, compile mode) among the swept caps, and the baseline's point.
  for (const WorldLayout& layout : request.layouts) {
    for (bool fu : request.findUnused) {
      for (CompileMode mode : modes) {
        std::optional<size_t> best, baseline;
        for (size_t i = 0; i < total; ++i) {
          const SweepPoint& p = out.points[i];
          if (p.layout.worldSize() != layout.worldSize() || p.layout.nodes != layout.nodes ||
              p.findUnused != fu || p.compile != mode) {
            continue;
          }
          const bool isBaseline = defaultBaseline ? p.capDefault : p.capMb == baselineCap;
          if (isBaseline && !baseline) baseline = i;
          if (p.baselineOnly) continue;
          if (!best || p.summary.stepTime < out.points[*best].summary.stepTime) best = i;
        }
        SweepBest b{*best, *baseline, 0};
        const double baseNs = static_cast<double>(out.points[b.baseline].summary.stepTime.count());
        const double bestNs = static_cast<double>(out.points[b.point].summary.stepTime.count());
        b.gainPercent = baseNs > 0 ? 100.0 * (baseNs - bestNs) / baseNs : 0.0;
        out.best.push_back(b);
      }
    }
  }
  return out;
}

}  // namespace ddpscope::sim
