// The GPU a profiler trace's kernels ran on, as Kineto's deviceProperties describe it
// (docs/spec/trace-formats.md §2.1), and its form in an imported run's metadata "gpu":
// {"name", "compute_capability": [major, minor], "sm_count", "memory_bytes"} as JSON text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ddpscope::traces {

struct TracedGpu {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int computeMajor = 0, computeMinor = 0;
  int smCount = 0;
  int64_t memoryBytes = 0;  // totalGlobalMem
  // "NVIDIA H100 80GB HBM3 (compute capability 9.0, 132 SMs)"
  std::string describe() const;
};

// The GPU of a Kineto trace's deviceProperties (their JSON text): the entry whose id is
// `device` (the first kernel's), else the only GPU type when every entry is alike; nullopt
// when the text is no such list or the GPU cannot be told.
std::optional<TracedGpu> tracedGpuOfDeviceProperties(std::string_view deviceProperties,
                                                     std::optional<int64_t> device);

// The metadata "gpu" text, and back. Errors (InvalidArgument): `origin`: metadata gpu: what was
// expected and what it holds.
std::string tracedGpuJson(const TracedGpu& gpu);
StatusOr<TracedGpu> parseTracedGpuJson(std::string_view text, const std::string& origin);

}  // namespace ddpscope::traces
