// The model read off a PyTorch profiler trace recorded with record_shapes=True
// (traces/kineto_model.h), on real traces: the GPU kit's H100 DDP jobs (tests/data/gpu/h100/run1,
// PyTorch 2.11, bf16 autocast, each module's forward in a ddpscope.layer: range) and the real
// 2-rank gloo job (tests/data/torch). Variants without the ranges, the shapes or the gradient
// accumulation are these traces with those events taken out in memory. Then `import-torch`
// without --model, and replay / plan of what it wrote without --model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/file_input.h"
#include "models/model_resolver.h"
#include "tests/cli/cli_test_util.h"
#include "tests/status_matchers.h"
#include "traces/chrome_reader.h"
#include "traces/kineto_model.h"

namespace ddpscope::traces {
namespace {

using cli::testing::CliResult;
using cli::testing::runCliForTest;
using cli::testing::scratchDir;
using cli::testing::writeScratchFile;
using ::testing::HasSubstr;

const std::string kH100 = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
const std::vector<std::string> kH100Models = {"resnet50", "gpt2-small", "bert-base"};

std::string h100Trace(const std::string& model) {
  return kH100 + model + "-ddp-default-rank0.json.gz";
}

nlohmann::json readTraceJson(const std::string& path) {
  StatusOr<std::string> text = io::readMaybeGzippedFile(path);
  EXPECT_TRUE(text.isOk()) << text.status().message();
  return nlohmann::json::parse(text.isOk() ? *text : "{}");
}

// The trace without the events `drop` names (or with `edit` applied to each event).
nlohmann::json without(nlohmann::json trace,
                       const std::function<bool(const nlohmann::json&)>& drop) {
  auto& events = trace["traceEvents"];
  events.erase(std::remove_if(events.begin(), events.end(), drop), events.end());
  return trace;
}

bool isLayerRange(const nlohmann::json& e) {
  return e.value("name", "").starts_with("ddpscope.layer:");
}

StatusOr<TraceModel> modelOf(const nlohmann::json& trace, const std::string& name) {
  ASSIGN_OR_RETURN(Timeline timeline, parseChromeTrace(trace.dump(), name));
  return readTraceModel(timeline.rank(0), name);
}

std::vector<std::vector<int64_t>> sortedShapes(std::vector<std::vector<int64_t>> shapes) {
  std::sort(shapes.begin(), shapes.end());
  return shapes;
}

// Each model's parameters, as many and as large as the zoo's (the model the job trained), in
// float32 (autocast keeps the parameters in fp32), and the same from the forward's ops when the
// trace has no ranges: the gradient-ready order is the trace's either way.
TEST(TraceModelTest, H100TracesGiveTheZooModelsParametersWithOrWithoutRanges) {
  for (const std::string& name : kH100Models) {
    SCOPED_TRACE(name);
    const nlohmann::json trace = readTraceJson(h100Trace(name));
    StatusOr<TraceModel> ranged = modelOf(trace, name);
    ASSERT_TRUE(ranged.isOk()) << ranged.status().message();
    EXPECT_TRUE(ranged->fromRanges);
    EXPECT_EQ(ranged->iteration, 2);
    StatusOr<models::ModelSpec> zoo = models::resolveModel(name);
    ASSERT_OK(zoo);
    ASSERT_EQ(ranged->params.size(), zoo->params.size());
    std::vector<std::vector<int64_t>> traced, expected;
    for (const TraceModelParam& p : ranged->params) {
      EXPECT_EQ(p.dtype, "float32");
      EXPECT_GE(p.layer, 0) << "a parameter tied to no layer";
      traced.push_back(p.shape);
    }
    for (const models::ParamSpec& p : zoo->params) expected.push_back(p.shape);
    EXPECT_EQ(sortedShapes(traced), sortedShapes(expected));

    StatusOr<TraceModel> fromOps = modelOf(without(trace, isLayerRange), name);
    ASSERT_TRUE(fromOps.isOk()) << fromOps.status().message();
    EXPECT_FALSE(fromOps->fromRanges);
    ASSERT_EQ(fromOps->params.size(), ranged->params.size());
    for (size_t i = 0; i < fromOps->params.size(); ++i) {
      EXPECT_EQ(fromOps->params[i].shape, ranged->params[i].shape) << i;
      ASSERT_GE(fromOps->params[i].layer, 0) << i;
    }
    // Without ranges a layer is one op, named by it: every 4-d parameter (resnet50's conv
    // weights) belongs to a conv2d layer, and every other parameter to a layer of a kind that
    // owns parameters.
    for (const TraceModelParam& p : fromOps->params) {
      const ImportLayer& owner = fromOps->layers[static_cast<size_t>(p.layer)];
      if (p.shape.size() == 4) {
        EXPECT_EQ(owner.type, "Conv2d") << owner.name;
      }
      EXPECT_THAT(
          std::vector<std::string>({"Conv2d", "BatchNorm2d", "Linear", "LayerNorm", "Embedding"}),
          ::testing::Contains(owner.type))
          << owner.name;
    }
  }
}

// What is missing is named, with the profiler option that records it.
TEST(TraceModelTest, TracesWithoutShapesOrAccumulationSayWhatToRecord) {
  const nlohmann::json trace = readTraceJson(h100Trace("resnet50"));
  nlohmann::json noShapes = trace;
  for (auto& e : noShapes["traceEvents"]) {
    if (e.value("name", "") == "torch::autograd::AccumulateGrad" && e.contains("args")) {
      e["args"].erase("Input Dims");
    }
  }
  StatusOr<TraceModel> m = modelOf(noShapes, "no-shapes.json");
  ASSERT_FALSE(m.isOk());
  EXPECT_THAT(m.status().message(),
              HasSubstr("no-shapes.json: ProfilerStep#2: torch::autograd::AccumulateGrad without "
                        "\"Input Dims\": the trace has no parameter shapes; profile with "
                        "torch.profiler.profile(record_shapes=True), or give --model"));

  m = modelOf(without(trace,
                      [](const nlohmann::json& e) {
                        return e.value("name", "").find("AccumulateGrad") != std::string::npos;
                      }),
              "no-accumulate.json");
  ASSERT_FALSE(m.isOk());
  EXPECT_THAT(m.status().message(),
              HasSubstr("no-accumulate.json: no torch::autograd::AccumulateGrad node in any "
                        "profiled step"));

  m = modelOf(without(trace,
                      [](const nlohmann::json& e) {
                        const std::string name = e.value("name", "");
                        return isLayerRange(e) || name == "DistributedDataParallel.forward";
                      }),
              "no-forward.json");
  ASSERT_FALSE(m.isOk());
  EXPECT_THAT(m.status().message(),
              HasSubstr("has neither ddpscope.layer: ranges nor a DistributedDataParallel.forward "
                        "range"));
}

double replayError(const std::vector<std::string>& args) {
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  if (r.exitCode != 0) return 1e9;
  return nlohmann::json::parse(r.out)["replay_error_percent"].get<double>();
}

// import-torch without --model keeps the model read off the trace; its steady buckets are the
// allreduces the job issued (the bucket plan of its parameters in the order autograd made them
// ready), and plan needs no --model. (Replay without it: ReplayCliTest's H100 table.)
TEST(TraceModelTest, ImportWithoutAModelKeepsTheTracesModelWhoseBucketsAreTheJobs) {
  for (const std::string& name : kH100Models) {
    SCOPED_TRACE(name);
    const std::string run = (scratchDir() / (name + "-own-model.json")).string();
    CliResult imported = runCliForTest({"import-torch", h100Trace(name), "-o", run, "--json"});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    const auto summary = nlohmann::json::parse(imported.out);
    const auto& own = summary["model_from_trace"];
    ASSERT_TRUE(own.is_object()) << imported.out;
    EXPECT_EQ(own["layers_from"], "ranges");
    StatusOr<models::ModelSpec> zoo = models::resolveModel(name);
    ASSERT_OK(zoo);
    EXPECT_EQ(own["parameters"], zoo->numTensors());
    EXPECT_EQ(own["bytes"], zoo->totalBytes());

    // The kept model's bucket plan is the job's.
    const nlohmann::json written = readTraceJson(run);
    const std::string modelFile = writeScratchFile(
        name + "-own-model.model.json", written["otherData"]["model_json"].get<std::string>());
    CliResult buckets = runCliForTest({"buckets", "--model", modelFile, "--json"});
    ASSERT_EQ(buckets.exitCode, 0) << buckets.err;
    const auto bucketPlan = nlohmann::json::parse(buckets.out);
    std::vector<int64_t> planned;
    for (const auto& b : bucketPlan["buckets"]) {
      planned.push_back(b["bytes"].get<int64_t>());
    }
    EXPECT_EQ(nlohmann::json(planned), summary["bucket_bytes"]);

    // Naming kernels by layer leaves the overlap the kernels' own (a layer's span from its first
    // kernel to its last is not compute time): the same as the import of this trace with no
    // model to read (its AccumulateGrad shapes removed), whose kernels stay unnamed.
    nlohmann::json unnamed = readTraceJson(h100Trace(name));
    for (auto& e : unnamed["traceEvents"]) {
      if (e.value("name", "") == "torch::autograd::AccumulateGrad" && e.contains("args")) {
        e["args"].erase("Input Dims");
      }
    }
    const std::string unnamedSource = writeScratchFile(name + "-unnamed.json", unnamed.dump());
    CliResult plain =
        runCliForTest({"import-torch", unnamedSource, "-o",
                       (scratchDir() / (name + "-unnamed-run.json")).string(), "--json"});
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    const auto plainSummary = nlohmann::json::parse(plain.out);
    ASSERT_TRUE(plainSummary["model_from_trace"].is_null());
    EXPECT_EQ(summary["overlap_percent"], plainSummary["overlap_percent"]);
    EXPECT_EQ(summary["median_exposed_comm_ns"], plainSummary["median_exposed_comm_ns"]);

    // plan takes the trace's model too.
    CliResult plan = runCliForTest(
        {"plan", "--from-trace", run, "--cluster", "dgx-h100", "--world-size", "8", "--json"});
    EXPECT_EQ(plan.exitCode, 0) << plan.err;
  }
}

// One profiled step is enough: the first of the resnet50 trace's two steps cut away (its events
// and its ProfilerStep range), the second imports without --model and replays within 5 %.
TEST(TraceModelTest, OneProfiledStepImportsAndReplaysWithoutAModel) {
  nlohmann::json trace = readTraceJson(h100Trace("resnet50"));
  double first = 0, firstEnd = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == "ProfilerStep#1" && e.value("cat", "") == "user_annotation") {
      first = e["ts"].get<double>();
      firstEnd = first + e["dur"].get<double>();
    }
  }
  ASSERT_LT(first, firstEnd);
  trace = without(trace, [&](const nlohmann::json& e) {
    const double ts = e.value("ts", -1.0);
    return e.value("name", "") == "ProfilerStep#1" ||
           (e.value("ph", "") == "X" && ts >= first && ts < firstEnd);
  });
  const std::string source = writeScratchFile("resnet50-one-step.json", trace.dump());
  const std::string run = (scratchDir() / "resnet50-one-step-run.json").string();
  CliResult imported = runCliForTest({"import-torch", source, "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  const auto summary = nlohmann::json::parse(imported.out);
  EXPECT_EQ(summary["iterations"], 1);
  EXPECT_TRUE(summary["model_from_trace"].is_object());
  CliResult r = runCliForTest(
      {"replay", "--from-trace", run, "--cluster", "dgx-h100", "--world-size", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["measured_iterations"], nlohmann::json::array({2}));
  EXPECT_LE(std::abs(j["replay_error_percent"].get<double>()), 5.0) << r.out;
}

// The real 2-rank gloo job on CPU (no ranges, no "Input type": float32 as for collectives): the
// model read from its forward ops is the exported model's structure (six Linear layers and their
// ReLUs, the same shapes), and replay without --model lands within 0.5 points of replay with it.
TEST(TraceModelTest, GlooCpuJobReplaysWithoutAModelLikeWithTheExportedOne) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch/";
  const std::string run = (scratchDir() / "gloo-own-model.json").string();
  CliResult imported = runCliForTest({"import-torch", dir + "ddp_gloo_rank0.json.gz",
                                      dir + "ddp_gloo_rank1.json.gz", "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  const auto own = nlohmann::json::parse(imported.out)["model_from_trace"];
  ASSERT_TRUE(own.is_object()) << imported.out;
  EXPECT_EQ(own["layers_from"], "ops");
  StatusOr<models::ModelSpec> exported = models::loadModelFile(dir + "ddp_gloo_model.json");
  ASSERT_OK(exported);
  EXPECT_EQ(own["parameters"], exported->numTensors());
  EXPECT_EQ(own["bytes"], exported->totalBytes());
  EXPECT_EQ(own["layers"], exported->layers.size());
  const nlohmann::json written = readTraceJson(run);
  StatusOr<models::ModelSpec> read =
      models::parseModelJson(written["otherData"]["model_json"].get<std::string>(), "model_json");
  ASSERT_TRUE(read.isOk()) << read.status().message();
  for (size_t i = 0; i < exported->layers.size(); ++i) {
    EXPECT_EQ(read->layers[i].type, exported->layers[i].type) << i;
  }
  for (size_t i = 0; i < exported->params.size(); ++i) {
    EXPECT_EQ(read->params[i].shape, exported->params[i].shape) << i;
  }
  const double withoutModel = replayError({"replay", "--from-trace", run, "--json"});
  const std::string exportedRun = (scratchDir() / "gloo-exported-model.json").string();
  ASSERT_EQ(
      runCliForTest({"import-torch", dir + "ddp_gloo_rank0.json.gz", dir + "ddp_gloo_rank1.json.gz",
                     "--model", dir + "ddp_gloo_model.json", "-o", exportedRun})
          .exitCode,
      0);
  const double withModel = replayError(
      {"replay", "--from-trace", exportedRun, "--model", dir + "ddp_gloo_model.json", "--json"});
  EXPECT_NEAR(withoutModel, withModel, 0.5);
}

// What ties a kernel to the op that launched it is the 'correlation' arg both carry; a trace that
// lost it (trimmed or converted by another tool) cannot name any kernel by layer, and the import
// says which arg is missing and which profiler setting writes it (it asked "is this the model
// the trace was recorded with?").
TEST(TraceModelTest, ATraceWithoutCorrelationIdsSaysWhatTiesKernelsToTheirLaunches) {
  const nlohmann::json trace = readTraceJson(h100Trace("resnet50"));
  for (const bool kernelsToo : {true, false}) {
    SCOPED_TRACE(kernelsToo ? "no correlation anywhere" : "launch calls without one");
    nlohmann::json cut = trace;
    for (auto& e : cut["traceEvents"]) {
      const bool kernel = e.value("cat", "") == "kernel";
      if (e.contains("args") && (kernelsToo || !kernel)) e["args"].erase("correlation");
    }
    const std::string source = writeScratchFile("resnet50-no-correlation.json", cut.dump());
    const CliResult r =
        runCliForTest({"import-torch", source, "--model", "resnet50", "--autocast", "-o",
                       (scratchDir() / "resnet50-no-correlation-run.json").string()});
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_THAT(r.err, HasSubstr(kernelsToo ? "kernels carries a 'correlation' arg"
                                            : "none of its CUDA/HIP launch calls carries a "
                                              "'correlation' arg"));
    EXPECT_THAT(r.err, HasSubstr("activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"));
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("is this the model")));
  }
}

// A trace that holds no model imports as before, with a note; replay then asks for --model and
// says which profiler option would have recorded one.
TEST(TraceModelTest, WithoutShapesImportGoesOnAndReplayAsksForTheModel) {
  nlohmann::json trace = readTraceJson(h100Trace("gpt2-small"));
  for (auto& e : trace["traceEvents"]) {
    if (e.contains("args")) e["args"].erase("Input Dims");
  }
  const std::string source = writeScratchFile("gpt2-no-shapes.json", trace.dump());
  const std::string run = (scratchDir() / "gpt2-no-shapes-run.json").string();
  CliResult imported = runCliForTest({"import-torch", source, "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  const auto summary = nlohmann::json::parse(imported.out);
  EXPECT_TRUE(summary["model_from_trace"].is_null());
  EXPECT_THAT(summary["notes"].dump(), HasSubstr("no model read from the trace"));
  CliResult r = runCliForTest({"replay", "--from-trace", run, "--cluster", "dgx-h100"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("holds none read from its shapes (import-torch reads one from a "
                               "profile recorded with record_shapes=True); give --model"));
}

// The H100 resnet50 job's forward called each first bottleneck's downsample before its main
// branch, where the zoo's resnet50 lists it after bn3, so its buckets follow that order (only the
// first two of its five are the zoo order's). With --model, import-torch compares the trace's
// collectives with DDP's plan, and sizes those the profiler recorded no size for from it: both
// against the plan in the run's order. Without the collectives' sizes (their msg nelems and
// Input Dims taken out), the buckets come out the traced ones to the byte.
TEST(TraceModelTest, ImportWithAModelInAnotherOrderTakesThePlanInTheRunsOrder) {
  const std::vector<std::string> args = {"--model", "resnet50", "--autocast", "--json", "-o"};
  std::vector<std::string> sized = {"import-torch", h100Trace("resnet50")};
  sized.insert(sized.end(), args.begin(), args.end());
  sized.push_back((scratchDir() / "r50-sized-run.json").string());
  const CliResult traced = runCliForTest(sized);
  ASSERT_EQ(traced.exitCode, 0) << traced.err;
  const auto tracedSummary = nlohmann::json::parse(traced.out);
  EXPECT_EQ(tracedSummary["collectives_sized_from_plan"], 0);
  EXPECT_EQ(tracedSummary["notes"].dump().find("differ in size from the bucket plan"),
            std::string::npos)
      << tracedSummary["notes"].dump();
  ASSERT_EQ(tracedSummary["bucket_bytes"].size(), 5u);

  nlohmann::json trace = readTraceJson(h100Trace("resnet50"));
  for (auto& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    const bool comm =
        name == "record_param_comms" || name.starts_with("c10d::") || name.starts_with("nccl:");
    if (comm && e.contains("args")) {
      for (const char* key : {"In msg nelems", "Out msg nelems", "Input Dims"}) {
        e["args"].erase(key);
      }
    }
  }
  std::vector<std::string> unsized = {"import-torch",
                                      writeScratchFile("r50-unsized.json", trace.dump())};
  unsized.insert(unsized.end(), args.begin(), args.end());
  unsized.push_back((scratchDir() / "r50-unsized-run.json").string());
  const CliResult planned = runCliForTest(unsized);
  ASSERT_EQ(planned.exitCode, 0) << planned.err;
  const auto plannedSummary = nlohmann::json::parse(planned.out);
  EXPECT_GT(plannedSummary["collectives_sized_from_plan"].get<int64_t>(), 0);
  EXPECT_EQ(plannedSummary["bucket_bytes"], tracedSummary["bucket_bytes"]);
  EXPECT_THAT(plannedSummary["notes"].dump(),
              HasSubstr("bytes from the bucket plan (allreduces) and the buffers (broadcasts) of "
                        "model 'resnet50' (bucket_cap_mb 25, semantics 2.15), its layers in the "
                        "run's forward order"));
}

}  // namespace
}  // namespace ddpscope::traces
