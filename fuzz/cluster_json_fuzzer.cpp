// Fuzz target: the cluster JSON loader (sim/cost/clusters/FORMAT.md). An accepted cluster must be
// usable: a world layout of one and of two nodes, and a communication model whose estimate of an
// allreduce is a finite, non-negative time that does not shrink when the message grows.
#include <cstdint>
#include <string>

#include "base/status.h"
#include "fuzz/fuzz_util.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  auto cluster = sim::parseClusterJson(fuzz::asText(data, size), "fuzz-cluster.json");
  if (!cluster.isOk()) {
    FUZZ_CHECK(!cluster.status().message().empty(), "an error without a message");
    return 0;
  }
  for (int nodes : {1, 2}) {
    auto layout = sim::makeWorldLayout(*cluster, nodes, std::nullopt);
    if (!layout.isOk()) continue;
    auto model = sim::makeCommModel(*cluster, *layout);
    if (!model.isOk()) continue;
    Nanos previous(0);
    for (int64_t bytes : {int64_t{0}, int64_t{4}, int64_t{1} << 20, int64_t{25} << 20}) {
      const sim::CollectiveEstimate e = (*model)->estimate(sim::Collective::kAllreduce, bytes);
      FUZZ_CHECK(e.time >= Nanos(0), "negative allreduce time");
      FUZZ_CHECK(e.time >= previous, "allreduce time shrinks as the message grows");
      previous = e.time;
      (void)(*model)->candidates(sim::Collective::kAllreduce, bytes);
    }
  }
  return 0;
}
