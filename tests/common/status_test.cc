// Status and Result<T>: the rules common/status.h states, checked.
#include "common/status.h"

#include <gtest/gtest.h>

#include <string>

namespace verdict {
namespace {

TEST(ResultTest, HoldsAValueOrTheErrorItWasGiven) {
  Result<int> value(7);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  EXPECT_TRUE(value.status().ok());

  Result<int> error(UnavailableError("database away"));
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(error.status().message(), "database away");
}

TEST(ResultTest, BuiltFromAnOkStatusIsAnInternalErrorNotAMissingValue) {
  // Before the check this was a Result that was not ok() yet whose status() said OK: a caller
  // testing the status went on to read a value that was not there.
  Result<std::string> wrong(Status::Ok());
  EXPECT_FALSE(wrong.ok());
  EXPECT_FALSE(wrong.status().ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal);
  EXPECT_NE(wrong.status().message().find("OK status"), std::string::npos)
      << wrong.status().message();
}

// No exception crosses the library boundary, this one included: reading the value of an error
// is a caller's bug, and ends the process with the error it ignored (as absl::StatusOr does),
// instead of a std::bad_variant_access that a host built without exceptions cannot even catch.
TEST(ResultDeathTest, ValueOfAnErrorAbortsNamingTheError) {
  Result<std::string> error(NotFoundError("room 42 was released"));
  EXPECT_DEATH(error.value(),
               "value\\(\\) of a Result holding an error: NOT_FOUND: room 42 was released");
  EXPECT_DEATH(*error, "NOT_FOUND: room 42 was released");
  EXPECT_DEATH((void)error->size(), "NOT_FOUND: room 42 was released");
  EXPECT_DEATH((void)std::move(error).value(), "NOT_FOUND: room 42 was released");
  const Result<int> const_error(UnavailableError("away"));
  EXPECT_DEATH((void)const_error.value(), "UNAVAILABLE: away");
}

}  // namespace
}  // namespace verdict
