// The node's HTTP client (delivery/http_client.h) through its blocking form, against the fake
// lobby: answers of any status come back whole, one keep-alive connection serves many
// requests, a connection the server dropped costs a reconnect and not a failure, and each way of
// getting no answer is told apart. Then what lobby_answer.h makes of answers that carry a problem.
#include "delivery/http_client.h"

#include <gtest/gtest.h>

#include <variant>

#include "delivery/lobby_answer.h"
#include "proto/problem.h"
#include "proto/wire.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/results.h"

namespace verdict::delivery {
namespace {

using namespace std::chrono_literals;
using testing::FakeLobby;
using testing::FakeReply;
using testing::FakeRequest;

HttpUrl UrlOf(const std::string& text) {
  auto url = ParseHttpUrl(text);
  EXPECT_TRUE(url) << text;
  return url.value_or(HttpUrl{});
}

HttpRequest SettlementRequest(uint64_t room) {
  HttpRequest request;
  request.target = "/v1/settlements";
  request.bearer_token = "token-a";
  request.content_type = wire::kProtobufType;
  request.accept = wire::kProtobufType;
  request.body = wire::DeterministicBytes(testing::MakeResult(room));
  return request;
}

TEST(BlockingHttpClientTest, PostsAndReturnsTheAnswer) {
  FakeLobby lobby;
  BlockingHttpClient client;
  const HttpOutcome outcome = client.Post(UrlOf(lobby.url()), SettlementRequest(5));
  const auto* res = std::get_if<HttpResponse>(&outcome);
  ASSERT_NE(res, nullptr) << std::get<HttpError>(outcome).message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->content_type, wire::kProtobufType);
  v1::SettlementReceipt receipt;
  ASSERT_TRUE(receipt.ParseFromString(res->body));
  EXPECT_EQ(receipt.room_id(), 5u);
  ASSERT_EQ(lobby.requests().size(), 1u);
  EXPECT_TRUE(lobby.requests()[0].decoded);
  EXPECT_EQ(lobby.requests()[0].authorization, "Bearer token-a");
}

TEST(BlockingHttpClientTest, AnErrorStatusIsAnAnswerWithItsHeadersAndBody) {
  FakeLobby lobby;
  lobby.SetHandler([](const FakeRequest&) {
    FakeReply reply = testing::ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "7");
    return reply;
  });
  BlockingHttpClient client;
  const HttpOutcome outcome = client.Post(UrlOf(lobby.url()), SettlementRequest(6));
  const auto* res = std::get_if<HttpResponse>(&outcome);
  ASSERT_NE(res, nullptr) << std::get<HttpError>(outcome).message;
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->reason, "Service Unavailable");
  EXPECT_EQ(res->retry_after, "7");
  const auto problem = wire::ParseProblem(res->body, res->content_type);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->code(), "UNAVAILABLE");
  EXPECT_TRUE(problem->retryable());
}

TEST(BlockingHttpClientTest, KeepsOneConnectionAcrossRequests) {
  FakeLobby lobby;
  BlockingHttpClient client;
  for (uint64_t room = 1; room <= 3; ++room) {
    const HttpOutcome outcome = client.Post(UrlOf(lobby.url()), SettlementRequest(room));
    ASSERT_TRUE(std::holds_alternative<HttpResponse>(outcome)) << room;
  }
  EXPECT_EQ(lobby.requests().size(), 3u);
  EXPECT_EQ(lobby.connections(), 1);
}

TEST(BlockingHttpClientTest, AConnectionTheServerDroppedCostsAReconnectNotAFailure) {
  FakeLobby lobby;
  lobby.SetHandler([](const FakeRequest&) {
    FakeReply reply;
    reply.close_after_reply = true;  // unannounced: the answer says keep-alive
    return reply;
  });
  BlockingHttpClient client;
  for (uint64_t room = 1; room <= 3; ++room) {
    const HttpOutcome outcome = client.Post(UrlOf(lobby.url()), SettlementRequest(room));
    ASSERT_TRUE(std::holds_alternative<HttpResponse>(outcome))
        << room << ": " << std::get<HttpError>(outcome).message;
  }
  EXPECT_EQ(lobby.accepted().size(), 3u);
  EXPECT_EQ(lobby.connections(), 3);
}

TEST(BlockingHttpClientTest, NoListenerIsAConnectFailure) {
  BlockingHttpClient client;
  const HttpOutcome outcome = client.Post(UrlOf(testing::UnreachableUrl()), SettlementRequest(1));
  const auto* error = std::get_if<HttpError>(&outcome);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->failure, HttpFailure::kConnect);
  EXPECT_FALSE(error->message.empty());
}

TEST(BlockingHttpClientTest, AnAnswerLaterThanTheTimeoutIsATimeout) {
  FakeLobby lobby;
  lobby.SetHandler([](const FakeRequest&) {
    FakeReply reply;
    reply.delay = 2s;
    return reply;
  });
  HttpConnectionOptions options;
  options.timeout = 200ms;
  BlockingHttpClient client(options);
  const HttpOutcome outcome = client.Post(UrlOf(lobby.url()), SettlementRequest(1));
  const auto* error = std::get_if<HttpError>(&outcome);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->failure, HttpFailure::kTimeout);
  EXPECT_EQ(lobby.requests().size(), 1u) << "a timed-out request was sent again";
}

TEST(BlockingHttpClientTest, HttpsWithoutTrustedAuthoritiesDoesNotConnect) {
  FakeLobby lobby;
  BlockingHttpClient client;
  HttpUrl url = UrlOf(lobby.url());
  url.tls = true;
  const HttpOutcome outcome = client.Post(url, SettlementRequest(1));
  const auto* error = std::get_if<HttpError>(&outcome);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->failure, HttpFailure::kConnect);
  EXPECT_TRUE(lobby.requests().empty());
}

TEST(LoadTlsTrustTest, AMissingFileIsAnInvalidArgument) {
  const auto trust = LoadTlsTrust("/nonexistent/ca.pem");
  ASSERT_FALSE(trust.ok());
  EXPECT_EQ(trust.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trust.status().message().find("/nonexistent/ca.pem"), std::string::npos);
}

// What a whole reply that is not a 2xx means for the record it was about.
Attempt ClassifyReply(int status, const std::string& content_type, const std::string& body) {
  HttpResponse res;
  res.status = status;
  res.reason = "Reason";
  res.content_type = content_type;
  res.body = body;
  return Classify(res, testing::MakeResult(1));
}

TEST(LobbyAnswerTest, OnlyAProblemSayingRetryableFalseIsTerminal) {
  const std::string type(wire::kProblemType);
  Attempt a =
      ClassifyReply(409, type, R"({"code":"OUTCOME_CONFLICT","detail":"d","retryable":false})");
  EXPECT_EQ(a.kind, Attempt::Kind::kTerminal);
  EXPECT_EQ(a.code, "OUTCOME_CONFLICT");
  EXPECT_EQ(a.message, "d");
  // Without a code, the refusal is recorded under its status.
  a = ClassifyReply(422, type, R"({"retryable":false})");
  EXPECT_EQ(a.kind, Attempt::Kind::kTerminal);
  EXPECT_EQ(a.code, "http_422");
  EXPECT_EQ(a.message, "Reason");
  for (const char* body : {R"({"code":"X"})", R"({"code":"X","retryable":"false"})",
                           R"({"code":"X","retryable":true})", "", "<html>", "[false]"}) {
    a = ClassifyReply(409, type, body);
    EXPECT_EQ(a.kind, Attempt::Kind::kRetryRoom) << body;
    EXPECT_EQ(a.cause, "http_409") << body;
  }
  // The right body under another media type is a proxy's, not the lobby's.
  a = ClassifyReply(404, "application/json", R"({"code":"ROOM_UNKNOWN","retryable":false})");
  EXPECT_EQ(a.kind, Attempt::Kind::kRetryRoom);
}

TEST(LobbyAnswerTest, ARefusedTokenIsNeverTerminal) {
  for (int status : {401, 403}) {
    const Attempt a = ClassifyReply(status, std::string(wire::kProblemType),
                                    R"({"code":"UNAUTHENTICATED","retryable":false})");
    EXPECT_EQ(a.kind, Attempt::Kind::kAuthRejected) << status;
  }
}

// The same for one item of a batch reply: even with retryable: false, it is retried, never
// dead-lettered.
TEST(LobbyAnswerTest, ARefusedTokenInABatchItemIsNeverTerminal) {
  for (int status : {401, 403}) {
    v1::SettlementBatchReply reply;
    v1::Problem* problem = reply.add_items()->mutable_problem();
    problem->set_status(status);
    problem->set_code("UNAUTHENTICATED");
    problem->set_retryable(false);
    HttpResponse res;
    res.status = 200;
    res.content_type = wire::kProtobufType;
    res.body = wire::DeterministicBytes(reply);
    storage::OutboxRecord record;
    record.result = testing::MakeResult(1);
    const std::vector<Attempt> attempts = ClassifyBatch(res, {record}, /*ack_whole=*/false);
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(attempts[0].kind, Attempt::Kind::kRetryRoom) << status;
    EXPECT_EQ(attempts[0].cause, "http_" + std::to_string(status));
  }
}

TEST(LobbyAnswerTest, EachWayOfGettingNoAnswerHasItsCause) {
  EXPECT_EQ(AttemptOfFailure({HttpFailure::kTimeout, "t"}).kind, Attempt::Kind::kRetryRoom);
  EXPECT_EQ(AttemptOfFailure({HttpFailure::kTimeout, "t"}).cause, "timeout");
  const std::pair<HttpFailure, const char*> failures[] = {{HttpFailure::kConnect, "connect"},
                                                          {HttpFailure::kWrite, "write"},
                                                          {HttpFailure::kRead, "read"},
                                                          {HttpFailure::kStale, "stale"}};
  for (const auto& [failure, cause] : failures) {
    const Attempt a = AttemptOfFailure({failure, "m"});
    EXPECT_EQ(a.kind, Attempt::Kind::kConnectionFailed) << cause;
    EXPECT_EQ(a.cause, cause);
    EXPECT_EQ(a.message, "m");
  }
}

}  // namespace
}  // namespace verdict::delivery
