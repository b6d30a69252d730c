// ParseProblem (proto/problem.h): it reads back every problem the lobby writes, and turns
// anything that is not a problem into "no problem" rather than a guess.
#include "proto/problem.h"

#include <gtest/gtest.h>

#include <string>

#include "server/problem.h"

namespace verdict::wire {
namespace {

TEST(ParseProblemTest, ReadsEveryProblemTheLobbyWrites) {
  const std::string detail = "room 7: \"quoted\", a\\b, a line\nand a tab\t";
  for (int c = 0; c <= static_cast<int>(server::ErrorCode::kInternal); ++c) {
    const auto code = static_cast<server::ErrorCode>(c);
    const server::ErrorInfo& info = server::InfoOf(code);
    const server::HttpReply reply = server::ProblemReply(code, detail, "/v1/settlements");
    const auto problem = ParseProblem(reply.body, reply.content_type);
    ASSERT_TRUE(problem) << info.code << ": " << reply.body;
    EXPECT_EQ(problem->code(), info.code);
    EXPECT_EQ(problem->status(), static_cast<uint32_t>(info.http_status)) << info.code;
    EXPECT_EQ(problem->retryable(), info.retryable) << info.code;
    EXPECT_EQ(problem->detail(), detail) << info.code;
  }
}

TEST(ParseProblemTest, MediaTypeIsReadWithoutCaseOrParameters) {
  const std::string body = R"({"code":"ROOM_UNKNOWN","retryable":false})";
  for (const char* type : {"application/problem+json", "Application/Problem+JSON",
                           " application/problem+json ; charset=utf-8"}) {
    const auto problem = ParseProblem(body, type);
    ASSERT_TRUE(problem) << type;
    EXPECT_EQ(problem->code(), "ROOM_UNKNOWN");
    EXPECT_FALSE(problem->retryable());
  }
}

TEST(ParseProblemTest, AnythingButAProblemBodyIsNoProblem) {
  const std::string terminal = R"({"code":"ROOM_UNKNOWN","retryable":false})";
  // The right body under another media type: a proxy's JSON, or no type at all.
  for (const char* type :
       {"application/json", "text/html", "", "application/problem+jsonx", "application/problem"}) {
    EXPECT_FALSE(ParseProblem(terminal, type)) << type;
  }
  // The right media type over a body that is not a JSON object.
  for (const char* body : {"", "   ", "<html>502 Bad Gateway</html>", "not json", "null", "42",
                           "\"text\"", "[]", R"([{"code":"X","retryable":false}])",
                           R"({"code":"X","retryable":false)", "{\"code\":\"X\"} trailing"}) {
    EXPECT_FALSE(ParseProblem(body, kProblemType)) << body;
  }
}

TEST(ParseProblemTest, MissingMembersLeaveItEmptyAndRetryable) {
  const auto problem = ParseProblem("{}", kProblemType);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->code(), "");
  EXPECT_EQ(problem->detail(), "");
  EXPECT_EQ(problem->status(), 0u);
  EXPECT_TRUE(problem->retryable()) << "only an explicit \"retryable\": false gives up";
}

TEST(ParseProblemTest, OnlyABooleanFalseMakesItTerminal) {
  for (const char* retryable : {"\"false\"", "0", "null", "{}", "[false]", "true"}) {
    const std::string body = std::string(R"({"code":"X","retryable":)") + retryable + "}";
    const auto problem = ParseProblem(body, kProblemType);
    ASSERT_TRUE(problem) << body;
    EXPECT_TRUE(problem->retryable()) << body;
  }
  const auto terminal = ParseProblem(R"({"code":"X","retryable":false})", kProblemType);
  ASSERT_TRUE(terminal);
  EXPECT_FALSE(terminal->retryable());
}

TEST(ParseProblemTest, MembersOfTheWrongTypeAreLeftEmpty) {
  const auto problem = ParseProblem(
      R"({"code":404,"detail":["a"],"status":"404","retryable":false,"extra":{"x":1}})",
      kProblemType);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->code(), "");
  EXPECT_EQ(problem->detail(), "");
  EXPECT_EQ(problem->status(), 0u);
  EXPECT_FALSE(problem->retryable());
  for (const char* status : {"-1", "404.5", "1000", "1e300"}) {
    const auto odd = ParseProblem(std::string(R"({"status":)") + status + "}", kProblemType);
    ASSERT_TRUE(odd) << status;
    EXPECT_EQ(odd->status(), 0u) << status;
  }
}

}  // namespace
}  // namespace verdict::wire
