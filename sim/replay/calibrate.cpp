#include "sim/replay/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "base/median.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/comm_model.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_compute_model.h"

namespace ddpscope::sim::replay {
namespace {

struct CommPoint {
  double steps = 0;
  double x = 0;  // bytes term
  double tUs = 0;
  int64_t bytes = 0;
};

constexpr int64_t kBaseIdentifiedBelowBytes = 4 * 1024 * 1024;

std::optional<CommPoint> commPoint(const CollectiveSample& c, int n) {
  const double dn = n;
  const double s = static_cast<double>(c.bytes);
  CommPoint p;
  p.bytes = c.bytes;
  p.tUs = static_cast<double>(c.duration.count()) / 1e3;
  switch (c.category) {
    case traces::Category::kAllreduce:
    case traces::Category::kUsedMapAllreduce:
      p.steps = 2 * (dn - 1);
      p.x = 2 * (dn - 1) / dn * s;
      return p;
    case traces::Category::kAllgather:
    case traces::Category::kReduceScatter:
      p.steps = dn - 1;
      p.x = (dn - 1) / dn * s;
      return p;
    case traces::Category::kBroadcast:
      p.steps = dn - 1;
      p.x = s;
      return p;
    default:
      return std::nullopt;
  }
}

const char* sizeRange(int64_t bytes) {
  if (bytes < 64 * 1024) return "< 64 KiB";
  if (bytes < 4 * 1024 * 1024) return "64 KiB - 4 MiB";
  return ">= 4 MiB";
}

}  // namespace

StatusOr<AlphaBetaFit> fitAlphaBeta(const std::vector<ProfileRef>& runs) {
  std::vector<CommPoint> points;
  int partialRuns = 0;
  for (const ProfileRef& r : runs) {
    // Its collectives hold the wait for the missing ranks, which the fit would read as a slow
    // network: left out (partialRunsNote).
    if (r.profile->someRanksOnly()) {
      ++partialRuns;
      continue;
    }
    if (r.profile->collectivesWithUnknownBytes > 0) {  // never fit to unknown sizes
      return invalidArgument(
          r.profile->origin + ": " + std::to_string(r.profile->collectivesWithUnknownBytes) +
          " collective(s) have no message size (a PyTorch profiler trace without "
          "record_shapes): no cost model is fitted to unknown sizes; re-import with "
          "--model and the job's DDP flags (bucket sizes from the bucket plan), "
          "or profile with record_shapes=True");
    }
    const int n = r.profile->settings.worldSize;
    if (n < 2) continue;
    bool anyMeasured = false;
    for (const CollectiveSample& c : r.profile->collectives) anyMeasured |= c.measured;
    for (const CollectiveSample& c : r.profile->collectives) {
      if (anyMeasured && !c.measured) continue;
      if (auto p = commPoint(c, n)) points.push_back(*p);
    }
  }
  if (points.empty()) {
    AlphaBetaFit none;
    none.partialRuns = partialRuns;
    return invalidArgument(
        "no collectives to fit: every run has one rank or no collective spans with a 'bytes' "
        "arg (record runs with --nproc ≥ 2)" +
        (partialRuns > 0 ? "; " + partialRunsNote(none) : std::string()));
  }
  // Two regimes: α from the latency-bound collectives (< 64 KiB: the median of t / steps), β
  // from the bandwidth-bound ones (≥ 64 KiB: least squares of t − α·steps on x through the
  // origin). A joint least squares lets the large, contended bucket allreduces inflate α to
  // milliseconds, which then overcharges every small collective (the used-map allreduce). Runs
  // without small collectives fall back to the joint fit; α < 0 is refitted with α = 0.
  std::vector<double> latency;
  for (const CommPoint& p : points) {
    if (p.bytes < kAlphaBetaBaseMinBytes && p.steps > 0) latency.push_back(p.tUs / p.steps);
  }
  double alpha = 0, k = 0, base = 0;
  bool haveAlpha = false;
  if (!latency.empty()) {
    alpha = median(latency);
    haveAlpha = true;
    // The bandwidth regime: t − α·steps = base + k·x, least squares with an intercept (the
    // per-call cost, AlphaBetaSpec::baseUs) when the intercept is identified — at least two
    // different sizes under 4 MiB, where a fixed cost is a sizable part of the time (fitted on
    // large messages alone it is their noise extrapolated to zero) — and ≥ 0; else through the
    // origin.
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    std::set<int64_t> smallSizes;
    for (const CommPoint& p : points) {
      if (p.bytes < kAlphaBetaBaseMinBytes) continue;
      if (p.bytes < kBaseIdentifiedBelowBytes) smallSizes.insert(p.bytes);
      const double y = p.tUs - alpha * p.steps;
      n += 1, sx += p.x, sy += y, sxx += p.x * p.x, sxy += p.x * y;
    }
    const double det = n * sxx - sx * sx;
    if (smallSizes.size() >= 2 && det > 1e-9 * n * sxx) {
      k = (n * sxy - sx * sy) / det;
      base = (sy - k * sx) / n;
    }
    if (base <= 0 || k <= 0) {
      base = 0;
      k = sxx > 0 ? sxy / sxx : 0;
    }
    if (k <= 0) haveAlpha = false;
  }
  if (!haveAlpha) {
    base = 0;
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    for (const CommPoint& p : points) {
      a11 += p.steps * p.steps, a12 += p.steps * p.x, a22 += p.x * p.x;
      b1 += p.steps * p.tUs, b2 += p.x * p.tUs;
    }
    const double det = a11 * a22 - a12 * a12;
    alpha = 0, k = 0;
    if (det > 1e-12 * a11 * a22) {
      alpha = (b1 * a22 - b2 * a12) / det;
      k = (a11 * b2 - a12 * b1) / det;
    }
    if (det <= 1e-12 * a11 * a22 || alpha < 0 || k <= 0) {
      alpha = 0;
      k = a22 > 0 ? b2 / a22 : 0;
      if (k <= 0) {
        // Only empty messages: latency alone.
        alpha = a11 > 0 ? b1 / a11 : 0;
        k = 1e-9;
      }
    }
  }
  AlphaBetaFit fit;
  fit.partialRuns = partialRuns;
  std::set<int64_t> largeSizes;
  for (const CommPoint& p : points) {
    if (p.bytes >= kAlphaBetaBaseMinBytes) largeSizes.insert(p.bytes);
  }
  fit.largeSizes = static_cast<int>(largeSizes.size());
  if (largeSizes.size() == 1) fit.largeSize = *largeSizes.begin();
  fit.alphaUs = alpha;
  fit.betaGBps = 1.0 / (k * 1e3);  // t[µs] = S / (β · 1e3 B/µs)
  fit.baseUs = base;
  fit.samples = static_cast<int>(points.size());
  double mean = 0;
  for (const CommPoint& p : points) mean += p.tUs;
  mean /= static_cast<double>(points.size());
  double ssRes = 0, ssTot = 0;
  std::vector<double> rel;
  std::map<std::string, std::pair<int, double>> ranges;
  for (const CommPoint& p : points) {
    const double model =
        alpha * p.steps + k * p.x + (p.bytes >= kAlphaBetaBaseMinBytes ? base : 0.0);
    ssRes += (model - p.tUs) * (model - p.tUs);
    ssTot += (p.tUs - mean) * (p.tUs - mean);
    if (p.tUs > 0) {
      rel.push_back(std::abs(model - p.tUs) / p.tUs);
      auto& r = ranges[sizeRange(p.bytes)];
      r.first += 1;
      r.second += (model - p.tUs) / p.tUs;
    }
  }
  fit.r2 = ssTot > 0 ? 1 - ssRes / ssTot : 1;
  fit.rmsResidualUs = std::sqrt(ssRes / static_cast<double>(points.size()));
  fit.medianAbsRelative = median(rel);
  for (const char* name : {"< 64 KiB", "64 KiB - 4 MiB", ">= 4 MiB"}) {
    auto it = ranges.find(name);
    if (it == ranges.end()) continue;
    fit.ranges.push_back({name, it->second.first, it->second.second / it->second.first});
  }
  return fit;
}

std::string oneMessageSizeNote(const AlphaBetaFit& fit) {
  if (fit.largeSizes != 1) return "";
  char size[32];
  std::snprintf(size, sizeof(size), "%.2f MiB", static_cast<double>(fit.largeSize) / (1 << 20));
  return std::string("every collective of >= 64 KiB had one size (") + size +
         "): its fixed cost per call and its bandwidth cannot be told apart, so collectives of "
         "other sizes are extrapolated through zero; calibrate runs at two bucket caps together "
         "(ddpscope calibrate RUN1 RUN2 -o host.json; --cluster host.json) to separate them";
}

std::string partialRunsNote(const AlphaBetaFit& fit) {
  if (fit.partialRuns == 0) return "";
  return std::to_string(fit.partialRuns) +
         " run(s) hold fewer ranks than their world size: each collective is timed from the "
         "ranks present, so its time holds the wait for the others to arrive, which a fit would "
         "read as a slow network: left out of the network fit (import every rank's trace to time "
         "a collective from its latest start)";
}

ContentionFit fitContention(const std::vector<ProfileRef>& runs, const DeviceSpec& device) {
  ContentionFit fit;
  auto roofline = RooflineComputeModel::create(device, "fp32");
  if (!roofline.isOk()) return fit;
  struct Sample {
    int group;
    double y;  // measured / roofline
    double f;
  };
  std::vector<Sample> samples;
  std::map<std::tuple<size_t, int, size_t>, int> groups;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const MeasuredProfile& p = *runs[ri].profile;
    const models::ModelSpec& model = *runs[ri].model;
    const models::ModelInputs inputs = measuredInputs(p, model);
    for (size_t l = 0; l < model.layers.size() && l < p.forward.size(); ++l) {
      const LayerTimes roof = (*roofline)->layerTime(model.layers[l], inputs);
      for (int dir = 0; dir < 2; ++dir) {
        const Nanos r = dir == 0 ? roof.forward : roof.backward;
        if (r.count() <= 0) continue;
        auto key = std::make_tuple(ri, dir, l);
        auto [it, inserted] = groups.emplace(key, static_cast<int>(groups.size()));
        for (const LayerSample& s : (dir == 0 ? p.forward : p.backward)[l]) {
          samples.push_back(
              {it->second,
               static_cast<double>(s.deviceTime().count()) / static_cast<double>(r.count()),
               s.commOverlap});
        }
      }
    }
  }
  fit.samples = static_cast<int>(samples.size());
  if (samples.empty()) return fit;
  const size_t numGroups = groups.size();
  for (const Sample& s : samples) fit.overlappedSamples += s.f > 0.05 ? 1 : 0;
  // Per group with both kinds of samples: c_g = (median y over f > 0.5 / median y over f < 0.05
  // − 1) / median f of the overlapped ones; c = the median of c_g over groups (medians: a loaded
  // host's stalls are outliers, not contention).
  std::vector<std::vector<double>> low(numGroups), high(numGroups), highF(numGroups);
  for (const Sample& s : samples) {
    const size_t g = static_cast<size_t>(s.group);
    if (s.f < 0.05) low[g].push_back(s.y);
    if (s.f > 0.5) {
      high[g].push_back(s.y);
      highF[g].push_back(s.f);
    }
  }
  std::vector<double> perGroup;
  for (size_t g = 0; g < numGroups; ++g) {
    if (low[g].size() < 2 || high[g].size() < 2) continue;
    const double base = median(low[g]);
    if (base <= 0) continue;
    perGroup.push_back((median(high[g]) / base - 1) / median(highF[g]));
  }
  fit.identified = !perGroup.empty();
  if (!fit.identified) return fit;
  const double c = std::clamp(median(perGroup), 0.0, 10.0);
  fit.groups = static_cast<int>(perGroup.size());
  fit.slowdown = c;
  return fit;
}

namespace {

// Per layer, the time the GPU computed it in an imported GPU trace: its kernels as the trace's
// host facts attribute them (the mean over the profiled steps; a functional layer — attention
// core, residual add — gets the kernels of its op, which run inside its parent's range), else
// the kernels of its span (traces::kArgKernelNs). nullopt for a run whose spans are the
// computation itself (runtime traces: CPU ranks, ddpscope's CUDA runtime).
StatusOr<std::optional<std::vector<DevicePass>>> gpuKernelTimes(const MeasuredProfile& p,
                                                                const models::ModelSpec& model,
                                                                const MeasuredComputeModel& m) {
  std::vector<DevicePass> out(model.layers.size());
  ASSIGN_OR_RETURN(const std::optional<ProfileHostFacts> read, hostFactsOfProfile(p, model));
  if (read) {
    const HostFacts& facts = read->facts;
    for (size_t l = 0; l < model.layers.size(); ++l) {
      auto it = facts.layers.find(model.layers[l].name);
      if (it == facts.layers.end()) continue;
      if (it->second.forward.kernels > 0)
        out[l].forward = Nanos::fromMicrosDouble(it->second.forward.kernelUs);
      if (it->second.backward.kernels > 0)
        out[l].backward = Nanos::fromMicrosDouble(it->second.backward.kernelUs);
    }
    return std::optional<std::vector<DevicePass>>(std::move(out));
  }
  auto byKernels = [](const std::vector<LayerSample>& samples) {
    return !samples.empty() && std::all_of(samples.begin(), samples.end(),
                                           [](const LayerSample& s) { return s.kernels; });
  };
  if (std::none_of(p.forward.begin(), p.forward.end(), byKernels)) {
    return std::optional<std::vector<DevicePass>>();
  }
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (byKernels(p.forward[l])) out[l].forward = m.baseTimes()[l].forward;
    if (byKernels(p.backward[l])) out[l].backward = m.baseTimes()[l].backward;
  }
  return std::optional<std::vector<DevicePass>>(std::move(out));
}

}  // namespace

StatusOr<std::vector<RunDeviceTimes>> readDeviceTimes(const std::vector<ProfileRef>& runs,
                                                      const DeviceSpec& device, double contention) {
  std::vector<RunDeviceTimes> out;
  for (const ProfileRef& run : runs) {
    if (const std::optional<traces::TracedGpu>& gpu = run.profile->gpu;
        gpu && device.arch != GpuArch::kCpu && !isTracedGpu(*gpu, device)) {
      // (A CPU device stands for the trace's own machine: replay's self-calibrated cluster.)
      return invalidArgument(run.profile->origin + ": its kernels ran on " + gpu->describe() +
                             ", not on the cluster's " + device.name +
                             ": calibrate fits a GPU's compute to kernels measured on it "
                             "(calibrate a cluster whose device is that GPU; replay and "
                             "--compute-from carry measured kernels to another GPU)");
    }
    MeasuredComputeOptions options{contention, CrossRank::kMean, true};
    options.carryToDevice = false;
    auto measured = MeasuredComputeModel::create(*run.profile, *run.model, device, options);
    if (!measured.isOk()) continue;
    RunDeviceTimes r{run, *std::move(measured), std::nullopt};
    ASSIGN_OR_RETURN(r.kernels, gpuKernelTimes(*run.profile, *run.model, *r.measured));
    out.push_back(std::move(r));
  }
  return out;
}

ComputeScaleFit fitComputeScale(const std::vector<RunDeviceTimes>& runs, const DeviceSpec& device) {
  ComputeScaleFit fit;
  double measuredSum = 0, roofSum = 0;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const MeasuredProfile& p = *runs[ri].run.profile;
    const models::ModelSpec& model = *runs[ri].run.model;
    // Against the roofline of the precision the run computed in (a bf16 run on a GPU against
    // the bf16 peak, not the fp32 one); an unknown or unsupported one falls back to fp32.
    auto roofline = RooflineComputeModel::create(device, p.settings.dtype, p.settings.ddp.autocast);
    if (!roofline.isOk()) roofline = RooflineComputeModel::create(device, "fp32");
    if (!roofline.isOk()) continue;
    fit.dtypes.insert((*roofline)->dtype());
    // A GPU trace's layer spans hold the gaps where the GPU waited for the host: its kernels
    // are what it computed. There a pass without kernels of its own has no measurement, and its
    // prediction is left out too.
    const std::optional<std::vector<DevicePass>>& kernels = runs[ri].kernels;
    const models::ModelInputs inputs = measuredInputs(p, model);
    const std::vector<LayerTimes> roofs = (*roofline)->layerTimes(model, inputs);
    for (size_t l = 0; l < model.layers.size(); ++l) {
      const LayerTimes& roof = roofs[l];
      LayerTimes m = runs[ri].measured->baseTimes()[l];
      for (int pass = 0; pass < 2; ++pass) {
        const Nanos predicted = pass == 0 ? roof.forward : roof.backward;
        Nanos& time = pass == 0 ? m.forward : m.backward;
        if (kernels) {
          const std::optional<Nanos> k = pass == 0 ? (*kernels)[l].forward : (*kernels)[l].backward;
          if (!k) {
            if (predicted.count() > 0) ++fit.passesWithoutKernels;
            time = Nanos::zero();
            continue;
          }
          time = *k;
          ++fit.kernelPasses;
        }
        measuredSum += static_cast<double>(time.count());
        roofSum += static_cast<double>(predicted.count());
      }
      if (ri == 0) {
        auto r = [](Nanos a, Nanos b) -> std::optional<double> {
          if (a.count() <= 0 || b.count() <= 0) return std::nullopt;
          return static_cast<double>(a.count()) / static_cast<double>(b.count());
        };
        fit.layers.push_back(
            {model.layers[l].name, r(m.forward, roof.forward), r(m.backward, roof.backward)});
      }
    }
  }
  fit.measuredUs = measuredSum / 1e3;
  fit.predictedUs = roofSum / 1e3;
  if (roofSum > 0 && measuredSum > 0) fit.scale = measuredSum / roofSum;
  return fit;
}

std::pair<double, double> fitFloorAndSlope(const std::vector<std::pair<double, double>>& points) {
  // The normal equations of the two-variable least squares with rows [1/t, w/t] and target 1.
  double s11 = 0, s12 = 0, s22 = 0, b1 = 0, b2 = 0;
  for (const auto& [w, t] : points) {
    s11 += 1 / (t * t);
    s12 += w / (t * t);
    s22 += w * w / (t * t);
    b1 += 1 / t;
    b2 += w / t;
  }
  // det ≥ 0 (Cauchy–Schwarz), 0 exactly when every point has one work: below a relative 1e-9 of
  // s11·s22 it is rounding, not information.
  const double det = s11 * s22 - s12 * s12;
  if (det > 1e-9 * s11 * s22) {
    const double floor = (b1 * s22 - b2 * s12) / det;
    const double slope = (s11 * b2 - s12 * b1) / det;
    if (floor >= 0 && slope > 0) return {floor, slope};
  }
  if (s22 > 0) return {0.0, b2 / s22};
  return {b1 / s11, 0.0};  // no work in any sample: the floor alone
}

KernelFitCalibration fitKernelClasses(const std::vector<RunDeviceTimes>& runs,
                                      const DeviceSpec& device) {
  KernelFitCalibration out;
  struct Sample {
    double work, measuredUs, beforeUs;
  };
  std::map<std::pair<std::string, int>, std::vector<Sample>> samples;
  std::set<std::string> dtypes;
  std::set<int64_t> batches;
  std::string origins;
  for (const RunDeviceTimes& run : runs) {
    const MeasuredProfile& p = *run.run.profile;
    const models::ModelSpec& model = *run.run.model;
    if (!run.kernels) continue;
    const std::vector<DevicePass>& kernels = *run.kernels;
    auto roofline = RooflineComputeModel::create(device, p.settings.dtype, p.settings.ddp.autocast);
    if (!roofline.isOk()) continue;
    dtypes.insert((*roofline)->dtype());
    if (!origins.empty()) origins += ", ";
    origins += p.origin;
    const models::ModelInputs inputs = measuredInputs(p, model);
    batches.insert(inputs.batch);
    const auto explainedLayers = (*roofline)->explainLayers(model, inputs);
    for (size_t l = 0; l < model.layers.size(); ++l) {
      const models::LayerSpec& layer = model.layers[l];
      const std::string kernelClass(kernelClassOf(layer.type));
      const bool byFlops = timedByFlops(kernelClass);
      const auto& explained = explainedLayers[l];
      for (int pass = 0; pass < 2; ++pass) {
        const std::optional<Nanos> k = pass == 0 ? kernels[l].forward : kernels[l].backward;
        const auto& e = pass == 0 ? explained.forward : explained.backward;
        if (!k || k->count() <= 0 || e.kernels == 0) continue;
        // A layer's autocast casts are kernels of their own (the cast classes), as is a bias's
        // gradient where the base's fit times it apart: the class is fitted on the rest.
        const Nanos apart = e.castTime + e.biasTime;
        const double ownUs = k->toMicros() - apart.toMicros();
        if (ownUs <= 0) continue;
        samples[{kernelClass, pass}].push_back(
            {byFlops ? e.flops : e.bytes, ownUs, (e.time - apart).toMicros()});
      }
    }
  }
  if (samples.empty()) return out;
  if (dtypes.size() != 1) {
    out.note = "no kernel fit: the runs' kernels were measured at more than one dtype";
    return out;
  }
  out.dtype = *dtypes.begin();
  out.source = "ddpscope calibrate on the layers' kernel times of " + origins;
  for (const auto& [key, points] : samples) {
    if (static_cast<int>(points.size()) < kMinKernelFitSamples) continue;
    const auto& [kernelClass, pass] = key;
    KernelClassFit f;
    f.kernelClass = kernelClass;
    f.pass = pass;
    f.samples = static_cast<int>(points.size());
    f.byFlops = timedByFlops(kernelClass);
    std::vector<std::pair<double, double>> wt;
    for (const Sample& s : points) wt.emplace_back(s.work, s.measuredUs);
    const auto [floorUs, usPerUnit] = fitFloorAndSlope(wt);
    if (usPerUnit <= 0) continue;  // no work to set a rate by: the class stays as it was
    f.term.floorUs = floorUs;
    f.term.rate = 1e6 / usPerUnit / (f.byFlops ? 1e12 : 1e9);
    std::vector<double> before, after;
    double squaredBefore = 0, squaredAfter = 0;
    for (const Sample& s : points) {
      const double fitted = floorUs + usPerUnit * s.work;
      before.push_back(std::abs(s.beforeUs / s.measuredUs - 1));
      after.push_back(std::abs(fitted / s.measuredUs - 1));
      squaredBefore += before.back() * before.back();
      squaredAfter += after.back() * after.back();
      f.measuredUs += s.measuredUs;
      f.beforeUs += s.beforeUs;
      f.afterUs += fitted;
    }
    f.medianAbsBefore = median(before);
    f.medianAbsAfter = median(after);
    // The constrained fit (a floor or rate pinned at 0) can fit worse than the base's own
    // model; then the base's stays.
    f.kept = squaredAfter > squaredBefore;
    out.classes.push_back(f);
  }
  if (out.classes.empty()) {
    out.note = "no kernel fit: no op class has " + std::to_string(kMinKernelFitSamples) +
               " measured layer passes";
    out.dtype.clear();
    return out;
  }
  out.batches.assign(batches.begin(), batches.end());
  if (out.batches.size() == 1) {
    out.batchNote =
        "  every fitted layer ran at batch " + std::to_string(out.batches.front()) +
        ": a floor and a rate fitted across layers of different shapes do not say how a "
        "layer's time grows with the batch; at another batch the fit extrapolates (its floors "
        "stay, its work grows): profile the job at a second batch too and calibrate on both traces";
  }
  return out;
}

StatusOr<Calibration> calibrate(const std::vector<ProfileRef>& runs, const DeviceSpec& device,
                                NetworkFit network) {
  Calibration cal;
  int fittable = 0;  // runs of every rank of a world > 1
  for (const ProfileRef& r : runs) {
    const int world = r.profile->settings.worldSize;
    cal.maxWorldSize = std::max(cal.maxWorldSize, world);
    if (world < 2) continue;
    if (r.profile->someRanksOnly()) {
      ++cal.comm.partialRuns;
    } else {
      ++fittable;
    }
  }
  if (network == NetworkFit::kRequired || (network == NetworkFit::kUnlessOneRank && fittable > 0)) {
    ASSIGN_OR_RETURN(cal.comm, fitAlphaBeta(runs));
  }
  cal.contention = fitContention(runs, device);
  // Each run's device times read once (its host facts parsed once) for both compute fits.
  ASSIGN_OR_RETURN(const std::vector<RunDeviceTimes> deviceTimes,
                   readDeviceTimes(runs, device, cal.contention.slowdown));
  cal.compute = fitComputeScale(deviceTimes, device);
  cal.kernels = fitKernelClasses(deviceTimes, device);
  return cal;
}

DdpOverheadsFit fitDdpOverheads(const std::vector<const traces::Timeline*>& timelines) {
  enum Term { kLaunch, kHook, kCopyBack, kWait, kStep, kTerms };
  std::vector<double> samples[kTerms];
  auto termOf = [](std::string_view name) -> int {
    if (name == "DDP allreduce launch" || name.starts_with("c10d::allreduce_")) return kLaunch;
    if (name == "DDP autograd hook") return kHook;
    if (name == "DDP copy back launch") return kCopyBack;
    if (name == "DDP finalize wait") return kWait;
    if (name.starts_with("DDP forward wrapper")) return kStep;
    return -1;
  };
  for (const traces::Timeline* timeline : timelines) {
    for (const traces::RankTrack& rank : timeline->ranks()) {
      for (const traces::Lane& lane : rank.lanes) {
        if (lane.kind != traces::LaneKind::kHost) continue;
        for (const traces::Span& span : lane.spans) {
          const int term = termOf(span.name);
          if (term >= 0) samples[term].push_back(span.duration.toMicros());
        }
      }
    }
  }
  auto fit = [&](int term) {
    DdpOverheadTermFit f;
    f.samples = static_cast<int>(samples[term].size());
    if (f.samples > 0) f.us = median(samples[term]);
    return f;
  };
  DdpOverheadsFit out;
  out.allreduceLaunch = fit(kLaunch);
  out.gradHook = fit(kHook);
  out.copyBack = fit(kCopyBack);
  out.finalizeWait = fit(kWait);
  out.stepOverhead = fit(kStep);
  return out;
}

std::optional<AcrossNodesTerms> acrossNodesOfBase(const ClusterSpec& base) {
  if (base.interNode.nicsPerNode <= 0 || base.gpusPerNode < 1) return std::nullopt;
  AcrossNodesTerms out;
  out.layout = WorldLayout{2, base.gpusPerNode};
  StatusOr<std::unique_ptr<CommModel>> model = makeCommModel(base, out.layout);
  if (!model.isOk()) return std::nullopt;
  const double n = out.layout.worldSize();
  const double steps = 2 * (n - 1);
  const double wire = busBandwidthFactor(Collective::kAllreduce, out.layout.worldSize());
  auto us = [&](int64_t bytes) {
    return (*model)->estimate(Collective::kAllreduce, bytes).time.toMicros();
  };
  const double small = static_cast<double>(kAcrossNodesSmallBytes);
  const double large = static_cast<double>(kAcrossNodesLargeBytes);
  const double tSmall = us(kAcrossNodesSmallBytes);
  const double usPerByte = (us(kAcrossNodesLargeBytes) - tSmall) / (wire * (large - small));
  if (!(usPerByte > 0)) return std::nullopt;
  out.alphaUs = std::max(0.0, (tSmall - wire * small * usPerByte) / steps);
  out.betaGBps = 1.0 / (usPerByte * 1e3);  // t[µs] = x / (β · 1e3 B/µs)
  return out;
}

std::string acrossNodesNote(const ClusterSpec& base, const Calibration& cal) {
  if (cal.comm.samples == 0 || base.commModel == CommModelKind::kAlphaBeta) return "";
  const std::optional<AcrossNodesTerms> across = acrossNodesOfBase(base);
  char line[512];
  if (!across) {
    std::snprintf(line, sizeof(line),
                  "  across nodes: none: the fit is of collectives inside one node, and %s has no "
                  "network across nodes (inter_node) to time them: layouts of several nodes are "
                  "refused",
                  base.name.c_str());
    return line;
  }
  std::snprintf(line, sizeof(line),
                "  across nodes: alpha %.2f us, beta %.4f GB/s from %s's own network (its "
                "allreduce at %d nodes x %d ranks): the fit is of collectives inside one node; a "
                "ring that crosses nodes takes the larger alpha and the smaller beta",
                across->alphaUs, across->betaGBps, base.name.c_str(), across->layout.nodes,
                across->layout.gpusPerNode);
  return line;
}

ClusterSpec applyCalibration(const ClusterSpec& base, const Calibration& cal,
                             const std::string& name) {
  ClusterSpec c = base;
  c.name = name;
  if (cal.comm.samples > 0) {
    c.commModel = CommModelKind::kAlphaBeta;
    const bool hadAlphaBeta = base.commModel == CommModelKind::kAlphaBeta;
    c.alphaBeta.intraAlphaUs = cal.comm.alphaUs;
    c.alphaBeta.intraBetaGBps = cal.comm.betaGBps;
    c.alphaBeta.baseUs = cal.comm.baseUs;
    if (!hadAlphaBeta) {
      // The traces' collectives ran inside one node (gpus_per_node grows to their world below):
      // across nodes the base's own network times them, not the fit — a one-node fit there
      // would cross nodes at NVLink's speed. The α–β model takes the slower of the two.
      const std::optional<AcrossNodesTerms> across = acrossNodesOfBase(base);
      c.alphaBeta.interAlphaUs = across ? across->alphaUs : 0;
      c.alphaBeta.interBetaGBps = across ? across->betaGBps : 0;
    } else if (c.alphaBeta.interBetaGBps <= 0) {
      c.alphaBeta.interAlphaUs = cal.comm.alphaUs;
      c.alphaBeta.interBetaGBps = cal.comm.betaGBps;
    }
  }
  c.contentionSlowdown = cal.contention.slowdown;
  c.gpusPerNode = std::max(c.gpusPerNode, cal.maxWorldSize);
  for (auto& [dtype, peak] : c.device.peakTflops) peak /= cal.compute.scale;
  c.device.memoryGBps /= cal.compute.scale;
  // The device's kernel fit times its layers instead of the peaks: scaled the same way (every
  // fitted time × scale) when the runs were measured against it (their dtype is the fit's).
  if (cal.compute.dtypes.count(c.device.kernelFit.dtype) > 0) {
    for (auto& [kernelClass, passes] : c.device.kernelFit.classes) {
      for (auto& term : passes) {
        if (!term) continue;
        term->floorUs *= cal.compute.scale;
        term->rate /= cal.compute.scale;
      }
    }
  }
  // The user's GPU's own kernel fit replaces the base's terms of the classes it fitted; a base
  // fit at another dtype does not hold for these runs and goes.
  if (!cal.kernels.dtype.empty()) {
    KernelFit& fit = c.device.kernelFit;
    if (fit.dtype != cal.kernels.dtype) {
      fit.classes.clear();
      fit.roofline.clear();
    }
    fit.dtype = cal.kernels.dtype;
    fit.source = cal.kernels.source;
    for (const KernelClassFit& f : cal.kernels.classes) {
      if (f.kept) continue;
      fit.classes[f.kernelClass][static_cast<size_t>(f.pass)] = f.term;
      fit.roofline.erase(f.kernelClass);
    }
  }
  auto apply = [](const DdpOverheadTermFit& fit, double& term) {
    if (fit.samples > 0) term = fit.us;
  };
  apply(cal.ddp.allreduceLaunch, c.host.ddp.allreduceLaunchUs);
  apply(cal.ddp.gradHook, c.host.ddp.gradHookUs);
  apply(cal.ddp.copyBack, c.host.ddp.copyBackUs);
  apply(cal.ddp.finalizeWait, c.host.ddp.finalizeWaitUs);
  apply(cal.ddp.stepOverhead, c.host.ddp.stepOverheadUs);
  return c;
}

nlohmann::json calibratedClusterJson(const nlohmann::json& base, const ClusterSpec& baseSpec,
                                     const Calibration& cal, const std::string& name,
                                     const std::string& description) {
  const ClusterSpec spec = applyCalibration(baseSpec, cal, name);
  nlohmann::json j = base;
  auto round = [](double v, double digits) {
    const double f = std::pow(10.0, digits);
    return std::round(v * f) / f;
  };
  j["name"] = name;
  j["description"] = description;
  j["gpus_per_node"] = spec.gpusPerNode;
  if (cal.comm.samples > 0) {  // else the base's communication model stays as it is
    j["comm_model"] = "alpha_beta";
    // The base's NCCL timings (measured small-message latency, measured allreduce curves) time
    // NCCL calls: the fitted alpha-beta line replaces them, and the cluster format refuses both.
    j.erase("measured_latency");
    j.erase("measured_allreduce");
    j["alpha_beta"] = {{"intra_alpha_us", round(spec.alphaBeta.intraAlphaUs, 3)},
                       {"intra_beta_GBps", round(spec.alphaBeta.intraBetaGBps, 4)},
                       {"inter_alpha_us", round(spec.alphaBeta.interAlphaUs, 3)},
                       {"inter_beta_GBps", round(spec.alphaBeta.interBetaGBps, 4)}};
    if (spec.alphaBeta.baseUs > 0) j["alpha_beta"]["base_us"] = round(spec.alphaBeta.baseUs, 3);
  }
  j["contention_slowdown"] = round(spec.contentionSlowdown, 4);
  for (auto& [dtype, peak] : spec.device.peakTflops) {
    j["device"]["peak_tflops"][dtype] = round(peak, 6);
  }
  j["device"]["memory_GBps"] = round(spec.device.memoryGBps, 4);
  if (!spec.device.kernelFit.empty()) {
    const KernelFit& fit = spec.device.kernelFit;
    nlohmann::json out = {{"dtype", fit.dtype}, {"source", fit.source}};
    for (const auto& [kernelClass, passes] : fit.classes) {
      const bool byFlops = timedByFlops(kernelClass);
      for (int pass = 0; pass < 2; ++pass) {
        if (!passes[pass]) continue;
        nlohmann::json& term = out[kernelClass][pass == 0 ? "forward" : "backward"];
        term = {{"floor_us", round(passes[pass]->floorUs, 4)},
                {byFlops ? "tflops" : "GBps", round(passes[pass]->rate, 4)}};
        if (passes[pass]->channelsPerSm > 0) term["channels_per_sm"] = passes[pass]->channelsPerSm;
      }
    }
    j["device"]["kernel_fit"] = out;
  }
  if (!spec.host.name.empty()) {
    // A named host profile: written out whole, with the DDP terms as calibrated.
    nlohmann::json profile = hostProfileJson(spec.host);
    for (auto& [key, value] : profile["ddp"].items()) value = round(value.get<double>(), 3);
    j.erase("ddp_overheads");
    j["host_profile"] = profile;
  } else if (spec.host.ddp.any()) {
    nlohmann::json ddp = ddpOverheadsJson(spec.host.ddp);
    for (auto& [key, value] : ddp.items()) value = round(value.get<double>(), 3);
    j["ddp_overheads"] = ddp;
  }
  return j;
}

namespace {

std::vector<std::pair<const char*, const DdpOverheadTermFit*>> ddpTerms(const DdpOverheadsFit& f) {
  return {{"allreduce_launch_us", &f.allreduceLaunch},
          {"grad_hook_us", &f.gradHook},
          {"copy_back_us", &f.copyBack},
          {"finalize_wait_us", &f.finalizeWait},
          {"step_overhead_us", &f.stepOverhead}};
}

nlohmann::json ddpOverheadsFitJson(const DdpOverheadsFit& f) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, term] : ddpTerms(f)) {
    out[key] = {{"us", term->us}, {"samples", term->samples}};
  }
  return out;
}

nlohmann::json kernelFitCalibrationJson(const KernelFitCalibration& k) {
  nlohmann::json classes = nlohmann::json::array();
  for (const KernelClassFit& f : k.classes) {
    classes.push_back({{"class", f.kernelClass},
                       {"pass", f.pass == 0 ? "forward" : "backward"},
                       {"samples", f.samples},
                       {"floor_us", f.term.floorUs},
                       {f.byFlops ? "tflops" : "GBps", f.term.rate},
                       {"median_abs_error_base", f.medianAbsBefore},
                       {"median_abs_error_fit", f.medianAbsAfter},
                       {"measured_us", f.measuredUs},
                       {"base_us", f.beforeUs},
                       {"fit_us", f.afterUs},
                       {"used", !f.kept}});
  }
  return {{"dtype", k.dtype.empty() ? nlohmann::json() : nlohmann::json(k.dtype)},
          {"source", k.source},
          {"note", k.note},
          {"batches", k.batches},
          {"batch_note", k.batchNote},
          {"classes", classes}};
}

}  // namespace

nlohmann::json calibrationJson(const Calibration& c) {
  nlohmann::json ranges = nlohmann::json::array();
  for (const SizeRangeResidual& r : c.comm.ranges) {
    ranges.push_back(
        {{"range", r.range}, {"samples", r.samples}, {"mean_relative", r.meanRelative}});
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerScale& l : c.compute.layers) {
    auto ratio = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    layers.push_back(
        {{"layer", l.layer}, {"forward", ratio(l.forward)}, {"backward", ratio(l.backward)}});
  }
  return {{"comm",
           {{"alpha_us", c.comm.alphaUs},
            {"beta_GBps", c.comm.betaGBps},
            {"base_us", c.comm.baseUs},
            {"samples", c.comm.samples},
            {"r2", c.comm.r2},
            {"rms_residual_us", c.comm.rmsResidualUs},
            {"median_abs_relative", c.comm.medianAbsRelative},
            {"message_sizes", c.comm.largeSizes},
            {"partial_runs", c.comm.partialRuns},
            {"ranges", ranges}}},
          {"contention",
           {{"slowdown", c.contention.slowdown},
            {"samples", c.contention.samples},
            {"overlapped_samples", c.contention.overlappedSamples},
            {"identified", c.contention.identified},
            {"groups", c.contention.groups}}},
          {"compute",
           {{"scale", c.compute.scale},
            {"dtypes", c.compute.dtypes},
            {"measured_us", c.compute.measuredUs},
            {"predicted_us", c.compute.predictedUs},
            {"kernel_passes", c.compute.kernelPasses},
            {"passes_without_kernels", c.compute.passesWithoutKernels},
            {"layers", layers}}},
          {"kernel_fit", kernelFitCalibrationJson(c.kernels)},
          {"ddp_overheads", ddpOverheadsFitJson(c.ddp)},
          {"max_world_size", c.maxWorldSize}};
}

std::string formatCalibration(const Calibration& cal) {
  std::ostringstream o;
  char line[256];
  if (cal.comm.samples == 0 && cal.comm.partialRuns > 0) {
    o << "communication: not fitted: " << partialRunsNote(cal.comm)
      << "; the base cluster's network model is kept\n";
  } else if (cal.comm.samples == 0) {
    o << "communication: not fitted: every run has one rank (no collective between ranks); the "
         "base cluster's network model is kept\n";
  } else {
    std::snprintf(line, sizeof(line),
                  "communication (alpha-beta ring, %d collectives): alpha %.2f us, beta %.4f GB/s, "
                  "base %.1f us per collective of >= 64 KiB\n",
                  cal.comm.samples, cal.comm.alphaUs, cal.comm.betaGBps, cal.comm.baseUs);
    o << line;
    std::snprintf(line, sizeof(line),
                  "  fit: R^2 %.4f, RMS residual %.1f us, median |relative residual| %.1f %%\n",
                  cal.comm.r2, cal.comm.rmsResidualUs, 100 * cal.comm.medianAbsRelative);
    o << line;
    if (const std::string note = oneMessageSizeNote(cal.comm); !note.empty()) {
      o << "  " << note << "\n";
    }
    if (const std::string note = partialRunsNote(cal.comm); !note.empty()) {
      o << "  " << note << "\n";
    }
  }
  for (const SizeRangeResidual& r : cal.comm.ranges) {
    std::snprintf(line, sizeof(line),
                  "  %-16s %5d samples, mean (model - measured)/measured %+.1f %%\n",
                  r.range.c_str(), r.samples, 100 * r.meanRelative);
    o << line;
  }
  std::snprintf(line, sizeof(line),
                "contention: compute %.1f %% slower while a collective runs (%d layer samples, %d "
                "overlapped, %d layer groups with both%s)\n",
                100 * cal.contention.slowdown, cal.contention.samples,
                cal.contention.overlappedSamples, cal.contention.groups,
                cal.contention.identified ? "" : "; not identifiable: set to 0");
  o << line;
  std::string dtypes;
  for (const std::string& d : cal.compute.dtypes) {
    if (!dtypes.empty()) dtypes += ", ";
    dtypes += d;
  }
  std::snprintf(
      line, sizeof(line),
      "compute: measured / predicted = %.3f overall at %s (predicted: the base cluster's compute "
      "model at the runs' dtype, its kernel fit where it has one; peaks, memory bandwidth "
      "and the fit's rates divided by it)\n",
      cal.compute.scale, dtypes.empty() ? "no dtype" : dtypes.c_str());
  o << line;
  if (cal.compute.kernelPasses > 0) {
    std::snprintf(line, sizeof(line),
                  "  measured: the kernels of %d layer passes (GPU traces: the time the GPU "
                  "computed, not the gaps where it waited for the host); %d passes with no "
                  "kernels of their own left out\n",
                  cal.compute.kernelPasses, cal.compute.passesWithoutKernels);
    o << line;
  }
  if (!cal.kernels.dtype.empty()) {
    o << "kernel fit at " << cal.kernels.dtype
      << " (per op class and pass: floor + FLOPs or bytes / rate, fitted to the layers' kernels; "
         "replaces the base's terms of these classes):\n";
    for (const KernelClassFit& f : cal.kernels.classes) {
      std::snprintf(line, sizeof(line),
                    "  %-11s %-8s %4d layers  floor %8.2f us  %9.1f %-7s  median |error| %5.1f %% "
                    "(base %5.1f %%)  sum %.0f us measured, %.0f fitted%s\n",
                    f.kernelClass.c_str(), f.pass == 0 ? "forward" : "backward", f.samples,
                    f.term.floorUs, f.term.rate, f.byFlops ? "TFLOP/s" : "GB/s",
                    100 * f.medianAbsAfter, 100 * f.medianAbsBefore, f.measuredUs, f.afterUs,
                    f.kept ? "; fits worse than the base: the base's kept" : "");
      o << line;
    }
    if (!cal.kernels.batchNote.empty()) o << cal.kernels.batchNote << "\n";
  } else if (!cal.kernels.note.empty()) {
    o << cal.kernels.note << "\n";
  }
  if (!cal.ddp.any()) {
    o << "DDP host costs: no host spans that measure them in the traces (base values kept)\n";
  } else {
    o << "DDP host costs (median of the host spans; ddp_overheads):\n";
    for (const auto& [key, term] : ddpTerms(cal.ddp)) {
      if (term->samples == 0) {
        std::snprintf(line, sizeof(line), "  %-20s not in the traces (base value kept)\n", key);
      } else {
        std::snprintf(line, sizeof(line), "  %-20s %10.3f us  (%d spans)\n", key, term->us,
                      term->samples);
      }
      o << line;
    }
  }
  return o.str();
}

}  // namespace ddpscope::sim::replay
