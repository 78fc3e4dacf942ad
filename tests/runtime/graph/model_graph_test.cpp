// ModelGraph: what runs, what reaches the loss, when each parameter is ready — the semantics the
// CPU and the CUDA model share.
#include "runtime/graph/model_graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "models/builders.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime {
namespace {

int layerIndex(const models::ModelSpec& spec, const std::string& name) {
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (spec.layers[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no layer " << name;
  return -1;
}

// Runs the forward bookkeeping with the branch present or skipped; returns the unused params.
std::vector<int> runForward(ModelGraph& g, const models::ModelSpec& spec, bool branchRuns) {
  g.beginForward();
  const int branch = layerIndex(spec, "branch");
  for (int i = 0; i < g.numLayers(); ++i) {
    if (i == branch && !branchRuns) continue;
    if (!g.collectInputs(i, spec.layers[static_cast<size_t>(i)].type == "Add")) continue;
    g.markPresent(i);
  }
  std::vector<int> unused;
  EXPECT_OK(g.finishForward(spec, 1, -1, &unused));
  return unused;
}

TEST(ModelGraphTest, SkippedBranchLeavesItsParametersUnusedAndTheAddPassesThrough) {
  const models::ModelSpec spec = models::makeBranchyMlpSpec({});
  auto g = ModelGraph::build(spec);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  const int branch = layerIndex(spec, "branch");
  const int fc2 = layerIndex(spec, "fc2");

  EXPECT_TRUE(runForward(*g, spec, true).empty());
  EXPECT_TRUE(g->reached(branch));
  for (int p : spec.layers[static_cast<size_t>(branch)].params) EXPECT_EQ(g->fireAt(p), branch);
  for (int p : spec.layers[static_cast<size_t>(fc2)].params) EXPECT_EQ(g->fireAt(p), fc2);

  const std::vector<int> unused = runForward(*g, spec, false);
  EXPECT_EQ(unused, spec.layers[static_cast<size_t>(branch)].params);
  EXPECT_FALSE(g->present(branch));
  EXPECT_FALSE(g->reached(branch));
  for (int p : unused) EXPECT_EQ(g->fireAt(p), ModelGraph::kNotFired);
  // The Add after the branch still ran, with one present producer.
  const int add = fc2 - 1;
  EXPECT_TRUE(g->present(add));
  EXPECT_EQ(g->presentProducers(add).size(), 1u);
}

TEST(ModelGraphTest, TiedHeadWeightIsReadyAfterTheLossHeadOnlyWhenNoLayerOwnsIt) {
  models::ModelSpec spec = models::makeBranchyMlpSpec({});
  auto g = ModelGraph::build(spec);
  ASSERT_OK(g);
  g->beginForward();
  for (int i = 0; i < g->numLayers(); ++i) {
    if (g->collectInputs(i, spec.layers[static_cast<size_t>(i)].type == "Add")) g->markPresent(i);
  }
  const int owned = spec.layers.front().params.front();
  ASSERT_OK(g->finishForward(spec, 1, owned, nullptr));
  EXPECT_EQ(g->fireAt(owned), 0);  // a reached layer owns it: that layer decides
}

TEST(ModelGraphTest, ErrorsNameTheLayer) {
  models::ModelSpec spec = models::makeBranchyMlpSpec({});
  spec.layers[1].inputs = {"nonexistent"};
  auto g = ModelGraph::build(spec);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.status().message(),
            "layer " + spec.layers[1].name + ": input 'nonexistent' is not an earlier layer");

  const models::ModelSpec ok = models::makeBranchyMlpSpec({});
  auto g2 = ModelGraph::build(ok);
  ASSERT_OK(g2);
  g2->beginForward();  // nothing runs
  const Status s = g2->finishForward(ok, 7, -1, nullptr);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "model " + ok.name + ": the output layer " + ok.layers.back().name +
                             " did not run in iteration 7");
}

}  // namespace
}  // namespace ddpscope::runtime
