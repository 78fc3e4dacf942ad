// Small timelines shared by the traces tests.
#pragma once

#include <string>

#include "traces/timeline.h"

namespace ddpscope::traces::testing {

inline Nanos us(int64_t micros) {
  return Nanos::fromMicros(micros);
}

inline std::string testDataPath(const std::string& relative) {
  return std::string(DDPSCOPE_TEST_DATA_DIR) + "/traces/" + relative;
}

// Two ranks of a two-bucket DDP step: compute, one comm stream, a host lane with the
// iteration marker; args of every type, a flow, counters, metadata, and a name that needs
// escaping. Spans are sorted.
inline Timeline makeGoldenTimeline() {
  Timeline timeline;
  timeline.setName("golden \"small\" run");
  Args& metadata = timeline.mutableMetadata();
  metadata.set("model", std::string("mlp-3"));
  metadata.set("world_size", int64_t{2});
  metadata.set("bucket_cap_mb", 25.0);
  metadata.set("lr", 0.125);
  for (int rank = 0; rank < 2; ++rank) {
    Nanos skewNs(rank * 1500);
    LaneHandle compute = timeline.addLane(rank, "compute", LaneKind::kCompute);
    LaneHandle comm = timeline.addLane(rank, "comm stream 0", LaneKind::kComm);
    timeline.addIteration(rank, 1, Nanos(0) + skewNs, Nanos(1'000'000));
    timeline.addSpan(compute, "forward", Category::kForward, Nanos(1'000) + skewNs, Nanos(300'123));
    timeline.addSpan(compute, "fc1", Category::kForward, Nanos(1'000) + skewNs, Nanos(100'001),
                     Args{{"flops", int64_t{4'194'304}}});
    timeline.addSpan(compute, "backward", Category::kBackward, Nanos(301'500) + skewNs,
                     Nanos(500'000));
    timeline.addSpan(compute, "fc2 \"grad\"\tµ", Category::kBackward, Nanos(301'500) + skewNs,
                     Nanos(250'000), Args{{"layer", std::string("fc2")}, {"scale", 0.5}});
    timeline.addSpan(compute, "copy_bucket_to_grad", Category::kCopy, Nanos(801'500) + skewNs,
                     Nanos(7));
    timeline.addSpan(compute, "sgd", Category::kOptimizer, Nanos(900'000) + skewNs, Nanos(50'000));
    timeline.addSpan(
        comm, "allreduce bucket 0", Category::kAllreduce, Nanos(551'500) + skewNs, Nanos(300'000),
        Args{{"bucket", int64_t{0}}, {"bytes", int64_t{26'214'400}}, {"iteration", int64_t{1}}});
    timeline.addSpan(
        comm, "allreduce bucket 1", Category::kAllreduce, Nanos(851'500) + skewNs, Nanos(40'250),
        Args{{"bucket", int64_t{1}}, {"bytes", int64_t{1'048'576}}, {"iteration", int64_t{1}}});
    timeline.addFlow(Flow{static_cast<uint64_t>(rank + 1), "bucket 0 ready", "ddp",
                          FlowEndpoint{rank, 0, Nanos(551'000) + skewNs},
                          FlowEndpoint{rank, 1, Nanos(551'500) + skewNs}});
    timeline.addCounter(Counter{rank, "pending buckets", Nanos(551'500) + skewNs, 1.0});
    timeline.addCounter(Counter{rank, "pending buckets", Nanos(891'750) + skewNs, 0.0});
  }
  timeline.sortSpans();
  return timeline;
}

}  // namespace ddpscope::traces::testing
