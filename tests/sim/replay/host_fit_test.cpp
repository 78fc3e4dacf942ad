// The host lane on real H100 runs (docs/spec/host-lane.md): host facts of the GPU kit's profiled
// PyTorch 2.11 steps (tests/data/gpu/h100/host_facts.json, scripts/gpu_kit/host_facts.py) give
// the host profile; with each layer's GPU kernels as the trace measured them, the simulator at
// world size 1 meets the kit's unprofiled eager and DDP medians.
#include "sim/replay/host_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/file_input.h"
#include "models/zoo.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/kernel_bench.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/replay/trace_host_facts.h"
#include "tests/doc_block.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim::replay {
namespace {

const std::string kFacts = std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h100/host_facts.json";

std::vector<HostFacts> facts() {
  auto f = loadHostFacts(kFacts);
  EXPECT_TRUE(f.isOk()) << f.status().toString();
  return f.isOk() ? *f : std::vector<HostFacts>{};
}

// The facts of every model but the `held`-th: what a held-out fit is fitted on.
std::vector<const HostFacts*> allBut(const std::vector<HostFacts>& all, size_t held) {
  std::vector<const HostFacts*> out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i != held) out.push_back(&all[i]);
  }
  return out;
}

// A kit job's settings: its batch and shapes, bf16 autocast, plain training simulated too.
SimOptions kitOptions(const HostFacts& f) {
  SimOptions options;
  options.inputs = hostFactsInputs(f);
  options.dtype = "bf16";
  options.ddp.autocast = true;
  options.recordTrace = false;
  options.simulatePlain = true;
  return options;
}

ClusterSpec h100() {
  auto c = loadBuiltinCluster("dgx-h100");
  EXPECT_OK(c);
  return *c;
}

TEST(HostFitTest, ReadsTheH100Facts) {
  const std::vector<HostFacts> all = facts();
  ASSERT_EQ(all.size(), 3u);
  for (const HostFacts& f : all) {
    SCOPED_TRACE(f.model);
    EXPECT_GT(f.stepUs, 0);
    EXPECT_GT(f.term("accumulate_grad").count, 100);
    EXPECT_GT(f.measuredMedianMs("eager"), 0);
    EXPECT_GT(f.measuredMedianMs("ddp-default"), 0);
  }
}

// Host terms fitted on two models, the third predicted (its kernels and op counts from its own
// trace: this checks the host lane, not the kernel model). Printed per model; asserted: with the
// host lane every held-out step is nearer the measured median than the same simulation without
// host costs (the kernels alone: −29 to −56 %), and its error is within 35 % (the spread of the
// three traces' own host speeds: the same module types cost 1.7x more host time in the gpt2-small
// trace than in bert-base's, docs/spec/host-lane.md), so a 10 % bound is not reached.
TEST(HostFitTest, HeldOutModelsEagerAndDdpSteps) {
  const std::vector<HostFacts> all = facts();
  ASSERT_EQ(all.size(), 3u);
  const ClusterSpec cluster = h100();
  for (size_t held = 0; held < all.size(); ++held) {
    auto profile = fitHostProfile(allBut(all, held), cluster, "held-out");
    ASSERT_TRUE(profile.isOk()) << profile.status().toString();
    const HostFacts& f = all[held];
    SCOPED_TRACE(f.model);
    auto sim = simulateHostFacts(f, cluster, profile->profile);
    auto off = simulateHostFacts(f, cluster, HostProfile{});
    ASSERT_TRUE(sim.isOk() && off.isOk()) << sim.status().toString();
    const double eager = f.measuredMedianMs("eager");
    const double ddp = f.measuredMedianMs("ddp-default");
    std::printf(
        "%-10s event %.2f module %.2f | eager %.2f vs %.2f (%+.1f %%; kernels alone %+.1f %%)  "
        "ddp %.2f vs %.2f (%+.1f %%; %+.1f %%)  overhead %.2f vs %.2f\n",
        f.model.c_str(), profile->profile.profilerEventUs, profile->profile.profilerModuleUs,
        sim->eagerMs, eager, 100 * (sim->eagerMs / eager - 1), 100 * (off->eagerMs / eager - 1),
        sim->ddpMs, ddp, 100 * (sim->ddpMs / ddp - 1), 100 * (off->ddpMs / ddp - 1),
        sim->ddpMs - sim->eagerMs, ddp - eager);
    EXPECT_LT(std::abs(std::log(sim->eagerMs / eager)), std::abs(std::log(off->eagerMs / eager)));
    EXPECT_LT(std::abs(std::log(sim->ddpMs / ddp)), std::abs(std::log(off->ddpMs / ddp)));
    EXPECT_LT(std::abs(sim->eagerMs / eager - 1), 0.35);
    EXPECT_LT(std::abs(sim->ddpMs / ddp - 1), 0.35);
  }
}

// The same on the H200 kit's five models (tests/data/gpu/h200/host_facts.json: run1's profiled
// steps, the medians of runs 1-3), each held out of a fit on the other four; vit-b16 and
// llama-small were never part of any fit before. The runs recorded the host's unprofiled time
// per phase, so the fit takes the unprofiled route (fitUnprofiledHostTerms). Asserted as on the
// H100: each held-out step is nearer its measured median than the kernels alone; and with the
// unprofiled route every step within 25 % and DDP's overhead over eager within 30 % (the issue's
// bound; the profiled route left resnet50's at 3.2 against 8.8 ms). The table in
// docs/validation.md is this test's output: four of five within 10 % at both steps, resnet50
// +23 / +20 %.
TEST(HostFitTest, HeldOutModelsOnTheH200) {
  auto loaded = loadHostFacts(std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h200/host_facts.json");
  ASSERT_OK(loaded);
  const std::vector<HostFacts>& all = *loaded;
  ASSERT_EQ(all.size(), 5u);
  auto cluster = loadBuiltinCluster("hgx-h200");
  ASSERT_OK(cluster);
  std::string table =
      "| held out | profiler cost per event (the other models' phases) | eager: simulated / "
      "measured | kernels alone | DDP (default cap): simulated / measured | kernels alone | DDP − "
      "eager: simulated / measured |\n|---|---|---|---|---|---|---|\n";
  for (size_t held = 0; held < all.size(); ++held) {
    auto profile = fitHostProfile(allBut(all, held), *cluster, "held-out");
    ASSERT_TRUE(profile.isOk()) << profile.status().toString();
    const HostFacts& f = all[held];
    SCOPED_TRACE(f.model);
    auto sim = simulateHostFacts(f, *cluster, profile->profile);
    auto off = simulateHostFacts(f, *cluster, HostProfile{});
    ASSERT_TRUE(sim.isOk() && off.isOk()) << sim.status().toString();
    const double eager = f.measuredMedianMs("eager");
    const double ddp = f.measuredMedianMs("ddp-default");
    EXPECT_LT(std::abs(std::log(sim->eagerMs / eager)), std::abs(std::log(off->eagerMs / eager)));
    EXPECT_LT(std::abs(std::log(sim->ddpMs / ddp)), std::abs(std::log(off->ddpMs / ddp)));
    EXPECT_LT(std::abs(sim->eagerMs / eager - 1), 0.25);
    EXPECT_LT(std::abs(sim->ddpMs / ddp - 1), 0.25);
    EXPECT_LT(std::abs((sim->ddpMs - sim->eagerMs) / (ddp - eager) - 1), 0.30);
    char row[512];
    std::snprintf(row, sizeof(row),
                  "| %s | %.2f us | %.2f / %.2f ms (%+.1f %%) | %+.1f %% | %.2f / %.2f ms (%+.1f "
                  "%%) | %+.1f %% | %.2f / %.2f ms |\n",
                  f.model.c_str(), profile->profile.profilerEventUs, sim->eagerMs, eager,
                  100 * (sim->eagerMs / eager - 1), 100 * (off->eagerMs / eager - 1), sim->ddpMs,
                  ddp, 100 * (sim->ddpMs / ddp - 1), 100 * (off->ddpMs / ddp - 1),
                  sim->ddpMs - sim->eagerMs, ddp - eager);
    table += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "h200-host-held-out", table);
}

// What the end-to-end rows below charge per step is the zoo's op counts (models::hostOps: the
// type rules, or a layer's own host_ops): here they are checked against what the H200 kit's
// traces counted in the same models' layers under bf16 autocast (tests/data/gpu/h200/
// host_facts.json, the layers' sums; "unattributed", the ops no layer owns, left out): forward
// top-level ops, backward autograd nodes and the CUDA runtime calls of each pass, each total
// within 15 % (the counts have no run-to-run noise: the trace's steps count alike; the bound is
// the rules' spread, per-type means over both kits' models, llama-small's rotary embedding and
// SDPA 10.6 % off at most, with room for the next kit's traces). vit-b16's nn.MultiheadAttention,
// counted as a generic attention core, had 222 forward ops against the trace's 393 before the zoo
// gave its core the module's own counts.
TEST(HostFitTest, ZooOpCountsMatchTheH200Traces) {
  auto loaded = loadHostFacts(std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h200/host_facts.json");
  ASSERT_OK(loaded);
  std::string table =
      "| model | forward ops: zoo / trace | backward nodes | forward runtime calls | backward "
      "runtime calls |\n|---|---|---|---|---|\n";
  for (const HostFacts& f : *loaded) {
    SCOPED_TRACE(f.model);
    auto model = models::loadZooModel(f.model);
    ASSERT_OK(model);
    double zoo[4] = {0, 0, 0, 0}, trace[4] = {0, 0, 0, 0};
    for (const models::LayerSpec& layer : model->layers) {
      const models::HostOps ops = models::hostOps(layer, f.dtype == "bf16");
      zoo[0] += ops.forward;
      zoo[1] += ops.backward;
      zoo[2] += ops.forwardLaunches;
      zoo[3] += ops.backwardLaunches;
    }
    for (const auto& [name, layer] : f.layers) {
      if (name == "unattributed") continue;
      trace[0] += layer.forward.count;
      trace[1] += layer.backward.count;
      trace[2] += layer.forward.runtimeEvents;
      trace[3] += layer.backward.runtimeEvents;
    }
    const char* what[4] = {"forward ops", "backward nodes", "forward runtime calls",
                           "backward runtime calls"};
    table += "| " + f.model;
    for (int k = 0; k < 4; ++k) {
      EXPECT_NEAR(zoo[k] / trace[k], 1.0, 0.15)
          << what[k] << ": zoo " << zoo[k] << ", trace " << trace[k];
      char cell[96];
      std::snprintf(cell, sizeof(cell), " | %.0f / %.0f (%+.1f %%)", zoo[k], trace[k],
                    100 * (zoo[k] / trace[k] - 1));
      table += cell;
    }
    table += " |\n";
  }
  test_docs::expectDocBlock("docs/spec/host-lane.md", "zoo-op-counts", table);
}

// End to end, nothing measured on the predicted model's timings (issue: kernel times that match
// real GPUs): its layers' kernels from the H200's single-layer benchmark (tests/data/gpu/h200/
// kernels, no model layer among its cases; the layers it has no family for and the loss, copies
// and optimizer by the roofline, the clusters' kernel fits left out since they were fitted on
// these models), its op counts the zoo's, the host profile fitted on the other models of the same
// machine (four on the H200, two on the H100), at the kit's batch and shapes under bf16 autocast,
// world size 1. On the H100 the benchmark's times are used as the H200 measured them (the same
// SMs, clocks and tensor cores; carrying them by the bandwidths overstated the H200's lead,
// docs/validation.md). Measured: the median of the kit's run medians, with their range. The
// table in docs/validation.md is this test's output; asserted: each step within 35 % (the host
// held-out test's bound) and nearer than with the roofline's kernels alone, no host.
TEST(HostFitTest, EndToEndZeroShotFromTheKernelBenchAndHeldOutHosts) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (const char* part : {"grid", "supplement"}) {
    const std::string path =
        std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h200/kernels/" + part + ".json.gz";
    auto text = io::readMaybeGzippedFile(path);
    ASSERT_OK(text);
    texts.emplace_back(path, *text);
  }
  auto parsed = KernelBench::parse(texts);
  ASSERT_OK(parsed);
  const auto bench = std::make_shared<const KernelBench>(*std::move(parsed));
  std::string table =
      "| GPU | held out | eager: simulated / measured (runs) | DDP (default cap): simulated / "
      "measured (runs) | DDP − eager: simulated / measured | host stall (DDP) |\n"
      "|---|---|---|---|---|---|\n";
  struct Machine {
    const char* gpu;
    const char* facts;
    const char* cluster;
  };
  for (const Machine& m : {Machine{"H100", "/gpu/h100/host_facts.json", "dgx-h100"},
                           Machine{"H200", "/gpu/h200/host_facts.json", "hgx-h200"}}) {
    auto loaded = loadHostFacts(std::string(DDPSCOPE_TEST_DATA_DIR) + m.facts);
    ASSERT_OK(loaded);
    const std::vector<HostFacts>& all = *loaded;
    auto builtin = loadBuiltinCluster(m.cluster);
    ASSERT_OK(builtin);
    ClusterSpec cluster = *builtin;
    cluster.device.kernelFit = KernelFit{};
    for (size_t held = 0; held < all.size(); ++held) {
      auto profile = fitHostProfile(allBut(all, held), cluster, "held-out");
      ASSERT_TRUE(profile.isOk()) << profile.status().toString();
      const HostFacts& f = all[held];
      SCOPED_TRACE(std::string(m.gpu) + " " + f.model);
      auto model = models::loadZooModel(f.model);
      ASSERT_OK(model);
      // The kit's GPT-2, BERT and ViT register no buffers (their DDP forward broadcast none),
      // the zoo's copies from transformers do: a fact of the job's model, not of its timings.
      if (f.term("ddp_forward").count > 0 && f.term("buffer_sync").count == 0) {
        model->buffers.clear();
      }
      SimOptions options = kitOptions(f);
      auto roofline = makeRooflineComputeModel(cluster.device, options.dtype);
      ASSERT_OK(roofline);
      const BenchComputeModel compute(bench, *std::move(roofline));
      ClusterSpec withHost = cluster;
      withHost.host = profile->profile;
      auto sim = simulate(*model, withHost, WorldLayout{1, 1}, options, &compute);
      ASSERT_TRUE(sim.isOk()) << sim.status().toString();
      ClusterSpec noHost = cluster;
      noHost.host = HostProfile{};
      auto off = simulate(*model, noHost, WorldLayout{1, 1}, options);
      ASSERT_TRUE(off.isOk()) << off.status().toString();
      const double eager = f.measuredMedianMs("eager");
      const double ddp = f.measuredMedianMs("ddp-default");
      const double simEager = sim->summary.plainStep.toMillis();
      const double simDdp = sim->summary.stepTime.toMillis();
      EXPECT_LT(std::abs(simEager / eager - 1), 0.35);
      EXPECT_LT(std::abs(simDdp / ddp - 1), 0.35);
      EXPECT_LT(std::abs(std::log(simDdp / ddp)),
                std::abs(std::log(off->summary.stepTime.toMillis() / ddp)));
      auto range = [&](const char* config) {
        const std::vector<double>& runs = f.measuredMs.at(config);
        char text[64];
        std::snprintf(text, sizeof(text), "%.2f–%.2f", *std::min_element(runs.begin(), runs.end()),
                      *std::max_element(runs.begin(), runs.end()));
        return std::string(text);
      };
      char row[512];
      std::snprintf(row, sizeof(row),
                    "| %s | %s | %.2f / %.2f ms (%+.1f %%; runs %s) | %.2f / %.2f ms (%+.1f %%; "
                    "runs %s) | %.2f / %.2f ms | %.2f ms |\n",
                    m.gpu, f.model.c_str(), simEager, eager, 100 * (simEager / eager - 1),
                    range("eager").c_str(), simDdp, ddp, 100 * (simDdp / ddp - 1),
                    range("ddp-default").c_str(), simDdp - simEager, ddp - eager,
                    sim->summary.hostStall.toMillis());
      table += row;
    }
  }
  test_docs::expectDocBlock("docs/validation.md", "end-to-end-zero-shot", table);
}

// The unprofiled route recovers the terms that made the times: each H200 model's eager and
// default-cap DDP steps simulated (its facts' op and runtime-call counts, world size 1) under a
// known profile, the simulator's own host work per phase given as the measured phase times,
// then fitted: every term comes back.
TEST(HostFitTest, UnprofiledRouteRecoversTheTermsThatMadeThePhaseTimes) {
  auto loaded = loadHostFacts(std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h200/host_facts.json");
  ASSERT_OK(loaded);
  std::vector<HostFacts> all = *loaded;
  auto cluster = loadBuiltinCluster("hgx-h200");
  ASSERT_OK(cluster);
  HostProfile truth;
  truth.name = "truth";
  truth.moduleUs = 20;
  truth.forwardOpUs = 13;
  truth.launchUs = 11;
  truth.backwardNodeUs = 10;
  truth.accumulateGradUs = 2;
  truth.stepUs = 600;
  truth.optimizerUs = 900;
  truth.ddp.gradHookUs = 31;
  truth.ddp.allreduceLaunchUs = 86;
  truth.ddp.stepOverheadUs = 120;
  // The broadcast as its ops cost (host_fit.h): a copy per buffer, a flatten and an unflatten
  // and the collective call per dtype group.
  truth.ddp.bufferCopyUs = truth.forwardOpUs + truth.launchUs;
  truth.ddp.bufferSyncUs = truth.ddp.allreduceLaunchUs + 2 * truth.ddp.bufferCopyUs;
  std::vector<const HostFacts*> fit;
  for (HostFacts& f : all) {
    SCOPED_TRACE(f.model);
    auto model = hostFactsModel(f);
    ASSERT_OK(model);
    SimOptions options = kitOptions(f);
    auto sim = simulateWithHostFacts(f, *model, *cluster, WorldLayout{1, 1}, options, truth);
    ASSERT_OK(sim);
    f.measuredHostMs.clear();
    // The DDP step's phases; plain training's are the same less DDP's terms.
    const HostPhaseWork& w = sim->summary.hostWork;
    f.measuredHostMs["ddp-default"] = {std::vector<double>{w.forward.toMillis()},
                                       std::vector<double>{w.backward.toMillis()}};
    f.rebuiltBuckets["ddp-default"].resize(static_cast<size_t>(sim->summary.numBuckets));
    // Plain training: the same host without DDP's terms.
    HostProfile plainHost = truth;
    plainHost.ddp = DdpOverheads{};
    auto plain = simulateWithHostFacts(f, *model, *cluster, WorldLayout{1, 1}, options, plainHost);
    ASSERT_OK(plain);
    f.measuredHostMs["eager"] = {std::vector<double>{plain->summary.hostWork.forward.toMillis()},
                                 std::vector<double>{plain->summary.hostWork.backward.toMillis()}};
    fit.push_back(&f);
  }
  HostProfile p;
  p.stepUs = truth.stepUs;
  auto used = fitUnprofiledHostTerms(fit, p);
  ASSERT_OK(used);
  EXPECT_TRUE(*used);
  for (const HostTerm& term : hostProfileTerms()) {
    if (std::string(term.key) == "step_us" || std::string(term.key) == "optimizer_us") continue;
    EXPECT_NEAR(p.*term.field, truth.*term.field, 1e-3 * std::max(1.0, truth.*term.field))
        << term.key;
  }
  for (const auto& [key, field] : ddpOverheadTerms()) {
    EXPECT_NEAR(p.ddp.*field, truth.ddp.*field, 1e-3 * std::max(1.0, truth.ddp.*field)) << key;
  }
  // Facts without the times keep the profiled route's terms.
  for (HostFacts& f : all) f.measuredHostMs.clear();
  HostProfile untouched;
  untouched.forwardOpUs = 7;
  auto none = fitUnprofiledHostTerms(fit, untouched);
  ASSERT_OK(none);
  EXPECT_FALSE(*none);
  EXPECT_EQ(untouched.forwardOpUs, 7);
}

// DDP's buffer broadcast in the H200 traces: llama-small broadcasts 1 buffer in 1 call,
// resnet50 159 in 2 (fp32 running stats, int64 counters). The flatten, the call and the unflatten
// are per broadcast, the copies back per buffer: each term is its host time less the profiler's
// per event, over its own count (here with a profiler cost of 0 and of 2 µs per event).
TEST(HostFitTest, BufferBroadcastIsPerBroadcastAndPerBuffer) {
  auto loaded = loadHostFacts(std::string(DDPSCOPE_TEST_DATA_DIR) + "/gpu/h200/host_facts.json");
  ASSERT_OK(loaded);
  for (const HostFacts& f : *loaded) {
    SCOPED_TRACE(f.model);
    const HostWork& sync = f.term("buffer_sync");
    const HostWork& copy = f.term("buffer_copy");
    if (f.model == "llama-small" || f.model == "resnet50") {
      const bool resnet = f.model == "resnet50";
      EXPECT_DOUBLE_EQ(sync.broadcasts, resnet ? 2 : 1);
      EXPECT_DOUBLE_EQ(sync.buffers, resnet ? 159 : 1);
      EXPECT_DOUBLE_EQ(copy.count, sync.buffers);
      for (double e : {0.0, 2.0}) {
        HostProfile profiler;
        profiler.profilerEventUs = e;
        const HostProfile p = hostProfileFromFacts({&f}, profiler);
        EXPECT_NEAR(p.ddp.bufferSyncUs,
                    std::max(0.0, (sync.hostUs - copy.hostUs - e * (sync.events - copy.events)) /
                                      sync.broadcasts),
                    1e-9);
        EXPECT_NEAR(p.ddp.bufferCopyUs, std::max(0.0, (copy.hostUs - e * copy.events) / copy.count),
                    1e-9);
      }
    } else {
      // GPT-2's, BERT's and ViT's modules in the kit register no buffer: nothing is broadcast,
      // and the simulated job has no buffers (the zoo's gpt2-small and bert-base, exported from
      // transformers, have 24 and 2).
      EXPECT_EQ(sync.count, 0);
      auto model = hostFactsModel(f);
      ASSERT_OK(model);
      EXPECT_TRUE(model->buffers.empty());
    }
  }
}

// The built-in profile is the fit on all three traces (`ddpscope host-profile fit --facts
// tests/data/gpu/h100/host_facts.json --name h100-torch211 ...`): refitting gives the committed
// numbers.
TEST(HostFitTest, BuiltinProfileIsTheFitOnAllThree) {
  const std::vector<HostFacts> all = facts();
  std::vector<const HostFacts*> every;
  for (const HostFacts& f : all) every.push_back(&f);
  auto fit = fitHostProfile(every, h100(), "h100-torch211");
  ASSERT_TRUE(fit.isOk()) << fit.status().toString();
  auto builtin = loadBuiltinHostProfile("h100-torch211");
  ASSERT_OK(builtin);
  for (const HostTerm& term : hostProfileTerms()) {
    EXPECT_NEAR(fit->profile.*term.field, (*builtin).*term.field, 1e-3) << term.key;
  }
  for (const auto& [key, field] : ddpOverheadTerms()) {
    EXPECT_NEAR(fit->profile.ddp.*field, builtin->ddp.*field, 1e-3) << key;
  }
  EXPECT_NEAR(fit->profile.profilerEventUs, builtin->profilerEventUs, 1e-3);
  EXPECT_EQ(fit->profile.source, builtin->source);
}

// Zero-shot what a bucket costs at world size 1 (roofline kernels, the zoo's op counts, the
// built-in H100 profile; nothing of these runs but the host profile): DDP at cap 1 against cap 25,
// against the kit's two runs (+8/+11 % resnet50, +9/+15 % gpt2-small, +17/+6 % bert-base): the
// prediction must lie in [0.5 x the lowest, 1.5 x the highest].
TEST(HostFitTest, ZeroShotCostOfSmallBucketsOnTheH100) {
  struct Case {
    const char* model;
    int64_t batch, seqLen, imageSize;
    double low, high;  // percent
  };
  ClusterSpec cluster = h100();
  auto profile = loadBuiltinHostProfile("h100-torch211");
  ASSERT_OK(profile);
  cluster.host = *profile;
  for (const Case& c :
       {Case{"resnet50", 32, 0, 224, 4.0, 16.5}, Case{"gpt2-small", 8, 512, 0, 4.5, 22.5},
        Case{"bert-base", 16, 512, 0, 3.0, 25.5}}) {
    SCOPED_TRACE(c.model);
    auto model = models::loadZooModel(c.model);
    ASSERT_OK(model);
    auto step = [&](double cap) {
      SimOptions options;
      options.inputs = models::ModelInputs{c.batch, c.seqLen, c.imageSize};
      options.dtype = "bf16";
      options.ddp.autocast = true;
      options.ddp.bucketCapMb = cap;
      options.recordTrace = false;
      auto r = simulate(*model, cluster, WorldLayout{1, 1}, options);
      EXPECT_TRUE(r.isOk()) << r.status().toString();
      return r.isOk() ? r->summary.stepTime.toMillis() : 0.0;
    };
    const double cap1 = step(1), cap25 = step(25);
    const double pct = 100 * (cap1 / cap25 - 1);
    std::printf("%-10s cap 1 %.2f ms, cap 25 %.2f ms: %+.1f %% (window %.1f..%.1f)\n", c.model,
                cap1, cap25, pct, c.low, c.high);
    EXPECT_GE(pct, c.low);
    EXPECT_LE(pct, c.high);
  }
}

// The host facts read by ddpscope from a trace (trace_host_facts.h) equal what the kit's script
// (scripts/gpu_kit/host_facts.py) wrote from the same real H100 traces: every term and layer of
// the three models, to the script's rounding (0.001 per step).
HostFacts factsFromTrace(const HostFacts& reference) {
  HostFacts f;
  auto model = models::loadZooModel(reference.model);
  EXPECT_OK(model);
  std::vector<std::string> names;
  for (const models::LayerSpec& layer : model->layers) names.push_back(layer.name);
  const std::string path = std::string(DDPSCOPE_SOURCE_DIR) + "/" + reference.trace;
  auto text = io::readMaybeGzippedFile(path);
  EXPECT_TRUE(text.isOk()) << text.status().toString();
  auto steps = traceHostFactsSteps(*text, path, names);
  EXPECT_TRUE(steps.isOk()) << steps.status().toString();
  if (steps.isOk()) {
    EXPECT_OK(addHostFactsSteps(*steps, path, "steps", f));
  }
  return f;
}

void expectSameWork(const HostWork& a, const HostWork& b, const std::string& what) {
  SCOPED_TRACE(what);
  constexpr double kRounding = 0.0015;  // 0.001 per step after each side's rounding
  EXPECT_NEAR(a.count, b.count, kRounding);
  EXPECT_NEAR(a.hostUs, b.hostUs, kRounding);
  EXPECT_NEAR(a.events, b.events, kRounding);
  EXPECT_NEAR(a.runtimeEvents, b.runtimeEvents, kRounding);
  EXPECT_NEAR(a.kernels, b.kernels, kRounding);
  EXPECT_NEAR(a.kernelUs, b.kernelUs, kRounding);
  EXPECT_NEAR(a.buffers, b.buffers, kRounding);
}

TEST(TraceHostFactsTest, EqualTheKitScriptsFactsOfTheH100Traces) {
  for (const HostFacts& reference : facts()) {
    SCOPED_TRACE(reference.model);
    const HostFacts read = factsFromTrace(reference);
    EXPECT_NEAR(read.stepUs, reference.stepUs, 0.0015);
    EXPECT_NEAR(read.events, reference.events, 0.0015);
    EXPECT_NEAR(read.kernelUs, reference.kernelUs, 0.0015);
    EXPECT_NEAR(read.moduleCalls, reference.moduleCalls, 0.0015);
    ASSERT_EQ(read.terms.size(), reference.terms.size());
    for (const auto& [name, work] : reference.terms) expectSameWork(read.term(name), work, name);
    ASSERT_EQ(read.layers.size(), reference.layers.size());
    for (const auto& [name, layer] : reference.layers) {
      auto it = read.layers.find(name);
      ASSERT_NE(it, read.layers.end()) << name;
      expectSameWork(it->second.forward, layer.forward, name + " forward");
      expectSameWork(it->second.backward, layer.backward, name + " backward");
    }
  }
}

// The message traceHostFactsSteps refuses `trace` with ("accepted" when it does not).
std::string refusal(const char* trace) {
  auto steps = traceHostFactsSteps(trace, "t.json", {"fc"});
  return steps.isOk() ? "accepted" : steps.status().message();
}

TEST(TraceHostFactsTest, TracesWithoutWhatTheFactsNeedAreRefusedSayingWhy) {
  EXPECT_EQ(
      refusal(
          R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":2,"tid":1}]})"),
      "t.json: no ProfilerStep# ranges: profile with a schedule (torch.profiler.schedule) "
      "and call prof.step() after every step");
  EXPECT_EQ(
      refusal(
          R"({"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":9,"tid":1},
                             {"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":2,"tid":1}]})"),
      "t.json: no GPU kernels: the host facts are of a GPU job profiled with "
      "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  EXPECT_NE(
      refusal(
          R"({"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":9,"tid":1},
                             {"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":2,"tid":1},
                             {"ph":"X","cat":"kernel","name":"gemm","ts":3,"dur":2,"tid":7}]})")
          .find("no kernel is linked to a CPU launch"),
      std::string::npos);
  EXPECT_EQ(refusal(R"({"schema":1})"),
            "t.json: not a PyTorch profiler trace (no \"traceEvents\" array)");
}

// A hand-made step with the shapes that matter: a module range with one op, its backward node
// found by sequence number, DDP's hook with its copy-in and allreduce call inside AccumulateGrad,
// the copy back, and the engine's gaps.
TEST(TraceHostFactsTest, CutsAStepIntoLayersAndTerms) {
  const std::string trace = R"({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","ts":0,"dur":1000,"tid":1},
    {"ph":"X","cat":"user_annotation","name":"ddpscope.layer:fc","ts":10,"dur":100,"tid":1},
    {"ph":"X","cat":"cpu_op","name":"aten::linear","ts":20,"dur":60,"tid":1,"args":{"Sequence number":5}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":30,"dur":10,"tid":1,"args":{"correlation":11}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaGetErrorString","ts":41,"dur":1,"tid":1,"args":{"correlation":12}},
    {"ph":"X","cat":"kernel","name":"gemm","ts":50,"dur":40,"tid":9,"args":{"correlation":11}},
    {"ph":"X","cat":"cpu_op","name":"aten::sum","ts":200,"dur":30,"tid":1},
    {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: AddmmBackward0","ts":300,"dur":50,"tid":2,"args":{"Sequence number":5}},
    {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: torch::autograd::AccumulateGrad","ts":360,"dur":100,"tid":2},
    {"ph":"X","cat":"cpu_op","name":"torch::autograd::AccumulateGrad","ts":365,"dur":20,"tid":2},
    {"ph":"X","cat":"cpu_op","name":"torch::distributed::reducer::mul_out","ts":390,"dur":15,"tid":2},
    {"ph":"X","cat":"cpu_op","name":"c10d::allreduce_","ts":410,"dur":40,"tid":2},
    {"ph":"X","cat":"cpu_op","name":"torch.distributed.ddp.reducer::copy_bucket_to_grad","ts":480,"dur":10,"tid":2}
  ]})";
  auto steps = traceHostFactsSteps(trace, "t.json", {"fc", "head"});
  ASSERT_TRUE(steps.isOk()) << steps.status().toString();
  ASSERT_EQ(steps->size(), 1u);
  HostFacts f;
  ASSERT_OK(addHostFactsSteps(*steps, "t.json", "steps", f));
  EXPECT_EQ(f.stepUs, 1000);
  EXPECT_EQ(f.moduleCalls, 1);  // the top-level module range
  const LayerHostFacts& fc = f.layers.at("fc");
  EXPECT_EQ(fc.forward.count, 1);  // aten::linear
  EXPECT_EQ(fc.forward.hostUs, 60);
  EXPECT_EQ(fc.forward.events, 3);  // the op, its launch and a state query
  // The query (cudaGetErrorString) is an event the profiler recorded, not a launch.
  EXPECT_EQ(fc.forward.runtimeEvents, 1);
  EXPECT_EQ(fc.forward.kernelUs, 40);
  EXPECT_EQ(fc.backward.count, 1);  // AddmmBackward0, by its sequence number
  EXPECT_EQ(fc.backward.hostUs, 50);
  EXPECT_EQ(f.term("loss").hostUs, 30);  // aten::sum after the forward
  EXPECT_EQ(f.term("accumulate_grad").hostUs, 100);
  EXPECT_EQ(f.term("accumulate_grad_inner").hostUs, 20);
  EXPECT_EQ(f.term("copy_in").hostUs, 15);
  EXPECT_EQ(f.term("allreduce_call").count, 1);
  EXPECT_EQ(f.term("copy_back").hostUs, 10);
  EXPECT_EQ(f.term("accumulate_grad_gap").hostUs, 10);  // 350 -> 360
  EXPECT_EQ(f.term("backward_other_gap").hostUs, 20);   // 460 -> 480
}

// A trace without module ranges (most users'): the forward ops the import matched to layers
// (by start, ns) own the host work; an op matched to none (BatchNorm's num_batches_tracked
// += 1, which shares the batch_norm's sequence number) leaves the number to the layer's op; the
// job's "## forward ##" / "## backward ##" ranges are looked into (the backward's own time is
// the main thread waiting); a thread that runs no backward node is not the autograd thread.
TEST(TraceHostFactsTest, WithoutRangesTheImportsMatchedOpsOwnTheForward) {
  const std::string trace = R"({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","ts":1000.000,"dur":1000,"tid":1},
    {"ph":"X","cat":"user_annotation","name":"## forward ##","ts":1005.000,"dur":300,"tid":1},
    {"ph":"X","cat":"user_annotation","name":"DistributedDataParallel.forward","ts":1010.000,"dur":250,"tid":1},
    {"ph":"X","cat":"cpu_op","name":"aten::add_","ts":1020.000,"dur":5,"tid":1,"args":{"Sequence number":7}},
    {"ph":"X","cat":"cpu_op","name":"aten::batch_norm","ts":1030.123,"dur":40,"tid":1,"args":{"Sequence number":7}},
    {"ph":"X","cat":"cpu_op","name":"aten::linear","ts":1100.456,"dur":60,"tid":1,"args":{"Sequence number":8}},
    {"ph":"X","cat":"user_annotation","name":"## backward ##","ts":1400.000,"dur":500,"tid":1},
    {"ph":"X","cat":"cpu_op","name":"aten::ones_like","ts":1401.000,"dur":4,"tid":1},
    {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: AddmmBackward0","ts":1500.000,"dur":50,"tid":2,"args":{"Sequence number":8}},
    {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: CudnnBatchNormBackward0","ts":1560.000,"dur":30,"tid":2,"args":{"Sequence number":7}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1010.000,"dur":3,"tid":3,"args":{"correlation":12}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1890.000,"dur":3,"tid":3,"args":{"correlation":13}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1040.000,"dur":3,"tid":1,"args":{"correlation":11}},
    {"ph":"X","cat":"kernel","name":"bn","ts":1050,"dur":40,"tid":9,"args":{"correlation":11}}
  ]})";
  const std::vector<std::string> layers = {"bn", "fc"};
  // The import's matches: batch_norm → bn, linear → fc (ns as the trace writes them).
  const std::vector<std::pair<int64_t, std::string>> matched = {{1030123, "bn"}, {1100456, "fc"}};
  auto steps = traceHostFactsSteps(trace, "t.json", layers, matched);
  ASSERT_TRUE(steps.isOk()) << steps.status().toString();
  HostFacts f;
  ASSERT_OK(addHostFactsSteps(*steps, "t.json", "steps", f));
  const LayerHostFacts& bn = f.layers.at("bn");
  EXPECT_EQ(bn.forward.count, 1);
  EXPECT_EQ(bn.forward.hostUs, 40);
  EXPECT_EQ(bn.backward.count, 1);  // sequence 7, not taken by the add_
  EXPECT_EQ(bn.backward.hostUs, 30);
  EXPECT_EQ(f.layers.at("fc").forward.hostUs, 60);
  EXPECT_EQ(f.layers.at("fc").backward.hostUs, 50);
  EXPECT_EQ(f.layers.at("unattributed").forward.hostUs, 5);  // the add_
  EXPECT_EQ(f.term("ddp_forward").hostUs, 250);              // found inside "## forward ##"
  EXPECT_EQ(f.term("loss").hostUs, 4);  // ones_like; the backward range's wait counts nowhere
  EXPECT_EQ(f.term("main_other").count, 0);
  EXPECT_EQ(f.term("backward_other").count, 0);  // thread 3's launches are not autograd work
  EXPECT_EQ(f.term("backward_other_gap").hostUs, 0);
  // Without the matches, the forward's ops are shared evenly by the top-level layers.
  steps = traceHostFactsSteps(trace, "t.json", layers);
  ASSERT_OK(steps);
  HostFacts none;
  ASSERT_OK(addHostFactsSteps(*steps, "t.json", "steps", none));
  EXPECT_EQ(none.layers.at("bn").forward.hostUs, (5 + 40 + 60) / 2.0);
}

}  // namespace
}  // namespace ddpscope::sim::replay
