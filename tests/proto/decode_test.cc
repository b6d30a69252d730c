// DecodeBody (proto/wire.h) within its limits: counts, depth and sizes are checked before
// protobuf builds anything, JSON ids are exact, and a key is given once. The lobby's and the
// node's ingest decode through it, so these hold for both.
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <string>

#include "proto/wire.h"
#include "tests/support/results.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::wire {
namespace {

using testing::MakeResult;

Status DecodeJson(const std::string& json, google::protobuf::Message* message,
                  const DecodeLimits& limits = {}) {
  return DecodeBody(json, BodyFormat::kJson, message, limits);
}

std::string Json(const google::protobuf::Message& message) {
  return EncodeBody(message, BodyFormat::kJson).value();
}

// A length-delimited protobuf field (numbers below 16): its tag, length and payload.
std::string Field(int number, const std::string& payload) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  for (size_t n = payload.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80) break;
  }
  return out + payload;
}

// A node builds its batch requests result by result (AppendToBatchBytes): the bytes are those of
// the SettlementBatch holding the same results, whatever the results hold.
TEST(DecodeBodyTest, ABatchBuiltResultByResultIsTheBatchsOwnBytes) {
  v1::SettlementBatch batch;
  std::string built;
  EXPECT_EQ(built, DeterministicBytes(batch));  // no result: no bytes
  std::vector<v1::BattleResult> results = {MakeResult(1), v1::BattleResult(), MakeResult(3)};
  results[2].mutable_players(0)->set_player_id(std::string(300, 'x') + "\u00e9");  // a long one
  results[2].set_winner_team(0);  // optional: present though zero
  results[2].add_placements()->set_team(2);
  for (const v1::BattleResult& r : results) {
    *batch.add_results() = r;
    AppendToBatchBytes(r, &built);
    EXPECT_EQ(built, DeterministicBytes(batch)) << batch.results_size() << " results";
  }
  v1::SettlementBatch decoded;
  ASSERT_TRUE(DecodeBody(built, BodyFormat::kProtobuf, &decoded).ok());
  EXPECT_EQ(decoded.results_size(), 3);
}

TEST(DecodeBodyTest, WellFormedBodiesDecodeInBothFormatsAlike) {
  v1::SettlementBatch batch;
  for (uint64_t room = 1; room <= 3; ++room) *batch.add_results() = MakeResult(room);
  v1::SettlementBatch from_json, from_protobuf;
  ASSERT_TRUE(DecodeJson(Json(batch), &from_json).ok());
  ASSERT_TRUE(DecodeBody(DeterministicBytes(batch), BodyFormat::kProtobuf, &from_protobuf).ok());
  EXPECT_EQ(DeterministicBytes(from_json), DeterministicBytes(batch));
  EXPECT_EQ(DeterministicBytes(from_protobuf), DeterministicBytes(batch));
  // camelCase names, ids as numbers or strings, nulls, enums by name or number.
  v1::BattleResult r;
  ASSERT_TRUE(DecodeJson(R"( {"roomId": 7, "outcome": 1, "winnerTeam": "2", "endedAtMs": "-5",
                              "nodeId": null, "players": [{"player_id": "18446744073709551615"}]} )",
                         &r)
                  .ok());
  EXPECT_EQ(r.room_id(), 7u);
  EXPECT_EQ(r.outcome(), v1::SETTLED);
  EXPECT_EQ(r.winner_team(), 2u);
  EXPECT_EQ(r.ended_at_ms(), -5);
  EXPECT_EQ(r.players(0).player_id(), "18446744073709551615");
}

TEST(DecodeBodyTest, IdsMustBeIntegerLiteralsInRange) {
  for (const char* room_id :
       {"123456789012345678.0", "1e3", "1.5", "\"1.0\"", "\" 1\"", "\"1 \"", "\"+1\"", "\"0x10\"",
        "01", "\"01\"", "-1", "\"-0\"", "18446744073709551616", "true", "[1]", "{}"}) {
    v1::BattleResult r;
    const Status s = DecodeJson(std::string(R"({"room_id":)") + room_id + "}", &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << room_id << ": " << s.ToString();
  }
  for (const char* team : {"4294967296", "-1"}) {  // uint32
    v1::PlayerResult p;
    EXPECT_FALSE(DecodeJson(std::string(R"({"team":)") + team + "}", &p).ok()) << team;
  }
  for (const char* ms : {"9223372036854775808", "-9223372036854775809"}) {  // int64
    v1::BattleResult r;
    EXPECT_FALSE(DecodeJson(std::string(R"({"ended_at_ms":)") + ms + "}", &r).ok()) << ms;
  }
  v1::BattleResult r;
  ASSERT_TRUE(
      DecodeJson(R"({"room_id":123456789012345678,"ended_at_ms":-9223372036854775808})", &r).ok());
  EXPECT_EQ(r.room_id(), 123456789012345678u);  // not ...680, as a double would make it
  EXPECT_EQ(r.ended_at_ms(), INT64_MIN);
}

TEST(DecodeBodyTest, AKeyIsGivenOnceUnderEitherNameAndAOneofTakesOneMember) {
  v1::BattleResult r;
  EXPECT_EQ(DecodeJson(R"({"room_id":1,"room_id":2})", &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeJson(R"({"room_id":1,"roomId":2})", &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeJson(R"({"players":[{"team":1,"team":2}]})", &r).code(),
            StatusCode::kInvalidArgument);
  v1::SettlementItem item;
  EXPECT_EQ(DecodeJson(R"({"receipt":{},"problem":{}})", &item).code(),
            StatusCode::kInvalidArgument);
  v1::Reconciliation doc;
  EXPECT_EQ(DecodeJson(R"({"counts":{"lost":1,"lost":2}})", &doc).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(DecodeJson(R"({"counts":{"lost":1,"pending":2}})", &doc).ok());
}

TEST(DecodeBodyTest, NestedArraysAndTheWrongShapesAreRefused) {
  v1::SettlementBatch batch;
  std::string nested = R"({"results":[{"room_id":1,"players":)";
  for (int i = 0; i < 1000; ++i) nested += '[';
  for (int i = 0; i < 1000; ++i) nested += ']';
  nested += "}]}";
  EXPECT_EQ(DecodeJson(nested, &batch).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeJson(R"({"results":[[{"room_id":1}]]})", &batch).code(),
            StatusCode::kInvalidArgument);
  for (const char* body : {"", "[]", "null", "{} {}", "{", R"({"results":{}})",
                           R"({"results":[1]})", R"({"results":[null]})", R"({"nope":1})",
                           "{\"results\":[],}", "{\"results\":[\"\x01\"]}"}) {
    EXPECT_EQ(DecodeJson(body, &batch).code(), StatusCode::kInvalidArgument) << body;
  }
}

TEST(DecodeBodyTest, MoreElementsThanTheLimitsAreResourceExhaustedInBothFormats) {
  v1::SettlementBatch batch;
  for (uint64_t room = 1; room <= kMaxBatchResults; ++room) *batch.add_results() = MakeResult(room);
  v1::SettlementBatch back;
  EXPECT_TRUE(DecodeJson(Json(batch), &back).ok());
  EXPECT_TRUE(DecodeBody(DeterministicBytes(batch), BodyFormat::kProtobuf, &back).ok());
  *batch.add_results() = MakeResult(kMaxBatchResults + 1);
  EXPECT_EQ(DecodeJson(Json(batch), &back).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(DecodeBody(DeterministicBytes(batch), BodyFormat::kProtobuf, &back).code(),
            StatusCode::kResourceExhausted);

  // All repeated fields together: 3 results of 3 players are 12 elements.
  const DecodeLimits small{.max_repeated = 4, .max_elements = 11};
  v1::SettlementBatch three;
  for (int i = 0; i < 3; ++i) {
    v1::BattleResult* r = three.add_results();
    for (int p = 0; p < 3; ++p) r->add_players()->set_player_id(std::to_string(p + 1));
  }
  EXPECT_EQ(DecodeJson(Json(three), &back, small).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(DecodeBody(DeterministicBytes(three), BodyFormat::kProtobuf, &back, small).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(DecodeJson(Json(three), &back, {.max_repeated = 4, .max_elements = 12}).ok());
}

TEST(DecodeBodyTest, MillionsOfEmptyProtobufItemsAreRefusedBeforeProtobufBuildsThem) {
  // 4 MiB of empty results: two bytes each, which protobuf would make 2M objects of.
  std::string body;
  while (body.size() < kMaxBatchBodyBytes) body += Field(1, "");
  v1::SettlementBatch batch;
  const Status s = DecodeBody(body, BodyFormat::kProtobuf, &batch);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(batch.results_size(), 0);
  // The same players merged into one result through a repeated singular field: the count over
  // the whole body still binds.
  std::string players;
  for (int i = 0; i < 250; ++i) players += Field(8, "");
  std::string envelopes;
  for (int i = 0; i < 320; ++i) envelopes += Field(3, players);  // Envelope.result, repeated
  v1::Envelope envelope;
  EXPECT_EQ(DecodeBody(envelopes, BodyFormat::kProtobuf, &envelope).code(),
            StatusCode::kResourceExhausted);
}

TEST(DecodeBodyTest, UnknownProtobufFieldsAreKeptWithinTheirLimit) {
  v1::BattleResult r = MakeResult(1);
  std::string body = DeterministicBytes(r);
  const std::string unknown = "\xf8\x01\x01";  // field 31, varint 1
  v1::BattleResult back;
  ASSERT_TRUE(DecodeBody(body + unknown, BodyFormat::kProtobuf, &back).ok());
  EXPECT_EQ(back.room_id(), 1u);
  for (int i = 0; i < 10; ++i) body += unknown;
  EXPECT_EQ(DecodeBody(body, BodyFormat::kProtobuf, &back, {.max_unknown_fields = 9}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(DecodeBody(body, BodyFormat::kProtobuf, &back, {.max_unknown_fields = 10}).ok());
  // A known field with another wire type is unknown to protobuf too.
  EXPECT_EQ(DecodeBody(std::string("\x0d\x01\x00\x00\x00", 5), BodyFormat::kProtobuf, &back,
                       {.max_unknown_fields = 0})
                .code(),
            StatusCode::kResourceExhausted);
  // Groups are refused outright.
  EXPECT_EQ(DecodeBody(std::string("\xfb\x01\xfc\x01"), BodyFormat::kProtobuf, &back).code(),
            StatusCode::kInvalidArgument);
}

TEST(DecodeBodyTest, NestingPastTheDepthIsRefused) {
  v1::SettlementBatch batch;
  *batch.add_results() = MakeResult(1);  // batch, result, player: three deep
  v1::SettlementBatch back;
  const DecodeLimits shallow{.max_depth = 2};
  EXPECT_EQ(DecodeJson(Json(batch), &back, shallow).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeBody(DeterministicBytes(batch), BodyFormat::kProtobuf, &back, shallow).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(DecodeJson(Json(batch), &back, {.max_depth = 3}).ok());
}

TEST(DecodeBodyTest, StringsAreMeasuredUnescapedAgainstTheLimit) {
  v1::BattleResult r;
  r.set_node_id(std::string(kMaxStringBytes, 'n'));
  v1::BattleResult back;
  EXPECT_TRUE(DecodeJson(Json(r), &back).ok());
  EXPECT_TRUE(DecodeBody(DeterministicBytes(r), BodyFormat::kProtobuf, &back).ok());
  r.set_node_id(std::string(kMaxStringBytes + 1, 'n'));
  EXPECT_EQ(DecodeJson(Json(r), &back).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeBody(DeterministicBytes(r), BodyFormat::kProtobuf, &back).code(),
            StatusCode::kInvalidArgument);
  // "\u00e9" is six characters for two bytes: 2048 of them are 4096 bytes.
  std::string escaped;
  for (size_t i = 0; i < kMaxStringBytes / 2; ++i) escaped += "\\u00e9";
  ASSERT_TRUE(DecodeJson(R"({"node_id":")" + escaped + "\"}", &back).ok());
  EXPECT_EQ(back.node_id().size(), kMaxStringBytes);
  EXPECT_EQ(DecodeJson(R"({"node_id":")" + escaped + "x\"}", &back).code(),
            StatusCode::kInvalidArgument);
}

// A well-known type's JSON is not its fields (a Struct is any object): it is checked only for
// depth, counts and sizes, and protobuf reads it.
TEST(DecodeBodyTest, AWellKnownTypeIsCheckedForDepthAndSizeOnly) {
  google::protobuf::Struct doc;
  ASSERT_TRUE(
      DecodeJson(R"({"mode":"events","rows":[{"per_s":1,"ok":true,"x":null}]})", &doc).ok());
  EXPECT_EQ(doc.fields().at("mode").string_value(), "events");
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(DecodeJson(R"({"a":)" + deep + "}", &doc).code(), StatusCode::kInvalidArgument);
  std::string wide = R"({"a":[0)";
  for (size_t i = 1; i <= kMaxBatchResults; ++i) wide += ",0";
  EXPECT_EQ(DecodeJson(wide + "]}", &doc).code(), StatusCode::kResourceExhausted);
}

TEST(DecodeBodyTest, TheMessageSaysWhereTheBodyIsWrong) {
  v1::SettlementBatch batch;
  const Status s =
      DecodeJson(R"({"results":[{"room_id":1},{"room_id":123456789012345678.0}]})", &batch);
  EXPECT_NE(s.message().find("results[1].room_id"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("123456789012345678.0"), std::string::npos) << s.message();
  std::string error;
  EXPECT_FALSE(DecodeBody("{\"room_id\":1.0}", BodyFormat::kJson, &batch, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace verdict::wire
