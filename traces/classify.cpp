#include "traces/classify.h"

namespace ddpscope::traces {

namespace {

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

bool containsIgnoreCase(std::string_view text, std::string_view needle) {
  if (needle.size() > text.size()) return false;
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i + needle.size() <= text.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && lower(text[i + j]) == lower(needle[j])) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

Category collectiveFromName(std::string_view name) {
  // "all_reduce" / "AllReduce" / "allreduce": compare without separators.
  if (containsIgnoreCase(name, "allreduce") || containsIgnoreCase(name, "all_reduce")) {
    return Category::kAllreduce;
  }
  if (containsIgnoreCase(name, "broadcast")) return Category::kBroadcast;
  if (containsIgnoreCase(name, "allgather") || containsIgnoreCase(name, "all_gather")) {
    return Category::kAllgather;
  }
  if (containsIgnoreCase(name, "reducescatter") || containsIgnoreCase(name, "reduce_scatter")) {
    return Category::kReduceScatter;
  }
  return Category::kCommOther;
}

bool isCudaLaunchKernel(std::string_view name) {
  return startsWith(name, "cuda") && contains(name, "LaunchKernel");
}

}  // namespace

Category classifyGpuKernel(std::string_view name) {
  // 1. communication
  if (startsWith(name, "nccl") || startsWith(name, "hip") || startsWith(name, "hccl") ||
      contains(name, "ncclKernel")) {
    return collectiveFromName(name);
  }
  // 2. memory
  if (startsWith(name, "Memcpy") || startsWith(name, "Memset") || startsWith(name, "dma")) {
    return Category::kCopy;
  }
  // 3. computation unless excluded
  bool excluded = startsWith(name, "runFunction") || startsWith(name, "Stream Wait Event") ||
                  isCudaLaunchKernel(name) || contains(name, "Memcpy") ||
                  contains(name, "Memset") || contains(name, "dma") || contains(name, "Sync");
  return excluded ? Category::kOther : Category::kCompute;
}

Category classifyHostEvent(std::string_view name) {
  if (startsWith(name, "ProfilerStep#")) return Category::kIteration;
  if (startsWith(name, "DistributedDataParallel.forward")) return Category::kForward;
  if (startsWith(name, "autograd::engine::evaluate_function")) return Category::kBackward;
  if (startsWith(name, "Optimizer.")) return Category::kOptimizer;
  if (startsWith(name, "c10d::") || startsWith(name, "nccl:") || name == "record_param_comms") {
    return collectiveFromName(name);
  }
  return Category::kOther;
}

}  // namespace ddpscope::traces
