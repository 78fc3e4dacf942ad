#include "runtime/nccl/nccl_host_logic.h"

#include <cstdio>
#include <cstdlib>

namespace ddpscope::runtime::nccl {

WatchdogDecision decideWatchdog(std::span<const InFlightView> inFlight, Nanos now, Nanos timeout,
                                bool asyncError) {
  WatchdogDecision decision;
  if (asyncError) {
    decision.action = WatchdogAction::kAsyncError;
    return decision;
  }
  size_t prefix = 0;
  while (prefix < inFlight.size() && inFlight[prefix].completed) ++prefix;
  if (prefix > 0) {
    decision.action = WatchdogAction::kComplete;
    decision.completedCount = prefix;
    return decision;
  }
  if (!inFlight.empty() && timeout > Nanos(0) && now - inFlight.front().issuedAt > timeout) {
    decision.action = WatchdogAction::kTimeout;
    decision.index = 0;
  }
  return decision;
}

std::string collectiveFailureMessage(const CommTag& tag, int64_t bytes, const std::string& reason,
                                     const std::string& ncclError) {
  std::string what = "NCCL " + (tag.name.empty() ? std::string("collective") : tag.name) + " (";
  if (tag.bucket >= 0) what += "bucket " + std::to_string(tag.bucket) + ", ";
  if (tag.iteration > 0) what += "iteration " + std::to_string(tag.iteration) + ", ";
  what += std::to_string(bytes) + " bytes) failed: " + reason;
  if (!ncclError.empty()) what += ": " + ncclError;
  return what;
}

std::string timeoutReason(Nanos timeout) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", timeout.toSeconds());
  return std::string("timed out after ") + seconds +
         " s (the communicator's timeout; a peer may have died or stopped calling collectives)";
}

std::optional<int> localRankFromEnvironment(const char* (*getenvFn)(const char*)) {
  auto get = [getenvFn](const char* name) -> const char* {
    return getenvFn ? getenvFn(name) : std::getenv(name);
  };
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char* text = get(name);
    if (!text || !*text) continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end && *end == '\0' && value >= 0 && value < (1 << 20)) return static_cast<int>(value);
  }
  return std::nullopt;
}

StatusOr<int> chooseDevice(int rank, std::optional<int> localRank, int deviceCount) {
  const int device = localRank.value_or(0);
  if (deviceCount <= 0) {
    return unavailable("rank " + std::to_string(rank) + ": no CUDA device is visible");
  }
  if (device >= deviceCount) {
    return unavailable("rank " + std::to_string(rank) + ": local rank " + std::to_string(device) +
                       " needs CUDA device " + std::to_string(device) + ", but only " +
                       std::to_string(deviceCount) + " device(s) are visible (one GPU per rank)");
  }
  return device;
}

double busbwFactor(CollectiveKind kind, int worldSize) {
  if (worldSize <= 0) return 0.0;
  const double n = worldSize;
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return 2.0 * (n - 1.0) / n;
    case CollectiveKind::kAllgather:
    case CollectiveKind::kReduceScatter:
      return (n - 1.0) / n;
    case CollectiveKind::kBroadcast:
      return 1.0;
  }
  return 0.0;
}

double algbwBytesPerSecond(int64_t bytes, Nanos elapsed) {
  if (elapsed <= Nanos(0)) return 0.0;
  return static_cast<double>(bytes) / elapsed.toSeconds();
}

}  // namespace ddpscope::runtime::nccl
