#include "traces/kineto_writer.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string_view>

#include "io/file_output.h"

namespace ddpscope::traces {

namespace {

using Json = nlohmann::json;

double micros(Nanos t) {
  return static_cast<double>(t.count()) / 1000.0;
}

// A computation kernel's name that HTA (0.5.0 and its main branch) and classifyGpuKernel read as
// computation: the "ddpscope::" prefix rules out every prefix rule, and the substrings their
// rules look for anywhere are broken up.
std::string computeKernelName(const Span& span) {
  std::string name = std::string("ddpscope::") + categoryName(span.category) + " " + span.name;
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"Memcpy", "Mem_cpy"},
                                 {"Memset", "Mem_set"},
                                 {"Sync", "S_ync"},
                                 {"dma", "d_ma"},
                                 {"ncclKernel", "nccl_Kernel"}}) {
    for (size_t at = name.find(from); at != std::string::npos; at = name.find(from, at)) {
      name.replace(at, from.size(), to);
      at += to.size();
    }
  }
  return name;
}

std::string upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

// NCCL's device-kernel name for a collective span (NCCL ≥ 2.19 spelling).
std::string ncclKernelName(const Span& span) {
  const std::string algo = upper(span.args.getString("algorithm").value_or("ring"));
  const std::string proto = upper(span.args.getString("protocol").value_or("simple"));
  std::string op;
  switch (span.category) {
    case Category::kAllreduce:
      op = "AllReduce_Sum_f32";
      break;
    case Category::kUsedMapAllreduce:
      op = "AllReduce_Sum_i32";
      break;
    case Category::kBroadcast:
      op = "Broadcast";
      break;
    case Category::kAllgather:
      op = "AllGather";
      break;
    case Category::kReduceScatter:
      op = "ReduceScatter_Sum_f32";
      break;
    default:
      return "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
  }
  return "ncclDevKernel_" + op + "_" + algo + "_" + proto +
         "(ncclDevComm*, unsigned long, ncclWork*)";
}

Json metadataEvent(const char* name, int pid, int tid, Json args) {
  return {{"name", name}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

}  // namespace

std::string perRankTracePath(const std::string& path, int rank) {
  const std::string tag = ".rank" + std::to_string(rank);
  const size_t slash = path.find_last_of('/');
  const size_t nameStart = slash == std::string::npos ? 0 : slash + 1;
  std::string_view name(path);
  name.remove_prefix(nameStart);
  for (std::string_view ext : {".json.gz", ".json", ".gz"}) {
    if (name.size() > ext.size() && name.ends_with(ext)) {
      return path.substr(0, path.size() - ext.size()) + tag + std::string(ext);
    }
  }
  return path + tag;
}

Status writeKinetoTrace(const Timeline& timeline, int rankIndex, const std::string& path) {
  const RankTrack& rank = timeline.rank(rankIndex);
  const Args& meta = timeline.metadata();
  const int64_t worldSize = meta.getInt("world_size").value_or(timeline.rankCount());
  const int64_t gpusPerNode = std::max<int64_t>(1, meta.getInt("gpus_per_node").value_or(1));
  const int device = static_cast<int>(rank.rank % gpusPerNode);

  Json events = Json::array();
  events.push_back(metadataEvent("process_name", kKinetoHostPid, 0, {{"name", "ddpscope"}}));
  events.push_back(metadataEvent("process_labels", kKinetoHostPid, 0, {{"labels", "CPU"}}));
  events.push_back(metadataEvent("process_name", device, 0, {{"name", "ddpscope"}}));
  events.push_back(
      metadataEvent("process_labels", device, 0, {{"labels", "GPU " + std::to_string(device)}}));
  events.push_back(
      metadataEvent("thread_name", kKinetoHostPid, kKinetoHostTid, {{"name", "thread 1000"}}));
  // Host lanes: autograd's thread on a tid of its own, every other host lane on the main one.
  std::vector<int> laneTid(rank.lanes.size(), kKinetoHostTid);
  for (size_t i = 0; i < rank.lanes.size(); ++i) {
    if (rank.lanes[i].kind == LaneKind::kHost && rank.lanes[i].name == kAutogradThreadLane) {
      laneTid[i] = kKinetoAutogradTid;
      events.push_back(metadataEvent("thread_name", kKinetoHostPid, kKinetoAutogradTid,
                                     {{"name", "thread 1001 (autograd)"}}));
      break;
    }
  }

  int64_t correlation = 0;
  int computeLanes = 0;
  int commLanes = 0;
  for (size_t laneIndex = 0; laneIndex < rank.lanes.size(); ++laneIndex) {
    const Lane& lane = rank.lanes[laneIndex];
    if (lane.kind == LaneKind::kHost) {
      for (const Span& span : lane.spans) {
        const bool step = span.category == Category::kIteration;
        events.push_back({{"ph", "X"},
                          {"cat", step ? "user_annotation" : "cpu_op"},
                          {"name", span.name},
                          {"pid", kKinetoHostPid},
                          {"tid", laneTid[laneIndex]},
                          {"ts", micros(span.start)},
                          {"dur", micros(span.duration)}});
      }
      continue;
    }
    const bool comm = lane.kind == LaneKind::kComm;
    const int stream =
        comm ? kKinetoCommStream + commLanes++ : kKinetoComputeStream + computeLanes++;
    events.push_back(metadataEvent("thread_name", device, stream,
                                   {{"name", "stream " + std::to_string(stream)}}));
    for (const Span& span : lane.spans) {
      Json event = {{"ph", "X"},
                    {"pid", device},
                    {"tid", stream},
                    {"ts", micros(span.start)},
                    {"dur", micros(span.duration)}};
      if (span.category == Category::kIteration || span.category == Category::kOther) {
        event["cat"] = "gpu_user_annotation";
        event["name"] = span.name;
        events.push_back(std::move(event));
        continue;
      }
      ++correlation;
      Json args = {{"device", device}, {"stream", stream}, {"correlation", correlation}};
      const bool copy = span.category == Category::kCopy;
      if (isCommunication(span.category)) {
        event["cat"] = "kernel";
        event["name"] = ncclKernelName(span);
        args["Collective name"] = collectiveVerb(span.category);
        args["Group size"] = worldSize;
      } else if (copy) {
        event["cat"] = "gpu_memcpy";
        event["name"] = "Memcpy DtoD (Device -> Device)";
      } else {
        event["cat"] = "kernel";
        event["name"] = computeKernelName(span);
      }
      if (auto bytes = span.args.getInt("bytes")) args["bytes"] = *bytes;
      event["args"] = std::move(args);
      events.push_back(std::move(event));
      // The launch: when and on which thread the host launched it where the timeline says so,
      // else at the kernel's start on the main thread.
      Nanos launchAt = span.start;
      int launchTid = kKinetoHostTid;
      if (auto at = span.args.getInt(kArgLaunchNs)) {
        launchAt = std::min(Nanos(*at), span.start);
        const int64_t hostLane = span.args.getInt(kArgLaunchLane).value_or(-1);
        if (hostLane >= 0 && hostLane < static_cast<int64_t>(laneTid.size())) {
          launchTid = laneTid[static_cast<size_t>(hostLane)];
        }
      }
      events.push_back({{"ph", "X"},
                        {"cat", "cuda_runtime"},
                        {"name", copy ? "cudaMemcpyAsync" : "cudaLaunchKernel"},
                        {"pid", kKinetoHostPid},
                        {"tid", launchTid},
                        {"ts", micros(launchAt)},
                        {"dur", 0},
                        {"args", {{"correlation", correlation}}}});
    }
  }

  // Kineto's own layout: the header keys first, one event per line. HTA finds a file's rank
  // with the pattern "rank":<space>N, so the header keeps that spacing.
  const Json name = path.substr(path.find_last_of('/') + 1);
  ASSIGN_OR_RETURN(std::unique_ptr<io::OutputFile> file, io::OutputFile::open(path));
  std::ostream& out = file->stream();
  const Json backend = std::string(meta.getString("backend").value_or("nccl"));
  out << "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": " << backend.dump()
      << ", \"rank\": " << rank.rank << ", \"world_size\": " << worldSize
      << "},\n  \"traceName\": " << name.dump(-1, ' ', false, Json::error_handler_t::replace)
      << ",\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    out << (i == 0 ? "\n  " : ",\n  ")
        << events[i].dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  out << "\n  ]\n}\n";
  return file->close();
}

}  // namespace ddpscope::traces
