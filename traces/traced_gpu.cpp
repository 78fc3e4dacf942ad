#include "traces/traced_gpu.h"

#include <nlohmann/json.hpp>

namespace ddpscope::traces {
namespace {

// One deviceProperties entry; nullopt without a name, a compute capability or SMs.
std::optional<TracedGpu> gpuOfEntry(const nlohmann::json& d) {
  if (!d.is_object()) return std::nullopt;
  auto integer = [&d](const char* key) -> int64_t {
    auto it = d.find(key);
    return it != d.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  TracedGpu gpu;
  if (auto it = d.find("name"); it != d.end() && it->is_string()) gpu.name = it->get<std::string>();
  gpu.computeMajor = static_cast<int>(integer("computeMajor"));
  gpu.computeMinor = static_cast<int>(integer("computeMinor"));
  gpu.smCount = static_cast<int>(integer("numSms"));
  gpu.memoryBytes = integer("totalGlobalMem");
  if (gpu.name.empty() || gpu.computeMajor <= 0 || gpu.smCount <= 0) return std::nullopt;
  return gpu;
}

}  // namespace

std::string TracedGpu::describe() const {
  return name + " (compute capability " + std::to_string(computeMajor) + "." +
         std::to_string(computeMinor) + ", " + std::to_string(smCount) + " SMs)";
}

std::optional<TracedGpu> tracedGpuOfDeviceProperties(std::string_view deviceProperties,
                                                     std::optional<int64_t> device) {
  const nlohmann::json devices = nlohmann::json::parse(deviceProperties, nullptr, false);
  if (!devices.is_array() || devices.empty()) return std::nullopt;
  if (device) {
    for (const nlohmann::json& d : devices) {
      auto id = d.is_object() ? d.find("id") : d.end();
      if (d.is_object() && id != d.end() && id->is_number_integer() &&
          id->get<int64_t>() == *device) {
        return gpuOfEntry(d);
      }
    }
  }
  const std::optional<TracedGpu> first = gpuOfEntry(devices.front());
  for (const nlohmann::json& d : devices) {
    const std::optional<TracedGpu> g = gpuOfEntry(d);
    if (!g || !first || g->name != first->name || g->smCount != first->smCount) {
      return std::nullopt;
    }
  }
  return first;
}

std::string tracedGpuJson(const TracedGpu& gpu) {
  return nlohmann::json{{"name", gpu.name},
                        {"compute_capability", {gpu.computeMajor, gpu.computeMinor}},
                        {"sm_count", gpu.smCount},
                        {"memory_bytes", gpu.memoryBytes}}
      .dump();
}

StatusOr<TracedGpu> parseTracedGpuJson(std::string_view text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto field = [&j](const char* key) -> const nlohmann::json* {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  const nlohmann::json* name = field("name");
  const nlohmann::json* cc = field("compute_capability");
  const nlohmann::json* sms = field("sm_count");
  const nlohmann::json* memory = field("memory_bytes");
  const bool ok = name != nullptr && name->is_string() && cc != nullptr && cc->is_array() &&
                  cc->size() == 2 && (*cc)[0].is_number_integer() && (*cc)[1].is_number_integer() &&
                  sms != nullptr && sms->is_number_integer() && sms->get<int64_t>() > 0 &&
                  memory != nullptr && memory->is_number_integer();
  if (!ok) {
    return invalidArgument(origin +
                           ": metadata gpu: expected {\"name\", \"compute_capability\": [major, "
                           "minor], \"sm_count\" > 0, \"memory_bytes\"}, got " +
                           std::string(text));
  }
  TracedGpu gpu;
  gpu.name = name->get<std::string>();
  gpu.computeMajor = (*cc)[0].get<int>();
  gpu.computeMinor = (*cc)[1].get<int>();
  gpu.smCount = sms->get<int>();
  gpu.memoryBytes = memory->get<int64_t>();
  return gpu;
}

}  // namespace ddpscope::traces
