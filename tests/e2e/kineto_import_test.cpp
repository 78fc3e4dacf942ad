// Kineto (PyTorch profiler) import: the committed fixtures of a real 2-rank gloo DDP job
// (tests/data/torch/gen_fixtures.py) against the ground truth the generator measured, the
// hand-made GPU-style trace, and the error messages; plus `ddpscope import-torch`.
#include "traces/kineto_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "models/model_spec.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_profile.h"
#include "tests/external_data.h"
#include "traces/chrome_reader.h"
#include "traces/classify.h"

namespace ddpscope::traces {
namespace {

using ::testing::HasSubstr;

const std::string kTorchDir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch/";
const std::string kRank0 = kTorchDir + "ddp_gloo_rank0.json.gz";
const std::string kRank1 = kTorchDir + "ddp_gloo_rank1.json.gz";
const std::string kModel = kTorchDir + "ddp_gloo_model.json";

// A model JSON's layers (models/FORMAT.md), as import-torch --model passes them.
std::vector<ImportLayer> layersOf(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json model = nlohmann::json::parse(in);
  std::vector<ImportLayer> layers;
  for (const auto& l : model["layers"]) layers.push_back({l["name"], l["type"]});
  return layers;
}

// The fixture model's layers (ddp_gloo_model.json, exported by models/export/torch_export.py).
std::vector<ImportLayer> fixtureLayers() {
  return layersOf(kModel);
}

// The names of the forward and of the backward compute spans of one iteration, in order.
struct PassNames {
  std::vector<std::string> forward, backward;
};
PassNames layerSpanNames(const RankTrack& track, const Iteration& it) {
  PassNames out;
  for (const Span& s : track.lanes[0].spans) {
    if (s.start < it.start || s.start >= it.end()) continue;
    if (s.category == Category::kForward) out.forward.push_back(s.name);
    if (s.category == Category::kBackward) out.backward.push_back(s.name);
  }
  return out;
}

// Bucket bytes as the summary holds them (nullopt: unknown).
std::vector<std::optional<int64_t>> knownBytes(const std::vector<int64_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

nlohmann::json readTruth() {
  std::ifstream in(kTorchDir + "ddp_gloo_truth.json");
  return nlohmann::json::parse(in);
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ddpscope_kineto_" + name)).string();
}

std::string writeTemp(const std::string& name, const std::string& text) {
  const std::string path = tempPath(name);
  std::ofstream(path) << text;
  return path;
}

const Lane* findLane(const RankTrack& track, std::string_view name) {
  for (const Lane& lane : track.lanes) {
    if (lane.name == name) return &lane;
  }
  return nullptr;
}

// The caller's gzip limit (what the GUI passes: its own largest trace) reaches every file read.
TEST(KinetoImportTest, GzipLimitFromTheOptionsReachesEveryFile) {
  KinetoImportOptions options;
  options.maxGunzipBytes = 1000;
  StatusOr<Timeline> small = importKinetoTraces({kRank0, kRank1}, options);
  ASSERT_FALSE(small.isOk());
  EXPECT_EQ(small.status().message(),
            kRank0 +
                ": gzip: inflates to more than 1000 bytes (the limit for gzip input, against gzip "
                "bombs); set DDPSCOPE_MAX_GUNZIP_MB=MB to raise it");
  options.maxGunzipBytes = 100'000'000;
  StatusOr<Timeline> fits = importKinetoTraces({kRank0, kRank1}, options);
  ASSERT_TRUE(fits.isOk()) << fits.status().message();
  EXPECT_EQ(fits->rankCount(), 2);
}

TEST(KinetoImportTest, GlooFixtureBucketsEqualDdpGroundTruth) {
  const nlohmann::json truth = readTruth();
  const auto expected = knownBytes(truth["bucket_bytes"].get<std::vector<int64_t>>());
  ASSERT_EQ(truth["bucket_count"].get<size_t>(), expected.size());
  ASSERT_GE(expected.size(), 2u);  // the fixture is meant to exercise several buckets

  KinetoImportReport report;
  auto timeline = importKinetoTraces({kRank1, kRank0}, {}, &report);  // any order
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(report.worldSize, 2);
  EXPECT_EQ(report.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(report.files, (std::vector<std::string>{kRank0, kRank1}));
  // The legacy profiler records shapes but no dtypes: every collective is float32-assumed.
  EXPECT_GT(report.collectivesWithAssumedDtype, 0);

  const KinetoImportSummary summary = summarizeImport(*timeline);
  EXPECT_EQ(summary.rankCount, 2);
  EXPECT_EQ(summary.iterationCount, static_cast<int>(truth["ranks"][0]["step_ns"].size()));
  EXPECT_EQ(summary.bucketBytes, expected);
  EXPECT_TRUE(summary.bucketsConsistent);
  for (const auto& it : summary.iterations) {
    EXPECT_EQ(it.bucketBytes, expected) << "rank " << it.rank << " iteration " << it.index;
  }
}

TEST(KinetoImportTest, GlooFixtureMedianStepWithinOnePercentOfGroundTruth) {
  const nlohmann::json truth = readTruth();
  // Ground truth: per iteration, the slowest rank's ProfilerStep duration; then the median.
  std::map<std::string, int64_t> slowest;
  for (const auto& rank : truth["ranks"]) {
    for (const auto& [index, ns] : rank["step_ns"].items()) {
      slowest[index] = std::max(slowest[index], ns.get<int64_t>());
    }
  }
  std::vector<int64_t> steps;
  for (const auto& [index, ns] : slowest) steps.push_back(ns);
  std::sort(steps.begin(), steps.end());
  ASSERT_FALSE(steps.empty());
  const size_t n = steps.size();
  const double expected = n % 2 ? static_cast<double>(steps[n / 2])
                                : (static_cast<double>(steps[n / 2 - 1] + steps[n / 2])) / 2;

  auto timeline = importKinetoTraces({kRank0, kRank1});
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const KinetoImportSummary summary = summarizeImport(*timeline);
  EXPECT_NEAR(static_cast<double>(summary.medianStep.count()), expected, 0.01 * expected);
  // Each rank's own step times too.
  for (const auto& it : summary.iterations) {
    const int64_t truthNs = truth["ranks"][it.rank]["step_ns"][std::to_string(it.index)];
    EXPECT_NEAR(static_cast<double>(it.step.count()), static_cast<double>(truthNs),
                0.01 * static_cast<double>(truthNs));
  }
}

TEST(KinetoImportTest, GlooFixtureStepsAgreeWithAnIndependentClock) {
  // The generator also timed each step with time.perf_counter_ns() around step() +
  // prof.step(). Except the last (prof.step() then stops the profiler and processes its
  // events), that wall time and the imported ProfilerStep window agree within 2 %.
  const nlohmann::json truth = readTruth();
  auto timeline = importKinetoTraces({kRank0, kRank1});
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const KinetoImportSummary summary = summarizeImport(*timeline);
  int compared = 0;
  for (const auto& it : summary.iterations) {
    const auto& wall = truth["ranks"][it.rank]["perf_counter_step_ns"];
    const size_t ordinal = static_cast<size_t>(it.index - 1);  // ProfilerStep#1 is the first
    if (ordinal + 1 >= wall.size()) continue;
    const double wallNs = wall[ordinal].get<double>();
    EXPECT_NEAR(static_cast<double>(it.step.count()), wallNs, 0.02 * wallNs)
        << "rank " << it.rank << " iteration " << it.index;
    ++compared;
  }
  EXPECT_EQ(compared, 2 * (static_cast<int>(truth["ranks"][0]["perf_counter_step_ns"].size()) - 1));
}

TEST(KinetoImportTest, GlooFixtureHasRuntimeLaneLayout) {
  auto timeline = importKinetoTraces({kRank0, kRank1});
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(timeline->metadata().getString("source"), "pytorch-profiler");
  EXPECT_EQ(timeline->metadata().getInt("world_size"), 2);
  EXPECT_EQ(timeline->metadata().getString("backend"), "gloo");
  EXPECT_THAT(std::string(timeline->metadata().getString("files").value_or("")),
              HasSubstr("ddp_gloo_rank1.json.gz"));
  ASSERT_EQ(timeline->rankCount(), 2);
  EXPECT_TRUE(timeline->validateNesting().isOk()) << timeline->validateNesting().message();
  for (const RankTrack& track : timeline->ranks()) {
    ASSERT_GE(track.lanes.size(), 4u);
    EXPECT_EQ(track.lanes[0].name, "compute");
    EXPECT_EQ(track.lanes[0].kind, LaneKind::kCompute);
    EXPECT_EQ(track.lanes[1].name, "comm");
    EXPECT_EQ(track.lanes[1].kind, LaneKind::kComm);
    EXPECT_EQ(track.lanes[2].name, "ddp");
    EXPECT_EQ(track.lanes[3].name, "iterations");
    int forward = 0, backward = 0, optimizer = 0;
    for (const Span& s : track.lanes[0].spans) {
      forward += s.category == Category::kForward;
      backward += s.category == Category::kBackward;
      optimizer += s.category == Category::kOptimizer;
    }
    EXPECT_GT(forward, 0);
    EXPECT_GT(backward, 0);
    EXPECT_GT(optimizer, 0);
    // The first bucket allreduce of each iteration is named like the runtime's.
    bool sawBucket0 = false;
    for (const Span& s : track.lanes[1].spans) {
      if (s.args.getInt(kArgBucket) == 0) {
        EXPECT_EQ(s.name, "allreduce bucket 0");
        EXPECT_EQ(s.category, Category::kAllreduce);
        EXPECT_EQ(s.args.getString("op"), "gloo:all_reduce");
        sawBucket0 = true;
      }
    }
    EXPECT_TRUE(sawBucket0);
    const Lane* ddp = findLane(track, "ddp");
    ASSERT_NE(ddp, nullptr);
    EXPECT_TRUE(std::any_of(ddp->spans.begin(), ddp->spans.end(),
                            [](const Span& s) { return s.name == "forward"; }));
    EXPECT_TRUE(std::any_of(ddp->spans.begin(), ddp->spans.end(),
                            [](const Span& s) { return s.name == "backward"; }));
  }
  // Ranks are aligned on their first common iteration.
  EXPECT_EQ(timeline->iterations(0).front().start, timeline->iterations(1).front().start);
}

TEST(KinetoImportTest, ModelLayersNameTheComputeSpans) {
  KinetoImportOptions options;
  options.layers = fixtureLayers();
  ASSERT_EQ(options.layers.size(), 11u);  // 6 Linear + 5 ReLU
  auto timeline = importKinetoTraces({kRank0, kRank1}, options);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_TRUE(timeline->validateNesting().isOk()) << timeline->validateNesting().message();
  for (const RankTrack& track : timeline->ranks()) {
    for (const Iteration& it : timeline->iterations(timeline->findRank(track.rank).value())) {
      const auto [forward, backward] = layerSpanNames(track, it);
      EXPECT_EQ(forward,
                (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}))
          << "rank " << track.rank << " iteration " << it.index;
      EXPECT_EQ(backward, (std::vector<std::string>{"10 (backward)", "9 (backward)", "8 (backward)",
                                                    "7 (backward)", "6 (backward)", "5 (backward)",
                                                    "4 (backward)", "3 (backward)", "2 (backward)",
                                                    "1 (backward)", "0 (backward)"}))
          << "rank " << track.rank << " iteration " << it.index;
    }
  }
  // Naming changes names only: the buckets are the same.
  EXPECT_EQ(summarizeImport(*timeline).bucketBytes,
            knownBytes(readTruth()["bucket_bytes"].get<std::vector<int64_t>>()));
}

// A real torch 2.15 CPU trace (tests/data/torch-2.15/gen_cpu_layer_traces.py) of an MLP with a
// dropout of p = 0.5 (layer 1) and one of p = 0 (layer 4). On the CPU a dropout's backward is
// the mask's product, MulBackward0 (a GPU records NativeDropoutBackward0), and p = 0 records
// no node at all: the import used to stop at "no backward op matches layer '4' (Dropout)".
TEST(KinetoImportTest, CpuDropoutsBackwardIsItsMasksProductAndNoneAtPZero) {
  const std::string dir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch-2.15/dropout/";
  KinetoImportOptions options;
  options.layers = layersOf(dir + "mlp-dropout-model.json");
  ASSERT_EQ(options.layers.size(), 7u);
  ASSERT_EQ(options.layers[1].type, "Dropout");
  ASSERT_EQ(options.layers[4].type, "Dropout");
  auto timeline = importKinetoTraces({dir + "mlp-dropout-rank0.json.gz"}, options);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const RankTrack& track = timeline->ranks()[0];
  const std::vector<Iteration> iterations = timeline->iterations(0);
  ASSERT_FALSE(iterations.empty());
  for (const Iteration& it : iterations) {
    const auto [forward, backward] = layerSpanNames(track, it);
    EXPECT_EQ(forward, (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"}))
        << "iteration " << it.index;
    EXPECT_EQ(backward, (std::vector<std::string>{"6 (backward)", "5 (backward)", "3 (backward)",
                                                  "2 (backward)", "1 (backward)", "0 (backward)"}))
        << "iteration " << it.index;
  }
}

// A real torch 2.15 CPU trace whose modules ran in ddpscope.layer: ranges
// (tests/data/torch-2.15/gen_cpu_layer_traces.py): its ops are named by those ranges, which
// needs no rule for each op type's backward (the bias-free head on 3-D inputs runs aten::mm,
// whose MmBackward0 no layer type used to name: the import refused it). The block's residual
// add, an op of its own forward, has no span of its own; the trace says how its layers were
// named.
TEST(KinetoImportTest, ACpuTracesLayerRangesNameItsOps) {
  const std::string dir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch-2.15/layer-ranges/";
  KinetoImportOptions options;
  options.layers = layersOf(dir + "block-model.json");
  ASSERT_EQ(options.layers.size(), 7u);
  ASSERT_EQ(options.layers[5].name, "block.add");
  KinetoImportReport report;
  auto timeline = importKinetoTraces({dir + "block-rank0.json.gz"}, options, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(timeline->metadata().getString("layer_spans"),
            std::optional<std::string_view>("cpu-ops-by-range"));
  EXPECT_THAT(report.notes, ::testing::Contains(HasSubstr(
                                "CPU trace: host ops named by layer through the ddpscope.layer: "
                                "ranges; 1 of 7 layers have no ops of their own")));
  const RankTrack& track = timeline->ranks()[0];
  const std::vector<Iteration> iterations = timeline->iterations(0);
  ASSERT_EQ(iterations.size(), 3u);
  for (const Iteration& it : iterations) {
    const auto [forward, backward] = layerSpanNames(track, it);
    EXPECT_EQ(forward, (std::vector<std::string>{"inp", "block.ln", "block.fc", "block.act",
                                                 "block.drop", "head"}))
        << "iteration " << it.index;
    EXPECT_EQ(backward, (std::vector<std::string>{"head (backward)", "block.drop (backward)",
                                                  "block.act (backward)", "block.fc (backward)",
                                                  "block.ln (backward)", "inp (backward)"}))
        << "iteration " << it.index;
  }
}

// The same job recorded without the ranges is matched by kind: its bias-free head's node is
// MmBackward0, taken as the Linear that is due (the match used to stop at "no backward op
// matches layer 'block.add' (Add)"), and the residual add gets spans of its own.
TEST(KinetoImportTest, ACpuTraceWithoutRangesTakesMmBackwardForADueLinear) {
  const std::string dir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch-2.15/layer-ranges/";
  KinetoImportOptions options;
  options.layers = layersOf(dir + "block-model.json");
  KinetoImportReport report;
  auto timeline = importKinetoTraces({dir + "block-noranges-rank0.json.gz"}, options, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  // Every layer of this model has a kind: the note says how it was named, and no more.
  EXPECT_THAT(report.notes, ::testing::Contains(::testing::EndsWith(
                                "block-noranges-rank0.json.gz: CPU trace: host ops matched to "
                                "the layers by their kind")));
  EXPECT_EQ(timeline->metadata().getString("layer_spans"),
            std::optional<std::string_view>("cpu-ops-by-kind"));
  const std::vector<Iteration> iterations = timeline->iterations(0);
  ASSERT_EQ(iterations.size(), 3u);
  for (const Iteration& it : iterations) {
    const auto [forward, backward] = layerSpanNames(timeline->ranks()[0], it);
    EXPECT_EQ(forward, (std::vector<std::string>{"inp", "block.ln", "block.fc", "block.act",
                                                 "block.drop", "block.add", "head"}))
        << "iteration " << it.index;
    EXPECT_EQ(backward, (std::vector<std::string>{"head (backward)", "block.add (backward)",
                                                  "block.drop (backward)", "block.act (backward)",
                                                  "block.fc (backward)", "block.ln (backward)",
                                                  "inp (backward)"}))
        << "iteration " << it.index;
  }
}

// A GPT-2 style block as code outside torch.nn writes it (tests/data/torch-2.15/
// gen_cpu_layer_traces.py, real torch 2.15 CPU DDP jobs): attention with an explicit bmm and
// softmax (the exporter's layer attn.bmm, type Matmul) and Hugging Face's NewGELU written out as
// a module (muls, a pow and a tanh). Matched by kind, the two layers of a type the match has no
// op for get no span (their ops are host ops before the next layer's), which the import says and
// the trace's layer_spans records ("cpu-ops-by-kind", by which replay accepts them); recorded
// inside ddpscope.torch.layer_ranges, NewGELU's module has its own span, and only the ops of no
// module (attn.bmm, the residual adds) have none.
TEST(KinetoImportTest, AGpt2StyleBlocksMatmulAndWrittenOutGeluByKindAndByRange) {
  const std::string dir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch-2.15/layer-ranges/";
  KinetoImportOptions options;
  options.layers = layersOf(dir + "gpt2block-model.json");
  ASSERT_EQ(options.layers.size(), 11u);
  ASSERT_EQ(options.layers[2].name + " " + options.layers[2].type, "attn.bmm Matmul");
  ASSERT_EQ(options.layers[7].name + " " + options.layers[7].type, "act NewGELU");
  for (const std::string trace : {"gpt2block-noranges", "gpt2block"}) {
    SCOPED_TRACE(trace);
    const bool ranges = trace == "gpt2block";
    KinetoImportReport report;
    auto timeline = importKinetoTraces({dir + trace + "-rank0.json.gz"}, options, &report);
    ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
    EXPECT_EQ(timeline->metadata().getString("layer_spans"),
              std::optional<std::string_view>(ranges ? "cpu-ops-by-range" : "cpu-ops-by-kind"));
    EXPECT_THAT(report.notes,
                ::testing::Contains(HasSubstr(
                    ranges ? "ranges; 3 of 11 layers have no ops of their own"
                           : "CPU trace: host ops matched to the layers by their kind; 2 of 11 "
                             "layers are of a type the match has no op for")));
    const std::vector<Iteration> iterations = timeline->iterations(0);
    ASSERT_EQ(iterations.size(), 3u);
    const std::vector<std::string> forward =
        ranges ? std::vector<std::string>{"ln1", "attn.qkv", "attn.proj", "ln2",
                                          "fc",  "act",      "out",       "head"}
               : std::vector<std::string>{"ln1", "attn.qkv", "attn.proj", "add", "ln2",
                                          "fc",  "out",      "add:2",     "head"};
    std::vector<std::string> backward;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      backward.push_back(*it + " (backward)");
    }
    for (const Iteration& it : iterations) {
      const auto names = layerSpanNames(timeline->ranks()[0], it);
      EXPECT_EQ(names.forward, forward) << "iteration " << it.index;
      EXPECT_EQ(names.backward, backward) << "iteration " << it.index;
    }
  }
}

TEST(KinetoImportTest, RejectsModelThatIsNotTheTracedOne) {
  KinetoImportOptions options;
  options.layers = {{"0", "Linear"}, {"1", "ReLU"}, {"2", "Linear"}};  // zoo mlp-tiny
  auto fewer = importKinetoTraces({kRank0, kRank1}, options);
  ASSERT_FALSE(fewer.isOk());
  EXPECT_EQ(fewer.status().message(),
            kRank0 +
                ": rank 0 iteration 1: forward op 'aten::relu' matches no layer: all 3 layers of "
                "the model are already matched (the trace is not of this model; a trace recorded "
                "inside `with ddpscope.torch.layer_ranges(model):` has its layers named by their "
                "ranges, with no match by op kind)");
  options.layers = fixtureLayers();
  options.layers.push_back({"extra", "Conv2d"});
  auto more = importKinetoTraces({kRank0, kRank1}, options);
  ASSERT_FALSE(more.isOk());
  EXPECT_EQ(more.status().message(),
            kRank0 +
                ": rank 0 iteration 1: no forward op matches layer 'extra' (Conv2d): the trace is "
                "not of this model, of a layer order it does not list, or its op for that layer "
                "is of a kind this match has no rule for (a trace recorded inside `with "
                "ddpscope.torch.layer_ranges(model):` has its layers named by their ranges, with "
                "no match by op kind)");
}

TEST(KinetoImportTest, GpuStyleTraceUsesNcclKernelsAndParamCommsBytes) {
  const std::string path = std::string(DDPSCOPE_TEST_DATA_DIR) + "/traces/kineto_ddp_small.json";
  auto missing = importKinetoTraces({path});
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            "rank 0 of world_size 2 missing: give one trace per rank, or import a subset with "
            "--allow-missing-ranks (Python: allow_missing_ranks=True)");

  KinetoImportOptions options;
  options.allowMissingRanks = true;
  KinetoImportReport report;
  auto timeline = importKinetoTraces({path}, options, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  ASSERT_EQ(timeline->rankCount(), 1);
  EXPECT_EQ(timeline->rank(0).rank, 1);
  const Lane* comm = findLane(timeline->rank(0), "comm");
  ASSERT_NE(comm, nullptr);
  ASSERT_FALSE(comm->spans.empty());
  for (const Span& s : comm->spans) {
    EXPECT_THAT(std::string(s.args.getString("op").value_or("")), HasSubstr("nccl"));
  }
  const KinetoImportSummary summary = summarizeImport(*timeline);
  ASSERT_FALSE(summary.bucketBytes.empty());
  EXPECT_EQ(summary.bucketBytes.front(),
            std::optional<int64_t>(1048576 * 4));  // In msg nelems × sizeof(Float)
  EXPECT_THAT(report.notes, ::testing::Contains(HasSubstr("not imported")));
}

// An AMD MI300X-style trace written by hand in the names ROCm's PyTorch profiler uses (HIP
// runtime calls, RCCL's ncclDevKernel_Generic for every collective): the generic kernels are
// tied to their record_param_comms through the launch's correlation id, so the buckets and
// their sizes are found.
const std::string kRcclHip =
    std::string(DDPSCOPE_TEST_DATA_DIR) + "/traces/kineto_rccl_hip_small.json";

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(KinetoImportTest, RcclGenericKernelsAreTiedToTheirCollectiveByTheirLaunch) {
  KinetoImportOptions options;
  options.allowMissingRanks = true;
  KinetoImportReport report;
  auto timeline = importKinetoTraces({kRcclHip}, options, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const KinetoImportSummary summary = summarizeImport(*timeline);
  EXPECT_EQ(summary.bucketBytes, knownBytes({262144 * 4, 65536 * 4}));
  const Lane* comm = findLane(timeline->rank(0), "comm");
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(comm->spans.size(), 2u);
  for (const Span& s : comm->spans) {
    EXPECT_EQ(s.category, Category::kAllreduce);
    EXPECT_THAT(std::string(s.args.getString("op").value_or("")),
                HasSubstr("ncclDevKernel_Generic"));
  }
  EXPECT_EQ(comm->spans[0].duration, Nanos::fromMicros(400));
  EXPECT_THAT(report.notes, ::testing::Not(::testing::Contains(HasSubstr("could not be tied"))));
}

TEST(KinetoImportTest, GenericKernelsWithoutTheirLaunchAreCountedInTheNotes) {
  nlohmann::json doc = nlohmann::json::parse(readText(kRcclHip));
  for (auto& e : doc["traceEvents"]) {
    if (e["cat"] == "cuda_runtime") e["args"].erase("correlation");
  }
  KinetoImportOptions options;
  options.allowMissingRanks = true;
  KinetoImportReport report;
  auto timeline = importKinetoTraceBytes({{"mi300x.json", doc.dump()}}, options, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_TRUE(summarizeImport(*timeline).bucketBytes.empty());
  EXPECT_THAT(report.notes,
              ::testing::Contains(HasSubstr(
                  "mi300x.json: 2 communication kernel(s) whose name does not say their "
                  "collective (ncclDevKernel_Generic; RCCL's ncclDevKernel_Generic and NCCL's "
                  "SendRecv are named so) could not be tied to a collective")));
  // NVIDIA NCCL's SendRecv kernels (all_to_all, send/recv: HTA's 16-A100 trace has 80) are named
  // without a collective too; the note names the kernel it met, not RCCL's.
  for (auto& e : doc["traceEvents"]) {
    if (e["cat"] == "kernel" && e["name"].get<std::string>().starts_with("ncclDevKernel_Generic")) {
      e["name"] =
          "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, "
          "ncclWork*)";
    }
  }
  KinetoImportReport sendRecv;
  auto again = importKinetoTraceBytes({{"a100.json", doc.dump()}}, options, &sendRecv);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_THAT(sendRecv.notes,
              ::testing::Contains(
                  HasSubstr("a100.json: 2 communication kernel(s) whose name does not say "
                            "their collective (ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t; ")));
}

TEST(KinetoImportTest, RejectsGpuOnlyTraceNamingTheProfilerOption) {
  nlohmann::json doc = nlohmann::json::parse(readText(kRcclHip));
  nlohmann::json gpu = nlohmann::json::array();
  for (const auto& e : doc["traceEvents"]) {
    if (e["cat"] == "kernel") gpu.push_back(e);
  }
  doc["traceEvents"] = gpu;
  KinetoImportOptions options;
  options.allowMissingRanks = true;
  auto result = importKinetoTraceBytes({{"gpu-only.json", doc.dump()}}, options);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            "gpu-only.json: GPU activity only, no CPU ops: profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (the CPU side holds the "
            "steps, the launches and DDP's work)");
}

TEST(KinetoImportTest, RuntimeCallTableIsTheDocumentedOne) {
  EXPECT_EQ(classifyRuntimeCall("hipExtModuleLaunchKernel"), RuntimeCall::kLaunch);
  EXPECT_EQ(classifyRuntimeCall("cudaLaunchKernel"), RuntimeCall::kLaunch);
  EXPECT_EQ(classifyRuntimeCall("hipStreamWaitEvent"), RuntimeCall::kStreamWait);
  EXPECT_EQ(classifyRuntimeCall("cudaStreamSynchronize"), RuntimeCall::kSync);
  EXPECT_EQ(classifyRuntimeCall("aten::mm"), RuntimeCall::kNone);
  EXPECT_EQ(classifyRuntimeCall("cudaGetErrorString"), RuntimeCall::kQuery);
  EXPECT_EQ(classifyRuntimeCall("hipPeekAtLastError"), RuntimeCall::kQuery);
  EXPECT_TRUE(isGenericCommKernel("ncclDevKernel_Generic(ncclDevComm*, channelMasks, ncclWork*)"));
  EXPECT_FALSE(isGenericCommKernel(
      "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  // docs/spec/trace-formats.md §2.4 lists every name, in the table's order.
  const std::string doc =
      readText(std::string(DDPSCOPE_SOURCE_DIR) + "/docs/spec/trace-formats.md");
  size_t at = doc.find("### 2.4 GPU runtime calls");
  ASSERT_NE(at, std::string::npos);
  int rows = 0;
  for (const RuntimeName& r : knownRuntimeCalls()) {
    const size_t next = doc.find("| `" + std::string(r.name) + "` |", at);
    EXPECT_NE(next, std::string::npos) << r.name << " is not in the documented table (in order)";
    if (next != std::string::npos) at = next;
    ++rows;
  }
  const size_t tableEnd = doc.find("\n\n", at);
  EXPECT_EQ(doc.substr(at, tableEnd - at).find("\n| `"), std::string::npos)
      << "the documented table lists a call after the last one the code knows";
  EXPECT_EQ(rows, 49);
}

TEST(KinetoImportTest, RejectsNonKinetoTrace) {
  // What torch.autograd.profiler's legacy export_chrome_trace() writes.
  const std::string path = writeTemp(
      "legacy.json",
      R"([{"name": "ProfilerStep#1", "ph": "X", "ts": 1, "dur": 5, "tid": 1, "pid": "CPU functions", "args": {}}])");
  auto result = importKinetoTraces({path});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            path +
                ": not a PyTorch profiler (Kineto) trace: expected an object with "
                "\"schemaVersion\" or \"distributedInfo\" (torch.autograd.profiler's legacy "
                "export_chrome_trace(), used by PyTorch builds without Kineto, writes neither)");
  std::remove(path.c_str());
}

TEST(KinetoImportTest, RejectsTraceWithoutProfilerSteps) {
  const std::string path =
      writeTemp("nosteps.json",
                R"({"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},
          "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                           "ts": 1.0, "dur": 2.0}]})");
  auto result = importKinetoTraces({path});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            path +
                ": no ProfilerStep#N ranges: profile with torch.profiler.profile(schedule=...) "
                "and call prof.step() after every iteration");
  std::remove(path.c_str());
}

TEST(KinetoImportTest, RejectsDuplicatedRank) {
  auto result = importKinetoTraces({kRank0, kRank0});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(), kRank0 +
                                           ": rank 0 (distributedInfo.rank) is also the rank of " +
                                           kRank0 + ": give one trace per rank");
}

TEST(KinetoImportTest, RejectsMissingRank) {
  auto result = importKinetoTraces({kRank1});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            "rank 0 of world_size 2 missing: give one trace per rank, or import a subset with "
            "--allow-missing-ranks (Python: allow_missing_ranks=True)");
}

TEST(KinetoImportTest, RejectsMismatchedWorldSize) {
  const std::string path =
      writeTemp("world4.json",
                R"({"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 4},
          "traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1",
                           "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]})");
  auto result = importKinetoTraces({kRank0, path});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(), path + ": distributedInfo.world_size is 4 but " + kRank0 +
                                           " says 2: the files are not from one job");
  std::remove(path.c_str());
}

// ---- ddpscope import-torch ----

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult runCli(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = cli::runCli(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(ImportTorchCommandTest, WritesTraceAndPrintsSummary) {
  const std::string output = tempPath("run.json");
  CliResult r = runCli({"import-torch", kRank0, kRank1, "-o", output, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["bucket_bytes"], readTruth()["bucket_bytes"]);
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_GT(summary["median_step_ns"].get<int64_t>(), 0);

  // The written trace reads back with the same buckets (it is an ordinary ddpscope trace).
  auto reread = readChromeTrace(output);
  ASSERT_TRUE(reread.isOk()) << reread.status().message();
  EXPECT_EQ(summarizeImport(*reread).bucketBytes,
            knownBytes(readTruth()["bucket_bytes"].get<std::vector<int64_t>>()));
  EXPECT_EQ(reread->metadata().getString("source"), "pytorch-profiler");

  CliResult withMeta = runCli({"import-torch", kRank0, kRank1, "-o", output, "--model", kModel,
                               "--bucket-cap-mb", "0.05", "--batch-per-rank", "16"});
  ASSERT_EQ(withMeta.code, 0) << withMeta.err;
  auto meta = readChromeTrace(output);
  ASSERT_TRUE(meta.isOk()) << meta.status().message();
  EXPECT_EQ(meta->metadata().getString("model"), kModel);
  const auto& computeSpans = meta->rank(0).lanes[0].spans;
  auto firstForward = std::find_if(computeSpans.begin(), computeSpans.end(),
                                   [](const Span& s) { return s.category == Category::kForward; });
  ASSERT_NE(firstForward, computeSpans.end());
  EXPECT_EQ(firstForward->name, "0");  // named by layer
  EXPECT_EQ(meta->metadata().getDouble("bucket_cap_mb"), 0.05);
  EXPECT_EQ(meta->metadata().getInt("batch_per_rank"), 16);
  CliResult badCap = runCli({"import-torch", kRank0, kRank1, "-o", output, "--bucket-cap-mb", "x"});
  EXPECT_EQ(badCap.code, 2);
  EXPECT_THAT(badCap.err, HasSubstr("--bucket-cap-mb"));

  CliResult text = runCli({"import-torch", kRank0, kRank1, "--out", output});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("imported 2 rank(s) of world size 2"));
  EXPECT_THAT(text.out, HasSubstr("bucket 0: 1188392 B"));
  EXPECT_THAT(text.out, HasSubstr("median step:"));
  EXPECT_THAT(text.out, HasSubstr("overlap:"));
  std::remove(output.c_str());
}

TEST(ImportTorchCommandTest, BucketPlanOfTheExportedModelPredictsTheImportedBuckets) {
  // End to end: the model exported from the traced job (torch_export.py), planned by ddpscope
  // with PyTorch 1.13's rules at the job's bucket_cap_mb, gives the buckets DDP reported and
  // the importer measured.
  CliResult plan = runCli({"buckets", "--model", kModel, "--bucket-cap-mb", "0.05",
                           "--torch-version", "1.13", "--json"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  std::vector<int64_t> planned;
  const nlohmann::json planJson = nlohmann::json::parse(plan.out);
  for (const auto& b : planJson["buckets"]) planned.push_back(b["bytes"]);
  EXPECT_EQ(planned, readTruth()["bucket_bytes"].get<std::vector<int64_t>>());
  auto timeline = importKinetoTraces({kRank0, kRank1});
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(summarizeImport(*timeline).bucketBytes, knownBytes(planned));
}

TEST(ImportTorchCommandTest, BadInputExitsTwoWithMessage) {
  CliResult noOutput = runCli({"import-torch", kRank0, kRank1});
  EXPECT_EQ(noOutput.code, 2);
  EXPECT_EQ(noOutput.err,
            "ddpscope import-torch: error: -o/--out: expected the path of the trace to write "
            "(see --help)\n");

  CliResult missingFile = runCli({"import-torch", "/nonexistent/t.json", "-o", tempPath("x")});
  EXPECT_NE(missingFile.code, 0);
  EXPECT_THAT(missingFile.err, HasSubstr("/nonexistent/t.json"));

  CliResult dup = runCli({"import-torch", kRank0, kRank0, "-o", tempPath("x")});
  EXPECT_EQ(dup.code, 2);
  EXPECT_THAT(dup.err, HasSubstr("is also the rank of"));

  CliResult help = runCli({"import-torch", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.out, HasSubstr("ddpscope import-torch"));
  EXPECT_THAT(help.out, HasSubstr("--allow-missing-ranks"));
}

// ---- real torch 2.15 traces (tests/data/torch-2.15/gen_traces.py: torch 2.15.0 from PyPI,
// Kineto's own export_chrome_trace(), 2-rank gloo DDP on CPU) ----

const std::string k215Dir = std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch-2.15/";

nlohmann::json readTruth215() {
  std::ifstream in(k215Dir + "ddp_gloo_truth.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> traces215(const std::string& variant) {
  return {k215Dir + "ddp_gloo_" + variant + "_rank0.json.gz",
          k215Dir + "ddp_gloo_" + variant + "_rank1.json.gz"};
}

std::vector<ImportLayer> layers215() {
  std::ifstream in(k215Dir + "ddp_gloo_model.json");
  const nlohmann::json model = nlohmann::json::parse(in);
  std::vector<ImportLayer> layers;
  for (const auto& l : model["layers"]) layers.push_back({l["name"], l["type"]});
  return layers;
}

// Each rank's steps equal the profiler's own ProfilerStep ranges (prof.events(), recorded by
// the generator), to the trace's µs-with-3-decimals resolution; the bucket count is DDP's.
void expectStepsAndBucketCount(const KinetoImportSummary& summary, const std::string& variant) {
  const nlohmann::json truth = readTruth215();
  const nlohmann::json& ranks = truth["traces"][variant];
  EXPECT_EQ(summary.rankCount, 2);
  EXPECT_EQ(summary.iterationCount, truth["steps_per_trace"].get<int>());
  ASSERT_EQ(summary.iterations.size(), 2 * truth["steps_per_trace"].get<size_t>());
  for (const auto& it : summary.iterations) {
    const auto& steps = ranks[it.rank]["step_ns"];
    ASSERT_TRUE(steps.contains(std::to_string(it.index))) << it.index;
    EXPECT_NEAR(static_cast<double>(it.step.count()), steps[std::to_string(it.index)].get<double>(),
                1.0)
        << "rank " << it.rank << " iteration " << it.index;
    EXPECT_EQ(it.bucketBytes.size(), truth["bucket_count"].get<size_t>());
  }
}

TEST(KinetoImport215Test, RecordShapesTraceGivesDdpsOwnBucketBytes) {
  const nlohmann::json truth = readTruth215();
  EXPECT_THAT(truth["torch_version"].get<std::string>(), ::testing::StartsWith("2.15"));
  KinetoImportReport report;
  auto timeline = importKinetoTraces(traces215("shapes"), {}, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  EXPECT_EQ(report.collectivesWithUnknownBytes, 0);
  const KinetoImportSummary summary = summarizeImport(*timeline);
  expectStepsAndBucketCount(summary, "shapes");
  // gloo:all_reduce carries Input Dims [[n]] and Input type ["float"]: the bytes DDP's
  // logging data reports (ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"])
  EXPECT_EQ(summary.bucketBytes, knownBytes(truth["bucket_bytes"].get<std::vector<int64_t>>()));
  EXPECT_TRUE(summary.bucketsConsistent);
}

TEST(KinetoImport215Test, DefaultProfilerTraceHasUnknownBytesNeverZero) {
  KinetoImportReport report;
  auto timeline = importKinetoTraces(traces215("default"), {}, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const KinetoImportSummary summary = summarizeImport(*timeline);
  expectStepsAndBucketCount(summary, "default");
  for (const auto& b : summary.bucketBytes) EXPECT_EQ(b, std::nullopt);
  EXPECT_GT(report.collectivesWithUnknownBytes, 0);
  EXPECT_THAT(report.notes.back(), HasSubstr("bytes unknown"));
  for (const Lane& lane : timeline->rank(0).lanes) {
    if (lane.kind != LaneKind::kComm) continue;
    for (const Span& s : lane.spans) EXPECT_FALSE(s.args.contains(kArgBytes)) << s.name;
  }
}

TEST(KinetoImport215Test, DefaultProfilerTraceTakesBytesFromTheBucketPlan) {
  const nlohmann::json truth = readTruth215();
  const std::string output = tempPath("215_plan.json");
  // the job's bucket_cap_mb: ddpscope's plan of the exported model is DDP's own layout
  CliResult r =
      runCli({"import-torch", traces215("default")[0], traces215("default")[1], "-o", output,
              "--model", k215Dir + "ddp_gloo_model.json", "--bucket-cap-mb", "0.05", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["bucket_bytes"], truth["bucket_bytes"]);
  EXPECT_EQ(out["collectives_with_unknown_bytes"], 0);
  EXPECT_EQ(out["collectives_sized_from_plan"], 2 * 4 * truth["bucket_count"].get<int>());
  for (const auto& row : out["per_iteration"])
    EXPECT_EQ(row["bucket_bytes"], truth["bucket_bytes"]);
  std::remove(output.c_str());

  // the default bucket_cap_mb (25) plans 2 buckets, the trace has 5 per iteration: an error
  CliResult wrong = runCli({"import-torch", traces215("default")[0], traces215("default")[1], "-o",
                            output, "--model", k215Dir + "ddp_gloo_model.json"});
  EXPECT_EQ(wrong.code, 2);
  EXPECT_THAT(wrong.err, HasSubstr("ddp_gloo_default_rank0.json.gz: rank 0 iteration 2: 5 bucket "
                                   "allreduce(s) in the trace but the bucket plan of model "
                                   "'ddp-gloo-mlp' (bucket_cap_mb 25"));
  EXPECT_THAT(wrong.err, HasSubstr("has 2 bucket(s)"));
}

// A resnet18 job profiled from its first iteration with the default profiler settings
// (tests/data/torch-2.15/gen_replay_traces.py): no collective carries its size. The first
// iteration reduces with DDP's construction plan, the later ones with the rebuilt plan; the
// forward of iteration 1 broadcasts the rebuild's bucket indices and counts; every forward
// broadcasts the buffers, one coalesced broadcast per dtype. The truth is what the job itself
// reported (DDP's logging data, the module's buffers). Before, the first iteration failed the
// import ("1 bucket allreduce(s) in the trace but the bucket plan ... has 12") and the buffer
// broadcasts stayed unsized, so replay refused the trace.
std::vector<int64_t> sizeList(const nlohmann::json& text) {
  std::vector<int64_t> out;
  std::stringstream in(text.get<std::string>());
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

TEST(KinetoImport215Test, DefaultProfilerTraceTakesEveryCollectiveSizeFromTheModel) {
  const std::string dir = k215Dir + "replay/";
  std::ifstream jobFile(dir + "resnet18-cap1-job.json");
  const nlohmann::json job = nlohmann::json::parse(jobFile);
  const std::vector<int64_t> initial = sizeList(job["bucket_sizes"]);
  const std::vector<int64_t> rebuilt = sizeList(job["rebuilt_bucket_sizes"]);
  ASSERT_EQ(initial.size(), 1u);  // torch 2.15 with an explicit cap: one bucket at first
  const std::string output = tempPath("215_resnet18.json");
  CliResult r = runCli({"import-torch", dir + "resnet18-cap1-rank0.json.gz",
                        dir + "resnet18-cap1-rank1.json.gz", "-o", output, "--model", "resnet18",
                        "--bucket-cap-mb", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["collectives_with_unknown_bytes"], 0);
  for (const auto& row : out["per_iteration"]) {
    const std::vector<int64_t> bytes = row["bucket_bytes"].get<std::vector<int64_t>>();
    EXPECT_EQ(bytes, row["iteration"].get<int64_t>() == 0 ? initial : rebuilt) << row;
  }
  const std::vector<int64_t> buffers = {job["buffer_bytes_by_dtype"]["float32"].get<int64_t>(),
                                        job["buffer_bytes_by_dtype"]["int64"].get<int64_t>()};
  const std::vector<int64_t> rebuildSync = {4 * (job["parameter_tensors"].get<int64_t>() + 1),
                                            4 * static_cast<int64_t>(rebuilt.size())};
  auto timeline = readChromeTrace(output);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  for (int ri = 0; ri < timeline->rankCount(); ++ri) {
    // iteration → (start, bytes): the lanes (gloo's two threads) merged back into time order
    std::map<int64_t, std::vector<std::pair<Nanos, int64_t>>> broadcasts;
    for (const Lane& lane : timeline->rank(ri).lanes) {
      for (const Span& s : lane.spans) {
        if (s.category != Category::kBroadcast) continue;
        broadcasts[*s.args.getInt(kArgIteration)].emplace_back(s.start, *s.args.getInt(kArgBytes));
      }
    }
    for (auto& [iteration, started] : broadcasts) {
      std::sort(started.begin(), started.end());
      std::vector<int64_t> bytes;
      for (const auto& [start, b] : started) bytes.push_back(b);
      // issue order: the rebuild's indices and counts, then float32 before int64 (DDP groups
      // the buffers by dtype in order of their first buffer: running_mean comes first)
      std::vector<int64_t> expected = iteration == 1 ? rebuildSync : std::vector<int64_t>{};
      expected.insert(expected.end(), buffers.begin(), buffers.end());
      EXPECT_EQ(bytes, expected) << "rank " << ri << " iteration " << iteration;
    }
    EXPECT_EQ(broadcasts.size(), 16u);  // every iteration, 0..15
  }
  std::remove(output.c_str());
}

TEST(KinetoImport215Test, UnknownBytesAreTextUnknownAndJsonNull) {
  const std::string output = tempPath("215_default.json");
  CliResult text = runCli(
      {"import-torch", traces215("default")[0], traces215("default")[1], "-o", output, "--quiet"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("bucket 0: unknown (no message size in the trace)"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr(" 0 B")));
  CliResult json = runCli(
      {"import-torch", traces215("default")[0], traces215("default")[1], "-o", output, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  ASSERT_EQ(out["bucket_bytes"].size(), 5u);
  for (const auto& b : out["bucket_bytes"]) EXPECT_TRUE(b.is_null());
  EXPECT_GT(out["collectives_with_unknown_bytes"].get<int>(), 0);
  std::remove(output.c_str());
}

// With layer names but no sizes (library use without a plan), the profile keeps the sizes
// unknown and no alpha/beta is fitted to them (the lead's import once fitted alpha = 19 ms and
// beta = 1e6 GB/s to 0-byte collectives).
TEST(KinetoImport215Test, NoCostModelIsFittedToUnknownSizes) {
  KinetoImportOptions options;
  options.layers = layers215();
  auto timeline = importKinetoTraces(traces215("default"), options);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  auto model = models::loadModelFile(k215Dir + "ddp_gloo_model.json");
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto profile = sim::replay::buildProfile(*timeline, *model, "imported.json");
  ASSERT_TRUE(profile.isOk()) << profile.status().message();
  EXPECT_GT(profile->collectivesWithUnknownBytes, 0);
  EXPECT_TRUE(profile->collectives.empty());
  auto fit = sim::replay::fitAlphaBeta({{&*profile, &*model}});
  ASSERT_FALSE(fit.isOk());
  EXPECT_THAT(fit.status().message(),
              HasSubstr("imported.json: " + std::to_string(profile->collectivesWithUnknownBytes) +
                        " collective(s) have no message size"));
  EXPECT_THAT(fit.status().message(), HasSubstr("no cost model is fitted to unknown sizes"));
}

// ---- real GPU traces (NCCL 2.17, from HTA's test data: external, tests/data/EXTERNAL.md) ----

// The 2-GPU resnet50 job: its record_param_comms sizes are the bucket plan ddpscope computes for
// the zoo's resnet50 at DDP's defaults, and the import reports HTA's own overlap number.
TEST(KinetoImportGpuTest, RealResnet50TraceBucketsEqualThePlanAndOverlapEqualsHta) {
  DDPSCOPE_EXTERNAL_FILE(trace, "hta/resnet_2gpu_rank0.json.gz");
  const std::string output = tempPath("resnet.json");
  CliResult r = runCli({"import-torch", trace, "-o", output, "--allow-missing-ranks", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  CliResult plan = runCli({"buckets", "--model", "resnet50", "--json"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  nlohmann::json planned = nlohmann::json::array();
  const nlohmann::json planJson = nlohmann::json::parse(plan.out);
  for (const auto& b : planJson["buckets"]) planned.push_back(b["bytes"]);
  EXPECT_EQ(out["bucket_bytes"], planned);
  EXPECT_EQ(out["iterations"], 3);
  std::ifstream in(std::string(DDPSCOPE_TEST_DATA_DIR) + "/hta/hta_overlap.json");
  const nlohmann::json hta = nlohmann::json::parse(in);
  EXPECT_EQ(out["hta_overlap_percent"]["0"],
            hta["traces"]["$DDPSCOPE_EXTERNAL_DATA/hta/resnet_2gpu_rank0.json.gz"]["0"]);
  std::remove(output.c_str());
}

// A hand-written GPU trace in the shape current PyTorch writes (NCCL >= 2.19 kernel names
// ncclDevKernel_*, record_param_comms with In msg nelems, a CUDA graph replay whose kernels
// carry the cudaGraphLaunch's correlation and no record_param_comms).
TEST(KinetoImportGpuTest, NcclDevKernelsRecordParamCommsAndCudaGraphs) {
  const std::string kernel =
      "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  const std::string path = writeTemp(
      "nccl219.json",
      R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1,
        "nccl_version": "2.21.5"}, "traceEvents": [
      {"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","pid":1,"tid":1,"ts":0,"dur":100},
      {"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":2,"ts":40,"dur":2,
       "args":{"Collective name":"allreduce","dtype":"BFloat16","In msg nelems":1000}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":41,"dur":1,
       "args":{"correlation":5}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":1,
       "args":{"correlation":4}},
      {"ph":"X","cat":"user_annotation","name":"ProfilerStep#8","pid":1,"tid":1,"ts":100,"dur":100},
      {"ph":"X","cat":"cuda_runtime","name":"cudaGraphLaunch","pid":1,"tid":1,"ts":110,"dur":3,
       "args":{"correlation":9}},
      {"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16bf16","pid":0,"tid":7,"ts":20,"dur":40,
       "args":{"device":0,"stream":7,"correlation":4}},
      {"ph":"X","cat":"kernel","name":"KERNEL","pid":0,"tid":13,"ts":45,"dur":30,
       "args":{"device":0,"stream":13,"correlation":5}},
      {"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16bf16","pid":0,"tid":7,"ts":120,"dur":40,
       "args":{"device":0,"stream":7,"correlation":9,"graph node id":3}},
      {"ph":"X","cat":"kernel","name":"KERNEL","pid":0,"tid":13,"ts":130,"dur":50,
       "args":{"device":0,"stream":13,"correlation":9,"graph node id":4}}]})");
  {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at; (at = text.find("KERNEL")) != std::string::npos;) {
      text.replace(at, 6, kernel);
    }
    std::ofstream(path) << text;
  }
  KinetoImportReport report;
  auto timeline = importKinetoTraces({path}, {}, &report);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  const KinetoImportSummary summary = summarizeImport(*timeline);
  ASSERT_EQ(summary.iterations.size(), 2u);
  // step 7: the kernel's size from record_param_comms (1000 bf16 = 2000 B); step 8 (graph
  // replay): no record_param_comms, so unknown
  EXPECT_EQ(summary.iterations[0].bucketBytes,
            (std::vector<std::optional<int64_t>>{int64_t{2000}}));
  EXPECT_EQ(summary.iterations[1].bucketBytes, (std::vector<std::optional<int64_t>>{std::nullopt}));
  EXPECT_EQ(report.collectivesWithUnknownBytes, 1);
  // HTA: kernels launched before ProfilerStep#8 only: comm [45,75), compute [20,60) → 15/30
  ASSERT_EQ(report.htaOverlap.size(), 1u);
  EXPECT_EQ(formatPercent(report.htaOverlap.at(0)), "50.00");
  std::remove(path.c_str());
}

// `ddpscope overlap` on the real resnet50 trace: HTA's 14.31, the filter flagged in JSON, the
// unfiltered ProfilerStep rows with --iterations.
TEST(KinetoImportGpuTest, OverlapCommandPrintsHtasNumber) {
  DDPSCOPE_EXTERNAL_FILE(trace, "hta/resnet_2gpu_rank0.json.gz");
  CliResult text = runCli({"overlap", trace, "--iterations"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("14.31\n"));
  EXPECT_THAT(text.out, HasSubstr("  iter 6"));
  CliResult json = runCli({"overlap", trace, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  EXPECT_EQ(out["ranks"][0]["overlap_percent"], 14.31);
  EXPECT_EQ(out["ranks"][0]["hta_last_step_dropped"], true);
}

// distributedInfo of the real rank-0 fixture replaced by `info` (fuzzing found both cases).
std::string fixtureWithDistributedInfo(const nlohmann::json& info) {
  std::ifstream in(kRank0, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto text = gunzipBytes(gz, kRank0);
  EXPECT_TRUE(text.isOk()) << text.status().message();
  nlohmann::json doc = nlohmann::json::parse(*text);
  doc["distributedInfo"] = info;
  return doc.dump();
}

TEST(KinetoImportTest, RejectsWorldSizeBeyondRankIds) {
  // Was a hang: the import listed the missing ranks of a 10^15-rank world one by one.
  const std::string text =
      fixtureWithDistributedInfo({{"rank", 0}, {"world_size", 1000000000000000}});
  auto result = importKinetoTraceBytes({{"rank0.json", text}});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            "rank0.json: distributedInfo.world_size: expected a rank count in 1..2147483647, got "
            "1000000000000000");
}

TEST(KinetoImportTest, NamesTheFirstMissingRanksOfAHugeWorld) {
  const std::string text = fixtureWithDistributedInfo({{"rank", 0}, {"world_size", 2147483647}});
  auto result = importKinetoTraceBytes({{"rank0.json", text}});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(),
            "ranks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ... (2147483646 in all) "
            "of world_size 2147483647 missing: give one trace per rank, or import a subset with "
            "--allow-missing-ranks (Python: allow_missing_ranks=True)");
  KinetoImportOptions options;
  options.allowMissingRanks = true;
  KinetoImportReport report;
  auto partial = importKinetoTraceBytes({{"rank0.json", text}}, options, &report);
  ASSERT_TRUE(partial.isOk()) << partial.status().message();
  EXPECT_EQ(report.worldSize, 2147483647);
  EXPECT_THAT(report.notes, ::testing::Contains("2147483646 rank(s) of the world not imported"));
}

TEST(KinetoImportTest, RejectsNegativeRank) {
  // Was read as a rank -3 timeline.
  const std::string text = fixtureWithDistributedInfo({{"rank", -3}, {"world_size", 2}});
  auto read = parseChromeTrace(text, "rank.json");
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().message(),
            "rank.json: distributedInfo.rank: expected a rank in 0..2147483647, got -3");
  auto result = importKinetoTraceBytes({{"rank.json", text}});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(), read.status().message());
}

TEST(KinetoImportTest, RejectsRankBeyondInt) {
  // Was read as rank 1: optional<int>::value_or(int64_t) truncated 2^32 + 1 before the range
  // check; with a rank-0 file the two-rank import even succeeded.
  for (const int64_t rank : {int64_t{4294967297}, int64_t{2147483648}, INT64_MAX}) {
    const std::string text = fixtureWithDistributedInfo({{"rank", rank}, {"world_size", 2}});
    auto read = parseChromeTrace(text, "rank1.json");
    ASSERT_FALSE(read.isOk()) << rank;
    EXPECT_EQ(read.status().message(),
              "rank1.json: distributedInfo.rank: expected a rank in 0..2147483647, got " +
                  std::to_string(rank));
    const std::string rank0 = fixtureWithDistributedInfo({{"rank", 0}, {"world_size", 2}});
    auto result = importKinetoTraceBytes({{"rank0.json", rank0}, {"rank1.json", text}});
    ASSERT_FALSE(result.isOk()) << rank;
    EXPECT_EQ(result.status().message(), read.status().message());
  }
  // The largest rank id still reads (as the only rank of an incomplete world).
  const std::string text = fixtureWithDistributedInfo({{"rank", 2147483647}, {"world_size", 2}});
  auto read = parseChromeTrace(text, "rank.json");
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->rank(0).rank, 2147483647);
}

}  // namespace
}  // namespace ddpscope::traces
