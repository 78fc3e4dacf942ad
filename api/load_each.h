// Loads every named built-in (clusters, host profiles, zoo models) in the order of its names; the
// first that fails is the error. Internal to api/'s list verbs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ddpscope::api {

template <typename T, typename Load>
StatusOr<std::vector<T>> loadEach(const std::vector<std::string>& names, Load load) {
  std::vector<T> out;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(T value, load(name));
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace ddpscope::api
