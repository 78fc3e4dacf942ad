// Model specs for the runtime tests: a zoo model or a shorthand ("gpt2:layers=2,..."); a spec
// that does not load fails the test (EXPECT) instead of aborting it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "models/builders.h"
#include "models/zoo.h"

namespace ddpscope::runtime::testing {

inline models::ModelSpec zoo(const std::string& name) {
  StatusOr<models::ModelSpec> spec = models::loadZooModel(name);
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  return *spec;
}

inline models::ModelSpec shorthand(const std::string& text) {
  StatusOr<models::ModelSpec> spec = models::parseModelShorthand(text);
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  return *spec;
}

}  // namespace ddpscope::runtime::testing
