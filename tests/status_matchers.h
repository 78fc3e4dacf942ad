// EXPECT_OK(expr) / ASSERT_OK(expr): a Status or StatusOr<T> that must be OK; a failure prints
// the expression and the status (its code and message), where EXPECT_TRUE(x.isOk()) printed only
// "false". The expression is evaluated once. gtest only (no gmock: the CUDA tests link none).
#pragma once

#include <gtest/gtest.h>

#include "base/status.h"

namespace ddpscope::test_status {

inline const Status& statusOf(const Status& s) {
  return s;
}
template <typename T>
const Status& statusOf(const StatusOr<T>& s) {
  return s.status();
}

template <typename S>
::testing::AssertionResult isOk(const char* expression, const S& value) {
  const Status& status = statusOf(value);
  if (status.isOk()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expression << " is not OK: " << status.toString();
}

}  // namespace ddpscope::test_status

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::ddpscope::test_status::isOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::ddpscope::test_status::isOk, expr)
