// All-ranks mode must stay bit-identical while its hot path is reworked for scale: 64-rank
// jittered runs (host running ahead and host as the stream, stragglers, contention, several usage
// classes) are written out as readable text — every field of every iteration summary, and per rank
// and lane of the Chrome trace its span count, busy time and last end, then a hash of the whole
// trace — and compared with the text files in tests/data/sim/all_ranks_golden/, first produced by
// the pre-optimisation replayer (commit b301f31; these files hash to the fingerprints that replayer
// gave). A failure prints the first lines that differ, so it shows what changed. The cost models
// are the idealised ones of sim_test_models.h, so changes to the cluster cost formulas do not move
// these numbers; a change here means the replayer's timing changed. After an intended change,
// DDPSCOPE_UPDATE_GOLDENS=1 rewrites the files (review the diff).
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "models/zoo.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/replayer.h"
#include "tests/sim/engine/sim_test_models.h"
#include "tests/status_matchers.h"
#include "traces/chrome_writer.h"

namespace ddpscope::sim {
namespace {

using testing::AlphaBetaCommModel;
using testing::FixedComputeModel;
using testing::fnv1a;

const std::string kGoldenDir =
    std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/sim/all_ranks_golden/";

// Every number of the summary that the replayer produces, as compact text (the traced and the
// metrics-only runs, and runs on different thread counts, must give the same).
std::string summaryText(const SimSummary& s) {
  std::string out;
  auto add = [&out](int64_t v) { out += std::to_string(v) + ","; };
  add(s.stepTime.count());
  add(s.firstIteration.count());
  add(s.hostStall.count());
  out += std::to_string(s.overlapPercent) + ";";
  for (const IterationSummary& it : s.iterations) {
    for (Nanos n : {it.start, it.stepTime, it.maxRankStepTime, it.forward, it.backward,
                    it.optimizer, it.comm, it.exposedComm, it.overlapped, it.idle, it.hostStall}) {
      add(n.count());
    }
    add(it.collectives);
    for (const std::string& entry : it.collectiveSequence) out += entry + ",";
    out += "|";
  }
  return out;
}

// The same numbers, one field per line, as the golden files hold them.
std::string summaryReport(const SimSummary& s) {
  std::ostringstream o;
  o << "step_time_ns " << s.stepTime.count() << "\nfirst_iteration_ns " << s.firstIteration.count()
    << "\nhost_stall_ns " << s.hostStall.count() << "\noverlap_percent "
    << std::to_string(s.overlapPercent) << "\n";
  int index = 0;
  for (const IterationSummary& it : s.iterations) {
    o << "iteration " << ++index << ": start " << it.start.count() << ", step "
      << it.stepTime.count() << ", max_rank_step " << it.maxRankStepTime.count() << ", forward "
      << it.forward.count() << ", backward " << it.backward.count() << ", optimizer "
      << it.optimizer.count() << ", comm " << it.comm.count() << ", exposed "
      << it.exposedComm.count() << ", overlapped " << it.overlapped.count() << ", idle "
      << it.idle.count() << ", host_stall " << it.hostStall.count() << ", collectives "
      << it.collectives << "\n  sequence";
    for (const std::string& entry : it.collectiveSequence) o << " " << entry;
    o << "\n";
  }
  return o.str();
}

// Per rank and lane: spans, busy time (sum of durations) and the last end; then the whole trace's
// hash (its bytes must stay identical; the digest above it says where a change is).
std::string traceReport(const traces::Timeline& timeline) {
  std::ostringstream o;
  for (int r = 0; r < timeline.rankCount(); ++r) {
    const traces::RankTrack& rank = timeline.rank(r);
    for (const traces::Lane& lane : rank.lanes) {
      int64_t busy = 0, last = 0;
      for (const traces::Span& span : lane.spans) {
        busy += span.duration.count();
        last = std::max(last, span.end().count());
      }
      o << "rank " << rank.rank << " " << lane.name << ": " << lane.spans.size() << " spans, busy "
        << busy << " ns, last end " << last << " ns\n";
    }
  }
  char hash[64];
  std::snprintf(hash, sizeof(hash), "trace fnv1a 0x%016" PRIx64 "\n",
                fnv1a(traces::chromeTraceToString(timeline)));
  return o.str() + hash;
}

// Compares `text` with the golden file `name` (or rewrites it with DDPSCOPE_UPDATE_GOLDENS=1),
// reporting the first differing line of each.
void expectGolden(const std::string& name, const std::string& text) {
  const std::string path = kGoldenDir + name;
  if (const char* update = std::getenv("DDPSCOPE_UPDATE_GOLDENS"); update && *update == '1') {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path << ": missing (DDPSCOPE_UPDATE_GOLDENS=1 writes it)";
  std::stringstream golden;
  golden << in.rdbuf();
  if (golden.str() == text) return;
  std::istringstream want(golden.str()), got(text);
  std::string a, b;
  int line = 0;
  while (true) {
    const bool moreA = static_cast<bool>(std::getline(want, a));
    const bool moreB = static_cast<bool>(std::getline(got, b));
    ++line;
    if (!moreA && !moreB) break;
    if (!moreA || !moreB || a != b) {
      ADD_FAILURE() << path << ":" << line << " differs\n  golden: " << (moreA ? a : "(end)")
                    << "\n  now:    " << (moreB ? b : "(end)");
      return;
    }
  }
}

void expectGoldenRun(const std::string& name, const models::ModelSpec& model,
                     const SimOptions& options, const ComputeModel& compute, const CommModel& comm,
                     double contention) {
  WorldLayout layout;
  layout.nodes = 8;
  layout.gpusPerNode = 8;
  StatusOr<SimResult> traced = simulateDdp(model, layout, options, compute, comm, contention);
  ASSERT_TRUE(traced.isOk()) << traced.status().toString();
  EXPECT_EQ(traced->summary.simulatedRanks, 64);
  EXPECT_EQ(traced->timeline.rankCount(), 64);
  // The metrics-only path (what sweeps and the CLI without --trace run) gives the same summary.
  SimOptions metricsOnly = options;
  metricsOnly.recordTrace = false;
  StatusOr<SimResult> bare = simulateDdp(model, layout, metricsOnly, compute, comm, contention);
  ASSERT_TRUE(bare.isOk()) << bare.status().toString();
  EXPECT_EQ(summaryText(bare->summary), summaryText(traced->summary));
  expectGolden(name + ".summary.txt", summaryReport(traced->summary));
  expectGolden(name + ".trace.txt", traceReport(traced->timeline));
}

// gpt2-small's layers with uneven per-layer times (deterministic), so kernels straddle
// collective boundaries and collectives queue behind each other.
FixedComputeModel unevenCompute(size_t layers) {
  FixedComputeModel compute;
  compute.copyFixedNs = 1500;
  compute.copyBytesPerNs = 400;
  compute.optimizerNs = 900000;
  for (size_t i = 0; i < layers; ++i) {
    const int64_t f = 8000 + static_cast<int64_t>((i * 7919) % 61000);
    compute.perLayer.push_back(LayerTimes{Nanos(f), Nanos(2 * f + 333)});
  }
  return compute;
}

HostModel gpuHost() {
  HostModel host;
  host.runsAhead = true;
  host.kernelLaunch = Nanos(4200);
  host.profile.ddp.allreduceLaunchUs = 77.5;
  host.profile.ddp.gradHookUs = 15;
  host.profile.ddp.copyBackUs = 7.6;
  host.profile.ddp.finalizeWaitUs = 1;
  host.profile.ddp.stepOverheadUs = 460;
  return host;
}

TEST(AllRanksGoldenTest, Gpt2SmallHostAheadJitterStraggler) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("gpt2-small");
  ASSERT_OK(model);
  const FixedComputeModel compute = unevenCompute(model->layers.size());
  AlphaBetaCommModel comm(64, 35000, 30.0);
  SimOptions options;
  options.allRanks = true;
  options.jitterPercent = 5;
  options.seed = 7;
  options.stragglers = {{3, 0.2}, {40, 0.07}};
  options.host = gpuHost();
  expectGoldenRun("gpt2_host_ahead_jitter_straggler", *model, options, compute, comm, 0.15);
}

TEST(AllRanksGoldenTest, Gpt2SmallHostIsStreamJitter) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("gpt2-small");
  ASSERT_OK(model);
  const FixedComputeModel compute = unevenCompute(model->layers.size());
  AlphaBetaCommModel comm(64, 50000, 12.0);
  SimOptions options;
  options.allRanks = true;
  options.jitterPercent = 8;
  options.seed = 11;
  options.ddp.setBucketCapMb(10);
  HostModel host = gpuHost();
  host.runsAhead = false;
  options.host = host;
  expectGoldenRun("gpt2_host_is_stream_jitter", *model, options, compute, comm, 0.1);
}

TEST(AllRanksGoldenTest, UsageClassesFindUnusedJitter) {
  models::ModelSpec model = testing::uniformMlp(12, 1024);
  model.layers[3].use = models::UsePattern{1, 0, {0, 1, 2, 3, 8, 9, 10, 11, 40}};
  model.layers[7].use = models::UsePattern{2, 1, {}};
  FixedComputeModel compute = unevenCompute(model.layers.size());
  AlphaBetaCommModel comm(64, 20000, 8.0);
  SimOptions options;
  options.allRanks = true;
  options.jitterPercent = 3;
  options.seed = 5;
  options.ddp.findUnusedParameters = true;
  options.ddp.setBucketCapMb(5);
  options.iterations = 5;
  expectGoldenRun("usage_classes_find_unused_jitter", model, options, compute, comm, 0.2);
}

}  // namespace
}  // namespace ddpscope::sim

namespace ddpscope::sim {
namespace {

TEST(AllRanksGoldenTest, RoundHalfAwayFromZeroMatchesLlround) {
  std::vector<double> values = {0.0,
                                0.49999999999999994,
                                0.5,
                                1.5,
                                2.5,
                                -0.5,
                                -1.5,
                                -0.49999999999999994,
                                4503599627370495.5,
                                4503599627370497.0,
                                9007199254740993.0,
                                1e18,
                                -1e18};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const double work = static_cast<double>(rng() % 100000000);
    const double scale = 0.9 + static_cast<double>(rng() >> 11) * 0x1.0p-53 * 0.2;
    values.push_back(work * scale);
    values.push_back(static_cast<double>(rng() % 1000000) + 0.5);  // exact ties
  }
  for (double x : values) {
    ASSERT_EQ(internal::roundHalfAwayFromZero(x), std::llround(x)) << x;
  }
}

// The replayer's per-kernel fast paths (kernelEnd: clear of the next busy interval, inside one)
// against the contention integration they shortcut, on random comm streams and kernel sequences
// walked the way a rank walks them (starts never decrease, the window persists).
TEST(AllRanksGoldenTest, KernelEndFastPathsAgreeWithTheIntegration) {
  std::mt19937_64 rng(21);
  int64_t slowedKernels = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int collectives = 1 + static_cast<int>(rng() % 12);
    std::vector<int64_t> ends;
    std::vector<int64_t> busyStarts;
    int64_t issueNs = static_cast<int64_t>(rng() % 1000000);
    for (int k = 0; k < collectives; ++k) {
      issueNs += static_cast<int64_t>(rng() % 50000);
      const int64_t beginNs = std::max(issueNs, ends.empty() ? int64_t{0} : ends.back());
      busyStarts.push_back(beginNs);
      ends.push_back(beginNs + 1 + static_cast<int64_t>(rng() % 80000));
    }
    // Flat contention, none, or one per collective (some 1: NCCL's SM share can be below it).
    std::vector<double> slowdowns(static_cast<size_t>(collectives),
                                  1.0 + static_cast<double>(rng() % 60) / 97.0);
    if (trial % 3 == 1) {
      for (double& x : slowdowns) {
        x = rng() % 4 == 0 ? 1.0 : 1.0 + static_cast<double>(rng() % 60) / 97.0;
      }
    }
    const bool contended = trial % 10 != 0;
    const internal::KernelContext context{ends.data(),      busyStarts.data(), 1,
                                          slowdowns.data(), contended,         collectives};
    int64_t cursor = static_cast<int64_t>(rng() % 1200000);
    internal::BusyWindow window;
    internal::seekBusyWindow(context, window, cursor);
    for (int op = 0; op < 40; ++op) {
      if (rng() % 3 == 0) cursor += static_cast<int64_t>(rng() % 20000);
      const int64_t workNs = rng() % 7 == 0 ? 0 : static_cast<int64_t>(rng() % 60000);
      int32_t firstIdx = 0;
      while (firstIdx < collectives && ends[static_cast<size_t>(firstIdx)] <= cursor) ++firstIdx;
      const int64_t expected = internal::integrateKernel(context, firstIdx, cursor, workNs);
      const int64_t got = internal::kernelEnd(context, window, cursor, workNs);
      ASSERT_EQ(got, expected) << "trial " << trial << " op " << op;
      if (expected != cursor + workNs) ++slowedKernels;
      cursor = got;
    }
  }
  EXPECT_GT(slowedKernels, 10000);  // the slowed paths were exercised
}

// Metrics-only all-ranks runs from 1,024 ranks on replay chunks of ranks on several threads: the
// result does not depend on how many.
TEST(AllRanksGoldenTest, ThreadCountDoesNotChangeTheResult) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("gpt2-small");
  ASSERT_OK(model);
  const FixedComputeModel compute = unevenCompute(model->layers.size());
  AlphaBetaCommModel comm(2048, 35000, 30.0);
  SimOptions options;
  options.allRanks = true;
  options.jitterPercent = 5;
  options.seed = 9;
  options.stragglers = {{1500, 0.1}};
  options.host = gpuHost();
  options.recordTrace = false;
  WorldLayout layout;
  layout.nodes = 256;
  layout.gpusPerNode = 8;
  std::string reference;
  for (unsigned threads : {1u, 2u, 3u, 7u}) {
    options.threads = threads;
    StatusOr<SimResult> result = simulateDdp(*model, layout, options, compute, comm, 0.15);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_EQ(result->summary.simulatedRanks, 2048);
    const std::string text = summaryText(result->summary);
    if (reference.empty()) reference = text;
    EXPECT_EQ(text, reference) << threads << " threads";
  }
  // The straggler (rank 1500, in whichever chunk) sets the pace.
  StatusOr<SimResult> result = simulateDdp(*model, layout, options, compute, comm, 0.15);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const IterationSummary& last = result->summary.iterations.back();
  EXPECT_GT(last.maxRankStepTime, last.stepTime);
}

}  // namespace
}  // namespace ddpscope::sim
