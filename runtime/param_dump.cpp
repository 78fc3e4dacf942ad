#include "runtime/param_dump.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>

namespace ddpscope::runtime {
namespace {
constexpr char kParamDumpMagic[8] = {'D', 'S', 'P', 'A', 'R', 'A', 'M', '1'};
}

Status writeParamDump(const std::string& path, const ParamDump& dump) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return invalidArgument(path + ": cannot open for writing");
  out.write(kParamDumpMagic, sizeof(kParamDumpMagic));
  const uint32_t count = static_cast<uint32_t>(dump.values.size());
  out.write(reinterpret_cast<const char*>(&count), sizeof(count));
  for (size_t i = 0; i < dump.values.size(); ++i) {
    const std::string name = i < dump.names.size() ? dump.names[i] : std::string();
    const uint32_t length = static_cast<uint32_t>(name.size());
    out.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out.write(name.data(), static_cast<std::streamsize>(name.size()));
    const uint64_t numel = dump.values[i].size();
    out.write(reinterpret_cast<const char*>(&numel), sizeof(numel));
    out.write(reinterpret_cast<const char*>(dump.values[i].data()),
              static_cast<std::streamsize>(numel * sizeof(float)));
  }
  out.flush();
  if (!out) return internalError(path + ": write failed");
  return Status::ok();
}

StatusOr<ParamDump> readParamDump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(path + ": cannot open");
  char magic[8];
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, kParamDumpMagic, sizeof(magic)) != 0) {
    return invalidArgument(path + ": not a ddpscope parameter dump (bad magic)");
  }
  uint32_t count = 0;
  in.read(reinterpret_cast<char*>(&count), sizeof(count));
  ParamDump dump;
  for (uint32_t i = 0; i < count && in; ++i) {
    uint32_t length = 0;
    in.read(reinterpret_cast<char*>(&length), sizeof(length));
    std::string name(length, '\0');
    in.read(name.data(), length);
    uint64_t numel = 0;
    in.read(reinterpret_cast<char*>(&numel), sizeof(numel));
    if (!in || numel > (uint64_t{1} << 36)) break;
    std::vector<float> values(numel);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(numel * 4));
    dump.names.push_back(std::move(name));
    dump.values.push_back(std::move(values));
  }
  if (!in || dump.values.size() != count)
    return invalidArgument(path + ": truncated parameter dump");
  return dump;
}

StatusOr<double> maxAbsDifference(const ParamDump& a, const ParamDump& b) {
  if (a.values.size() != b.values.size()) {
    return invalidArgument(
        "parameter dumps differ in parameter count: " + std::to_string(a.values.size()) + " vs " +
        std::to_string(b.values.size()));
  }
  double worst = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i].size() != b.values[i].size()) {
      return invalidArgument("parameter " + std::to_string(i) + " differs in size");
    }
    for (size_t k = 0; k < a.values[i].size(); ++k) {
      worst = std::max(worst, std::fabs(static_cast<double>(a.values[i][k]) - b.values[i][k]));
    }
  }
  return worst;
}

}  // namespace ddpscope::runtime
