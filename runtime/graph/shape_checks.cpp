#include "runtime/graph/shape_checks.h"

#include <cmath>

namespace ddpscope::runtime {

Status checkTargetClass(float target, int64_t classes) {
  if (!(target >= 0) || target >= static_cast<float>(classes) || target != std::floor(target)) {
    return invalidArgument("target class " + std::to_string(target) + " out of range [0, " +
                           std::to_string(classes) + ")");
  }
  return Status::ok();
}

}  // namespace ddpscope::runtime
