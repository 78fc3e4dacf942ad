// Calibration: fits the cluster model to measured runs (MeasuredProfiles).
//
// Communication (fitAlphaBeta): the α–β ring model of sim/cost/alpha_beta_model.h,
//   t = α·steps + x/β with, for n ranks and S bytes, allreduce steps = 2(n−1), x = 2(n−1)/n·S;
//   allgather / reduce-scatter (n−1), (n−1)/n·S; broadcast (n−1), S —
// fitted on the cross-rank collective durations (latest start to latest end over ranks, measured
// iterations) pooled over every run (runs of several world sizes fit one (α, β); a run that holds
// some of its world's ranks is left out: its collectives hold their wait for the others) in two
// size regimes: α = the median of t / steps over the collectives < 64 KiB (latency-bound: the
// used-map allreduce, rebuild broadcasts), then β from the collectives ≥ 64 KiB by least squares of
// t − α·steps on x. Without small collectives: joint least squares over (steps, x), α < 0
// refitted with α = 0. Runs with one rank carry no information.
// Quality: R² of t, RMS and median relative residual, and the mean relative residual per size
// range (< 64 KiB, 64 KiB – 4 MiB, ≥ 4 MiB).
//
// Contention (fitContention): measured layer time y = k_g · (1 + c·f), f = the fraction of the
// sample with a collective in flight, k_g per group = one layer and direction of one run (the
// same work; layers of the same shape are not pooled: the first layer skips its input gradient),
// c shared. A group with ≥ 2 samples at f < 0.05
// and ≥ 2 at f > 0.5 estimates c_g = (median y_high / median y_low − 1) / median f_high; c is
// the median over such groups, clamped to [0, 10] (0 when no group has both: not identified).
// Medians, because a loaded host's scheduling stalls are outliers, not contention.
//
// DDP's host costs (fitDdpOverheads; cluster.h DdpOverheads): per term, the median duration of
// the host-lane spans that measure it, over every rank and iteration of the given traces — the
// simulator's own span names ("DDP allreduce launch", "DDP autograd hook", "DDP copy back
// launch", "DDP finalize wait", "DDP forward wrapper ...") and PyTorch's where an imported trace
// keeps them ("c10d::allreduce_" on the ddp lane: the host time of one allreduce call). A term
// without samples is not fitted: the base cluster's value stays. Medians, because a loaded
// host's preemptions are outliers.
//
// Compute scale (fitComputeScale): per layer measured (de-rated) time / the time the base's
// compute model predicts at the run's dtype (its roofline, or its kernel fit where it has one);
// for a GPU trace imported from PyTorch's profiler the measured time is the layer's kernels (its
// host facts' attribution, else its span's kernel_ns), not its span, which holds the gaps where
// the GPU waited for the host;
// and the time-weighted overall scale s = Σ measured / Σ predicted; the calibrated cluster
// divides the device's peaks, memory bandwidth and kernel-fit rates by s (and multiplies the
// fit's floors by it) so that its compute model matches on average.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/cost/cluster.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "traces/timeline.h"

namespace ddpscope::sim::replay {

struct SizeRangeResidual {
  std::string range;  // "< 64 KiB", "64 KiB - 4 MiB", ">= 4 MiB"
  int samples = 0;
  double meanRelative = 0;  // mean of (model − measured) / measured
};

struct AlphaBetaFit {
  double alphaUs = 0;
  double betaGBps = 0;
  double baseUs = 0;  // AlphaBetaSpec::baseUs: the intercept of the ≥ 64 KiB fit (≥ 0)
  int samples = 0;
  double r2 = 0;
  double rmsResidualUs = 0;
  double medianAbsRelative = 0;  // median |model − measured| / measured
  std::vector<SizeRangeResidual> ranges;
  // Distinct message sizes of ≥ 64 KiB among the samples, and the size when there is one: then
  // a call's fixed cost (α·steps + base) and its bytes term cannot be told apart, and the fit
  // extrapolates other sizes through zero (oneMessageSizeNote).
  int largeSizes = 0;
  int64_t largeSize = 0;
  // Runs whose trace holds fewer ranks than their world size (import-torch
  // --allow-missing-ranks): a collective is timed from the ranks present, so its time holds the
  // wait for the others to arrive, which the fit would read as a slow network: left out of it
  // (partialRunsNote). With no other run of several ranks the network is not fitted.
  int partialRuns = 0;
};

// When runs miss ranks: why they are left out of the network fit; "" otherwise.
std::string partialRunsNote(const AlphaBetaFit& fit);

// When the fit saw one message size of ≥ 64 KiB: what that leaves unknown and how to pin it down
// (calibrating runs at two bucket caps together); "" otherwise.
std::string oneMessageSizeNote(const AlphaBetaFit& fit);

struct ContentionFit {
  double slowdown = 0;
  int samples = 0;
  int overlappedSamples = 0;  // f > 0.05
  bool identified = false;    // some group had overlapped and non-overlapped samples
  int groups = 0;             // groups that gave an estimate
};

struct LayerScale {
  std::string layer;
  // measured / predicted (the base's roofline or kernel fit); nullopt (JSON null) where the pass
  // was not measured (no kernels of its own in a GPU trace) or predicts no time
  std::optional<double> forward;
  std::optional<double> backward;
};

struct ComputeScaleFit {
  double scale = 1;                        // Σ measured / Σ predicted
  double measuredUs = 0, predictedUs = 0;  // the two sums over every run's layer passes
  std::vector<LayerScale> layers;          // of the first profile
  // The dtypes the runs computed in: the base's kernel fit is scaled only when its dtype is one
  // of them (at another dtype the scale was measured against the roofline, not against it).
  std::set<std::string> dtypes;
  // Layer passes timed by their kernels (imported GPU traces: traces::kArgKernelNs), and those
  // left out of both sums because the trace ran no kernel of their own (a residual add inside
  // its block's range: its kernels are the block's, which is no layer).
  int kernelPasses = 0;
  int passesWithoutKernels = 0;
};

struct DdpOverheadTermFit {
  double us = 0;    // median span duration, µs
  int samples = 0;  // 0 = not fitted
};

struct DdpOverheadsFit {
  DdpOverheadTermFit allreduceLaunch, gradHook, copyBack, finalizeWait, stepOverhead;
  bool any() const {
    return allreduceLaunch.samples + gradHook.samples + copyBack.samples + finalizeWait.samples +
               stepOverhead.samples >
           0;
  }
};

DdpOverheadsFit fitDdpOverheads(const std::vector<const traces::Timeline*>& traces);

struct ProfileRef {
  const MeasuredProfile* profile = nullptr;
  const models::ModelSpec* model = nullptr;
};

// Error (FailedPrecondition → exit 2 as InvalidArgument) when no run has ≥ 2 ranks and a
// collective with bytes.
StatusOr<AlphaBetaFit> fitAlphaBeta(const std::vector<ProfileRef>& runs);
ContentionFit fitContention(const std::vector<ProfileRef>& runs, const DeviceSpec& device);
// What the device computed for one pass of one layer; nullopt: not measured.
struct DevicePass {
  std::optional<Nanos> forward, backward;
};
// One run's device times, read once for both compute fits: its measured compute model (samples
// de-rated by the contention fit) and, for a GPU trace imported from PyTorch's profiler, each
// layer pass's kernel time (as its host facts attribute them, else its span's kernels); no
// kernels for a runtime trace, whose spans are the computation.
struct RunDeviceTimes {
  ProfileRef run;
  std::unique_ptr<MeasuredComputeModel> measured;
  std::optional<std::vector<DevicePass>> kernels;
};
// The runs whose measured compute model builds (the others are left out of the compute fits).
// Errors: a run's host facts (metadata) that do not parse.
StatusOr<std::vector<RunDeviceTimes>> readDeviceTimes(const std::vector<ProfileRef>& runs,
                                                      const DeviceSpec& device, double contention);
ComputeScaleFit fitComputeScale(const std::vector<RunDeviceTimes>& runs, const DeviceSpec& device);

// The user's GPU's kernel fit (device.kernel_fit, sim/cost/cluster.h): per op class
// (kernelClassOf) and pass, floor + work / rate fitted to the layers' kernel times of GPU traces
// imported from PyTorch's profiler — work being the pass's FLOPs (matmul, conv, attention) or
// bytes (the rest) as the roofline counts them at the runs' dtype — by least squares on the
// relative error with both terms ≥ 0 (scripts/fit_kernels.py's fit, here on the user's own
// trace), each layer pass of each run one sample (its mean over the profiled steps). A class and
// pass needs kMinKernelFitSamples samples and must fit the samples better than the base does
// (Σ squared relative error); the others keep the base's term (scaled with the compute scale)
// or the roofline.
inline constexpr int kMinKernelFitSamples = 3;
struct KernelClassFit {
  std::string kernelClass;
  int pass = 0;  // 0 forward, 1 backward
  int samples = 0;
  KernelFitTerm term;
  bool byFlops = false;  // term.rate in TFLOP/s (else GB/s)
  // |predicted / measured − 1| over the samples, median: the base cluster's prediction, the fit's
  double medianAbsBefore = 0, medianAbsAfter = 0;
  double measuredUs = 0, beforeUs = 0, afterUs = 0;  // the samples' sums
  // The fit's Σ squared relative error exceeds the base's (a term pinned at 0 by the
  // constraints): not used, the base's term stays.
  bool kept = false;
};
struct KernelFitCalibration {
  std::string dtype;   // the runs' dtype; "" = nothing fitted
  std::string source;  // the traces it was fitted on (device.kernel_fit.source)
  std::vector<KernelClassFit> classes;
  std::string note;  // why nothing was fitted although runs had kernel times ("" otherwise)
  // The per-rank batch sizes of the runs whose kernels were fitted. With one, every sample has
  // that batch: a floor and a rate fitted across layers of different shapes say how time grows
  // with a layer's work at that batch, not how it grows with the batch (batchNote says so).
  std::vector<int64_t> batches;
  std::string batchNote;
};
KernelFitCalibration fitKernelClasses(const std::vector<RunDeviceTimes>& runs,
                                      const DeviceSpec& device);
// A class's floor (µs) and µs per unit of work from (work, measured µs) points, minimising
// Σ ((floor + a·w) / t − 1)², both ≥ 0: the slope alone when the joint solution would make either
// negative, or when the points cannot tell a floor from a slope (every point of one work, e.g. a
// model's embeddings, whose lookups move the same bytes: the normal equations are singular and
// rounding alone would pick the answer).
std::pair<double, double> fitFloorAndSlope(const std::vector<std::pair<double, double>>& points);

struct Calibration {
  AlphaBetaFit comm;
  ContentionFit contention;
  ComputeScaleFit compute;
  KernelFitCalibration kernels;
  DdpOverheadsFit ddp;  // filled by the caller from the traces (fitDdpOverheads)
  int maxWorldSize = 1;
};

// Whether calibrate fits the network (comm): always (an error when no run has collectives between
// ranks to fit), or unless no run holds every rank of a world > 1 (the GPU kit's runs on one GPU,
// traces of some of the job's ranks: AlphaBetaFit::partialRuns). Left unfitted
// (comm.samples == 0), applyCalibration keeps the base cluster's communication model.
enum class NetworkFit { kRequired, kUnlessOneRank };
StatusOr<Calibration> calibrate(const std::vector<ProfileRef>& runs, const DeviceSpec& device,
                                NetworkFit network = NetworkFit::kRequired);

// The base cluster's own network across nodes as α–β terms, for a calibrated cluster whose fit
// (collectives inside one node) says nothing about it: the base's communication model at two
// nodes of its node size, solved for α (µs per ring step) and β (GB/s per rank) through its
// allreduce times at kAcrossNodesSmallBytes and kAcrossNodesLargeBytes
// (t = 2(n−1)·α + 2(n−1)/n·S/β at both). nullopt when the base has no model across nodes.
inline constexpr int64_t kAcrossNodesSmallBytes = 4096;
inline constexpr int64_t kAcrossNodesLargeBytes = 256 << 20;
struct AcrossNodesTerms {
  double alphaUs = 0;
  double betaGBps = 0;
  WorldLayout layout;  // where the base's model was asked
};
std::optional<AcrossNodesTerms> acrossNodesOfBase(const ClusterSpec& base);

// The calibrated cluster as a struct: α–β comm model with the fit inside a node; across nodes an
// α–β base keeps its values (the fit when it has none), an NCCL base gives its own network's
// terms (acrossNodesOfBase; none when it has no model across nodes: multi-node layouts are then
// refused) — or, with no fit (comm.samples == 0), the base's communication model unchanged —,
// contention, peaks scaled by 1/s, gpus_per_node ≥ the largest world measured (one machine), the
// fitted ddp_overheads terms.
ClusterSpec applyCalibration(const ClusterSpec& base, const Calibration& calibration,
                             const std::string& name);
// The same as cluster JSON, starting from the base cluster's JSON document (kept otherwise).
nlohmann::json calibratedClusterJson(const nlohmann::json& base, const ClusterSpec& baseSpec,
                                     const Calibration& calibration, const std::string& name,
                                     const std::string& description);

// One line for the report when the calibrated cluster's terms across nodes are not the fit's:
// where they come from ("" when they are the fit's, or when nothing was fitted).
std::string acrossNodesNote(const ClusterSpec& base, const Calibration& calibration);

// A one-screen report of the fit: α, β, R², residuals per size range, contention, scale.
// The fit as data (calibrate --json): comm {alpha_us, beta_GBps, samples, r2, rms_residual_us,
// median_abs_relative, ranges [{range, samples, mean_relative}]}, contention {slowdown, samples,
// overlapped_samples, identified, groups}, compute {scale, layers [{layer, forward, backward}]},
// ddp_overheads {allreduce_launch_us, grad_hook_us, copy_back_us, finalize_wait_us,
// step_overhead_us: {us, samples}} (samples 0: not in the traces, base value kept),
// max_world_size.
nlohmann::json calibrationJson(const Calibration& calibration);
std::string formatCalibration(const Calibration& calibration);

}  // namespace ddpscope::sim::replay
