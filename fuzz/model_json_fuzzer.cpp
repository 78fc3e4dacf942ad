// Fuzz target: the model JSON loader (models/FORMAT.md), both the full format (layers, FLOPs
// polynomials, buffers, grad_ready_order) and a bare parameter list. An accepted model must keep
// the loader's promises: a non-empty parameter list, a gradient-ready order that is a
// permutation of the parameters, and a construction bucket plan that places each parameter in
// exactly one bucket.
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "fuzz/fuzz_util.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  auto model = models::parseModelJson(fuzz::asText(data, size), "fuzz.json");
  if (!model.isOk()) {
    FUZZ_CHECK(!model.status().message().empty(), "an error without a message");
    return 0;
  }
  const int64_t n = model->numTensors();
  FUZZ_CHECK(n > 0, "a model without parameters was accepted");
  (void)model->numParams();
  (void)model->totalBytes();
  (void)model->forwardFlops(model->defaultInputs);

  const std::vector<int> order = model->gradReadyOrder();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  FUZZ_CHECK(static_cast<int64_t>(order.size()) == n, "ready order size != parameter count");
  for (int p : order) {
    FUZZ_CHECK(p >= 0 && p < n && !seen[static_cast<size_t>(p)], "ready order not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }

  ddp::DdpConfig config;
  config.setBucketCapMb(1);  // small buckets: several per model
  auto plan = ddp::constructionPlan(*model, config);
  if (plan.isOk()) {
    FUZZ_CHECK(plan->numParams() == n, "plan does not cover every parameter");
    int64_t placed = 0;
    for (const auto& b : plan->buckets) placed += static_cast<int64_t>(b.params.size());
    FUZZ_CHECK(placed == n, "a parameter in several buckets or none");
  }
  auto steady = ddp::steadyStatePlan(*model, config);
  if (steady.isOk()) FUZZ_CHECK(steady->numParams() == n, "steady plan does not cover every param");
  return 0;
}
