// Parameter dumps (ddpscope-run --dump-params): the final parameters of a run in a small
// binary file, so that a DDP run and the single-process reference can be compared.
// Layout (host byte order): "DSPARAM1", uint32 count, then per parameter: uint32 name length,
// name bytes, uint64 numel, numel float32 values.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::runtime {

struct ParamDump {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
};

Status writeParamDump(const std::string& path, const ParamDump& dump);
StatusOr<ParamDump> readParamDump(const std::string& path);
// Largest |a - b| over all values; InvalidArgument if the dumps differ in names or sizes.
StatusOr<double> maxAbsDifference(const ParamDump& a, const ParamDump& b);

}  // namespace ddpscope::runtime
