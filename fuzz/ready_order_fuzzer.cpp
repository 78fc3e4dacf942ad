// Fuzz target: the gradient-ready order inputs of `ddpscope buckets` — the text of
// --ready-order-file (a JSON array, {"grad_ready_order": [...]}, or plain comma/space separated
// text; --ready-order's value is the plain-text case) — and the rebuild that consumes the order
// (ddp/bucket_plan.h validateReadyOrder, steadyStatePlan). The first input byte picks the model
// (mlp-tiny, resnet18 or a zoo-free three-parameter model) and the bucket cap; the rest is the
// file's text. An accepted order must be a permutation of the model's parameters and its plan
// must place each parameter in exactly one bucket; anything else must be an error.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "api/buckets_request.h"
#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "fuzz/fuzz_util.h"
#include "models/model_spec.h"
#include "models/zoo.h"

namespace {

const ddpscope::models::ModelSpec& model(int which) {
  static const std::vector<ddpscope::models::ModelSpec> models = [] {
    std::vector<ddpscope::models::ModelSpec> out;
    for (const char* name : {"mlp-tiny", "resnet18"}) {
      auto m = ddpscope::models::loadZooModel(name);
      FUZZ_CHECK(m.isOk(), m.status().message());
      out.push_back(*std::move(m));
    }
    auto small = ddpscope::models::parseModelJson(
        R"({"name": "three", "parameters": [{"name": "a", "shape": [4]},
            {"name": "b", "shape": [1000, 1000]}, {"name": "c", "shape": [3], "dtype": "float16"}]})",
        "three");
    FUZZ_CHECK(small.isOk(), small.status().message());
    out.push_back(*std::move(small));
    return out;
  }();
  return models[static_cast<size_t>(which) % models.size()];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  if (size < 1) return 0;
  const models::ModelSpec& m = model(data[0] & 3);
  const std::string text(fuzz::asText(data + 1, size - 1));
  auto order = api::parseIndexListDocument(text, "order.json");
  if (!order.isOk()) {
    FUZZ_CHECK(order.status().message().find("order.json") != std::string::npos,
               "the error does not name the file: " + order.status().message());
    return 0;
  }
  FUZZ_CHECK(!order->empty(), "an empty order was accepted");
  const int n = static_cast<int>(m.numTensors());
  const Status valid = ddp::validateReadyOrder(*order, n);
  ddp::DdpConfig config;
  config.setBucketCapMb(0.25 * (1 + (data[0] >> 2)));
  auto plan = ddp::steadyStatePlan(m, config, std::span<const int>(*order));
  FUZZ_CHECK(plan.isOk() == valid.isOk(), "the plan and validateReadyOrder disagree");
  if (!plan.isOk()) return 0;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int p : *order) {
    FUZZ_CHECK(p >= 0 && p < n && !seen[static_cast<size_t>(p)], "accepted a non-permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  FUZZ_CHECK(static_cast<int>(order->size()) == n, "accepted an order of the wrong length");
  FUZZ_CHECK(plan->numParams() == n, "the plan does not cover every parameter");
  int placed = 0;
  for (const auto& b : plan->buckets) placed += static_cast<int>(b.params.size());
  FUZZ_CHECK(placed == n, "a parameter in several buckets or none");
  return 0;
}
