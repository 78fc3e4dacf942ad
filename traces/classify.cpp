#include "traces/classify.h"

#include "traces/text_match.h"

namespace ddpscope::traces {

namespace {

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
  return name.starts_with("cuda") && contains(name, "LaunchKernel");
}

}  // namespace

Category classifyGpuKernel(std::string_view name) {
  // 1. communication
  if (name.starts_with("nccl") || name.starts_with("hip") || name.starts_with("hccl") ||
      contains(name, "ncclKernel")) {
    return collectiveFromName(name);
  }
  // 2. memory
  if (name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma")) {
    return Category::kCopy;
  }
  // 3. computation unless excluded
  bool excluded = name.starts_with("runFunction") || name.starts_with("Stream Wait Event") ||
                  isCudaLaunchKernel(name) || contains(name, "Memcpy") ||
                  contains(name, "Memset") || contains(name, "dma") || contains(name, "Sync");
  return excluded ? Category::kOther : Category::kCompute;
}

namespace {

constexpr RuntimeName kRuntimeCalls[] = {
    {"cudaLaunchKernel", RuntimeCall::kLaunch, "CUDA"},
    {"cudaLaunchKernelExC", RuntimeCall::kLaunch, "CUDA"},
    {"cudaLaunchCooperativeKernel", RuntimeCall::kLaunch, "CUDA"},
    {"cuLaunchKernel", RuntimeCall::kLaunch, "CUDA"},
    {"cuLaunchKernelEx", RuntimeCall::kLaunch, "CUDA"},
    {"cudaGraphLaunch", RuntimeCall::kLaunch, "CUDA"},
    {"cudaMemcpyAsync", RuntimeCall::kMemcpy, "CUDA"},
    {"cudaMemcpy", RuntimeCall::kMemcpy, "CUDA"},
    {"cudaMemsetAsync", RuntimeCall::kMemset, "CUDA"},
    {"cudaStreamWaitEvent", RuntimeCall::kStreamWait, "CUDA"},
    {"cudaEventRecord", RuntimeCall::kEventRecord, "CUDA"},
    {"cudaEventRecordWithFlags", RuntimeCall::kEventRecord, "CUDA"},
    {"cudaStreamSynchronize", RuntimeCall::kSync, "CUDA"},
    {"cudaDeviceSynchronize", RuntimeCall::kSync, "CUDA"},
    {"cudaEventSynchronize", RuntimeCall::kSync, "CUDA"},
    {"cudaGetLastError", RuntimeCall::kQuery, "CUDA"},
    {"cudaPeekAtLastError", RuntimeCall::kQuery, "CUDA"},
    {"cudaGetErrorString", RuntimeCall::kQuery, "CUDA"},
    {"cudaStreamIsCapturing", RuntimeCall::kQuery, "CUDA"},
    {"cudaThreadExchangeStreamCaptureMode", RuntimeCall::kQuery, "CUDA"},
    {"cudaStreamGetCaptureInfo", RuntimeCall::kQuery, "CUDA"},
    {"cudaDeviceGetAttribute", RuntimeCall::kQuery, "CUDA"},
    {"cudaGetDevice", RuntimeCall::kQuery, "CUDA"},
    {"cudaGetDeviceCount", RuntimeCall::kQuery, "CUDA"},
    {"hipLaunchKernel", RuntimeCall::kLaunch, "HIP"},
    {"hipExtLaunchKernel", RuntimeCall::kLaunch, "HIP"},
    {"hipModuleLaunchKernel", RuntimeCall::kLaunch, "HIP"},
    {"hipExtModuleLaunchKernel", RuntimeCall::kLaunch, "HIP"},
    {"hipLaunchCooperativeKernel", RuntimeCall::kLaunch, "HIP"},
    {"hipGraphLaunch", RuntimeCall::kLaunch, "HIP"},
    {"hipMemcpyAsync", RuntimeCall::kMemcpy, "HIP"},
    {"hipMemcpyWithStream", RuntimeCall::kMemcpy, "HIP"},
    {"hipMemcpy", RuntimeCall::kMemcpy, "HIP"},
    {"hipMemsetAsync", RuntimeCall::kMemset, "HIP"},
    {"hipStreamWaitEvent", RuntimeCall::kStreamWait, "HIP"},
    {"hipEventRecord", RuntimeCall::kEventRecord, "HIP"},
    {"hipEventRecordWithFlags", RuntimeCall::kEventRecord, "HIP"},
    {"hipStreamSynchronize", RuntimeCall::kSync, "HIP"},
    {"hipDeviceSynchronize", RuntimeCall::kSync, "HIP"},
    {"hipEventSynchronize", RuntimeCall::kSync, "HIP"},
    {"hipGetLastError", RuntimeCall::kQuery, "HIP"},
    {"hipPeekAtLastError", RuntimeCall::kQuery, "HIP"},
    {"hipGetErrorString", RuntimeCall::kQuery, "HIP"},
    {"hipStreamIsCapturing", RuntimeCall::kQuery, "HIP"},
    {"hipThreadExchangeStreamCaptureMode", RuntimeCall::kQuery, "HIP"},
    {"hipStreamGetCaptureInfo", RuntimeCall::kQuery, "HIP"},
    {"hipDeviceGetAttribute", RuntimeCall::kQuery, "HIP"},
    {"hipGetDevice", RuntimeCall::kQuery, "HIP"},
    {"hipGetDeviceCount", RuntimeCall::kQuery, "HIP"},
};

}  // namespace

std::span<const RuntimeName> knownRuntimeCalls() {
  return kRuntimeCalls;
}

RuntimeCall classifyRuntimeCall(std::string_view name) {
  for (const RuntimeName& r : kRuntimeCalls) {
    if (r.name == name) return r.call;
  }
  return RuntimeCall::kNone;
}

bool isGenericCommKernel(std::string_view name) {
  return classifyGpuKernel(name) == Category::kCommOther &&
         (name.starts_with("nccl") || contains(name, "ncclKernel"));
}

Category classifyHostEvent(std::string_view name) {
  if (name.starts_with("ProfilerStep#")) return Category::kIteration;
  if (name.starts_with("DistributedDataParallel.forward")) return Category::kForward;
  if (name.starts_with("autograd::engine::evaluate_function")) return Category::kBackward;
  if (name.starts_with("Optimizer.")) return Category::kOptimizer;
  if (name.starts_with("c10d::") || name.starts_with("nccl:") || name == "record_param_comms") {
    return collectiveFromName(name);
  }
  return Category::kOther;
}

}  // namespace ddpscope::traces
