#include "base/status.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace ddpscope {
namespace {

StatusOr<int> half(int x) {
  if (x % 2 != 0) return invalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> quarter(int x) {
  ASSIGN_OR_RETURN(int h, half(x));
  ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status checkPositive(int x) {
  if (x <= 0) return invalidArgument("not positive");
  return Status::ok();
}

Status both(int x) {
  RETURN_IF_ERROR(checkPositive(x));
  RETURN_IF_ERROR(half(x).status());
  return Status::ok();
}

// EXPECT_OK says what failed: the expression and the status, for a Status and a StatusOr.
TEST(StatusTest, ExpectOkPrintsTheStatusOfAFailure) {
  EXPECT_OK(half(4));
  EXPECT_OK(checkPositive(1));
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(half(3)), "half(3) is not OK: InvalidArgument: odd: 3");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(checkPositive(0)),
                          "checkPositive(0) is not OK: InvalidArgument: not positive");
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_OK(s);
  EXPECT_EQ(s.exitCode(), 0);
  EXPECT_EQ(s.toString(), "OK");
}

TEST(StatusTest, ExitCodeIsTwoForBadInput) {
  EXPECT_EQ(invalidArgument("x").exitCode(), 2);
  EXPECT_EQ(notFound("x").exitCode(), 2);
  EXPECT_EQ(internalError("x").exitCode(), 1);
}

TEST(StatusTest, WithContextPrefixesMessage) {
  Status s = invalidArgument("bad field").withContext("model.json");
  EXPECT_EQ(s.message(), "model.json: bad field");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(StatusOrTest, PropagatesThroughMacros) {
  EXPECT_EQ(*quarter(8), 2);
  StatusOr<int> r = quarter(6);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_OK(both(4));
  EXPECT_EQ(both(-2).message(), "not positive");
  EXPECT_EQ(both(3).message(), "odd: 3");
}

TEST(StatusOrDeathTest, ValueOfErrorAborts) {
  StatusOr<int> r = half(3);
  EXPECT_DEATH((void)r.value(), "odd: 3");
}

}  // namespace
}  // namespace ddpscope
