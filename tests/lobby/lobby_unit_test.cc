// Lobby logic that needs no database: validation, tokens, the error table, body formats,
// fingerprints, query parsing, what each status of the settlement SQL means, and the readiness
// monitor.
#include <google/protobuf/any.pb.h>
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/constant_time.h"
#include "lobby/ladder_cursor.h"
#include "lobby/pg/array_literal.h"
#include "lobby/pg_statuses.h"
#include "lobby/rating/rating_system.h"
#include "lobby/readiness.h"
#include "lobby/settled_event.h"
#include "lobby/settlement_service.h"
#include "proto/wire.h"
#include "server/problem.h"
#include "tests/support/results.h"

namespace verdict::lobby {
namespace {

using testing::MakeResult;
using wire::ValidateAllocation;
using wire::ValidateResult;

TEST(ValidateResultTest, AcceptsAWellFormedResult) {
  EXPECT_TRUE(ValidateResult(MakeResult(1)).ok());
  auto aborted = MakeResult(1);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  EXPECT_TRUE(ValidateResult(aborted).ok());
}

// Each way a result can be wrong is INVALID_ARGUMENT naming what is wrong (issue 39's list of
// bad input, and the older rules).
TEST(ValidateResultTest, RefusesEachKindOfInconsistency) {
  const auto refuses = [](auto mutate, const std::string& needle) {
    auto r = MakeResult(1);
    mutate(r);
    const Status s = ValidateResult(r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  refuses([](v1::BattleResult& r) { r.set_room_id(0); }, "room_id");
  refuses([](v1::BattleResult& r) { r.set_outcome(v1::OUTCOME_UNSPECIFIED); }, "outcome");
  refuses([](v1::BattleResult& r) { r.set_winner_team(3); }, "winner_team");
  refuses([](v1::BattleResult& r) { r.set_outcome(v1::ABORTED); }, "ABORTED");
  refuses([](v1::BattleResult& r) { r.clear_players(); }, "players");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_team(0); }, "team");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_team(101); }, "team");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_player_id(""); }, "player_id");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_player_id(std::string(65, 'p')); },
          "64");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_player_id("\xc3\x28"); }, "UTF-8");
  refuses([](v1::BattleResult& r) { r.mutable_players(1)->set_player_id("11"); }, "twice");
  refuses(
      [](v1::BattleResult& r) {
        for (auto& p : *r.mutable_players()) p.set_team(1);
      },
      "two teams");
  // An empty team: teams 1 and 3, no team 2.
  refuses(
      [](v1::BattleResult& r) {
        for (auto& p : *r.mutable_players()) {
          if (p.team() == 2) p.set_team(3);
        }
      },
      "team 2 is empty");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_kills(1u << 31); }, "range");
  refuses([](v1::BattleResult& r) { r.mutable_players(0)->set_share(1.5); }, "share");
  refuses([](v1::BattleResult& r) { r.set_abort_reason(std::string("x\0y", 3)); }, "NUL");
  refuses([](v1::BattleResult& r) { r.set_replay_path(std::string(5000, 'p')); }, "4096");
  refuses([](v1::BattleResult& r) { r.set_ended_at_ms(-1); }, "ended_at_ms");
  // Placements: every team once, ranks 1 to T, not beside a winner.
  const auto placed = [](std::vector<std::pair<uint32_t, uint32_t>> ranks) {
    return [ranks](v1::BattleResult& r) {
      r.clear_winner_team();
      for (const auto& [team, rank] : ranks) {
        v1::TeamPlacement* p = r.add_placements();
        p->set_team(team);
        p->set_rank(rank);
      }
    };
  };
  refuses(placed({{1, 1}}), "every team is ranked exactly once");
  refuses(placed({{1, 1}, {1, 2}}), "ranked twice");
  refuses(placed({{1, 1}, {3, 2}}), "not a team of the room");
  refuses(placed({{1, 1}, {2, 3}}), "rank must be between 1 and 2");
  refuses(placed({{1, 0}, {2, 1}}), "rank must be between 1 and 2");
  refuses(
      [&](v1::BattleResult& r) {
        placed({{1, 1}, {2, 2}})(r);
        r.set_winner_team(1);
      },
      "both given");
  // A draw beside placements naming a winner: a contradiction, refused like any winner beside
  // placements (issue 49, item 2: it was settled as the placements' win).
  refuses(
      [&](v1::BattleResult& r) {
        placed({{1, 1}, {2, 2}})(r);
        r.set_winner_team(0);
      },
      "both given");
  // Placements that give no team rank 1 would be rated by their order yet counted as a loss for
  // every player (issue 49, item 2): refused.
  refuses(placed({{1, 2}, {2, 2}}), "no team has rank 1");
  // A SETTLED result naming neither has no winner: refused whatever the wire format (issue 49,
  // item 1: the node stored it from JSON and the lobby settled it from protobuf as a draw).
  refuses([](v1::BattleResult& r) { r.clear_winner_team(); }, "winner_team");
  auto unnamed = MakeResult(1);
  unnamed.clear_winner_team();
  v1::BattleResult from_protobuf;
  ASSERT_TRUE(from_protobuf.ParseFromString(unnamed.SerializeAsString()));
  EXPECT_EQ(ValidateResult(from_protobuf).code(), StatusCode::kInvalidArgument);
  // A draw said in protobuf keeps its 0 across the wire (explicit presence), and is accepted.
  auto draw = MakeResult(1);
  draw.set_winner_team(0);
  v1::BattleResult draw_from_protobuf;
  ASSERT_TRUE(draw_from_protobuf.ParseFromString(draw.SerializeAsString()));
  EXPECT_TRUE(ValidateResult(draw_from_protobuf).ok());
  EXPECT_EQ(wire::RanksOf(draw_from_protobuf), (std::vector<uint32_t>{1, 1}));
  // Three teams need placements; a winner_team is for two.
  const auto three_teams = [](v1::BattleResult& r) { r.mutable_players(9)->set_team(3); };
  refuses(three_teams, "placements");
  auto placed_three = MakeResult(1);
  three_teams(placed_three);
  placed({{1, 2}, {2, 1}, {3, 2}})(placed_three);
  EXPECT_TRUE(ValidateResult(placed_three).ok()) << ValidateResult(placed_three).ToString();
  EXPECT_EQ(wire::RanksOf(placed_three), (std::vector<uint32_t>{2, 1, 2}));
}

TEST(ValidateResultTest, WinnerTeamMeansTheTwoTeamPlacements) {
  auto r = MakeResult(1);
  EXPECT_EQ(wire::RanksOf(r), (std::vector<uint32_t>{1, 2}));
  r.set_winner_team(2);
  EXPECT_EQ(wire::RanksOf(r), (std::vector<uint32_t>{2, 1}));
  r.set_winner_team(0);
  EXPECT_EQ(wire::RanksOf(r), (std::vector<uint32_t>{1, 1}));
}

// Rooms of any shape up to 100 teams and 200 seats; an empty team, a player seated twice or a
// bad player id is refused.
TEST(ValidateAllocationTest, TeamsOfAnySizeOfDistinctPlayers) {
  const v1::RoomAllocation a = testing::MakeAllocation(5, "node-a", 1, 4);
  EXPECT_TRUE(ValidateAllocation(a).ok());
  auto uneven = a;  // a 3v1
  uneven.mutable_seats(1)->set_team(1);
  EXPECT_TRUE(ValidateAllocation(uneven).ok());
  auto free_for_all = a;  // four teams of one
  for (int i = 0; i < 4; ++i) free_for_all.mutable_seats(i)->set_team(i + 1);
  EXPECT_TRUE(ValidateAllocation(free_for_all).ok());
  auto royale = testing::MakeAllocation(6, "node-a", 1, 150);  // 50 trios
  for (int i = 0; i < 150; ++i) royale.mutable_seats(i)->set_team(i / 3 + 1);
  EXPECT_TRUE(ValidateAllocation(royale).ok()) << ValidateAllocation(royale).ToString();

  auto empty_team = a;
  empty_team.mutable_seats(3)->set_team(3);
  empty_team.mutable_seats(2)->set_team(3);
  EXPECT_NE(ValidateAllocation(empty_team).message().find("team 2 is empty"), std::string::npos);
  auto twice = a;
  twice.mutable_seats(1)->set_player_id("1");
  EXPECT_NE(ValidateAllocation(twice).message().find("two seats"), std::string::npos);
  auto no_node = a;
  no_node.clear_node_id();
  EXPECT_FALSE(ValidateAllocation(no_node).ok());
  auto one_seat = a;
  one_seat.mutable_seats()->DeleteSubrange(1, 3);
  EXPECT_FALSE(ValidateAllocation(one_seat).ok());
  auto too_many_teams = testing::MakeAllocation(7, "node-a", 1, 101);
  for (int i = 0; i < 101; ++i) too_many_teams.mutable_seats(i)->set_team(i + 1);
  EXPECT_NE(ValidateAllocation(too_many_teams).message().find("between 1 and 100"),
            std::string::npos);
  EXPECT_NE(ValidateAllocation(testing::MakeAllocation(8, "node-a", 1, 201)).message().find("200"),
            std::string::npos);
  auto bad_mode = a;
  bad_mode.set_mode("Ranked Season");
  EXPECT_NE(ValidateAllocation(bad_mode).message().find("mode"), std::string::npos);
}

TEST(ConstantTimeEqualsTest, ComparesWholeTokens) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secre"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

// Bytes that log every position read from them, as (which input, position).
struct TracedBytes {
  using Read = std::pair<char, size_t>;
  std::string bytes;
  char name;
  std::vector<Read>* reads;
  size_t size() const { return bytes.size(); }
  char operator[](size_t i) const {
    reads->emplace_back(name, i);
    return bytes[i];
  }
};

// The reads ConstantTimeEquals makes comparing `presented` with `known`, and its answer.
std::pair<std::vector<TracedBytes::Read>, bool> ReadsOfComparing(const std::string& presented,
                                                                 const std::string& known) {
  std::vector<TracedBytes::Read> reads;
  const bool equal =
      ConstantTimeEqualsOver(TracedBytes{presented, 'p', &reads}, TracedBytes{known, 'k', &reads});
  return {reads, equal};
}

// By construction rather than by the clock: the comparison reads every byte of both tokens once,
// in the same order, wherever the first difference is (or if there is none), so its running time
// cannot tell an attacker how much of a guess was right.
TEST(ConstantTimeEqualsTest, ReadsEveryByteWhereverTheFirstDifferenceIs) {
  const std::string known = "node-a:9f86d081884c7d659a2feaa0c55ad015";
  std::vector<TracedBytes::Read> every;
  for (size_t i = 0; i < known.size(); ++i) {
    every.emplace_back('p', i);
    every.emplace_back('k', i);
  }
  const auto [reads_equal, equal] = ReadsOfComparing(known, known);
  EXPECT_TRUE(equal);
  EXPECT_EQ(reads_equal, every);
  for (size_t first = 0; first < known.size(); ++first) {
    std::string guess = known;
    guess[first] ^= 0x20;
    const auto [reads, same] = ReadsOfComparing(guess, known);
    EXPECT_FALSE(same) << "differs at " << first;
    EXPECT_EQ(reads, every) << "the reads depend on where the guess first differs (" << first
                            << ")";
  }
  std::string all_wrong(known.size(), '\0');
  EXPECT_EQ(ReadsOfComparing(all_wrong, known).first, every);
  // A guess of another length is refused, and both are still read whole, once.
  std::vector<TracedBytes::Read> every_of_both;
  for (size_t i = 0; i < known.size(); ++i) {
    if (i < 6) every_of_both.emplace_back('p', i);
    every_of_both.emplace_back('k', i);
  }
  const auto [reads_short, short_equal] = ReadsOfComparing(known.substr(0, 6), known);
  EXPECT_FALSE(short_equal);
  EXPECT_EQ(reads_short, every_of_both);
}

TEST(ProblemTest, EveryCodeHasItsStatusAndOnlyUnavailableIsRetryable) {
  const std::pair<ErrorCode, int> expected[] = {{ErrorCode::kInvalidArgument, 400},
                                                {ErrorCode::kUnauthenticated, 401},
                                                {ErrorCode::kRoomUnknown, 404},
                                                {ErrorCode::kOutcomeConflict, 409},
                                                {ErrorCode::kPayloadTooLarge, 413},
                                                {ErrorCode::kUnsupportedMediaType, 415},
                                                {ErrorCode::kIdempotencyMismatch, 422},
                                                {ErrorCode::kRosterMismatch, 422},
                                                {ErrorCode::kPlayerBusy, 409},
                                                {ErrorCode::kUnavailable, 503},
                                                {ErrorCode::kInternal, 500}};
  for (auto [code, status] : expected) {
    EXPECT_EQ(InfoOf(code).http_status, status) << InfoOf(code).code;
    EXPECT_EQ(InfoOf(code).retryable, code == ErrorCode::kUnavailable) << InfoOf(code).code;
  }
  const HttpReply reply = ProblemReply(ErrorCode::kUnavailable, "db \"down\"\n", "/x", 3);
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.content_type, "application/problem+json");
  ASSERT_EQ(reply.headers.size(), 1u);
  EXPECT_EQ(reply.headers[0], (std::pair<std::string, std::string>{"Retry-After", "3"}));
  EXPECT_NE(reply.body.find(R"("detail":"db \"down\"\n")"), std::string::npos) << reply.body;
  EXPECT_NE(reply.body.find(R"("code":"UNAVAILABLE","retryable":true)"), std::string::npos);

  // INTERNAL: the node dead-letters on retryable false, so it must say so, and ask no retry.
  const HttpReply internal = ProblemReply(ErrorCode::kInternal, "check violation", "/x", 3);
  EXPECT_EQ(internal.status, 500);
  EXPECT_TRUE(internal.headers.empty());
  EXPECT_NE(internal.body.find(R"("code":"INTERNAL","retryable":false)"), std::string::npos)
      << internal.body;
}

// The problem body is a v1::ProblemDetails printed by protobuf: any detail and instance, quotes,
// backslashes, control characters and non-ASCII included, reads back as it was.
TEST(ProblemTest, BodyIsProblemDetailsAndCarriesAnyTextIntact) {
  const std::string detail = "a \"quoted\" C:\\path\n\ttab \x01 <tag> caf\xc3\xa9 \xf0\x9f\x8e\xb2";
  const std::string instance = "/v1/rooms/\"7\"\\caf\xc3\xa9";
  const HttpReply reply = ProblemReply(ErrorCode::kRoomUnknown, detail, instance);
  v1::ProblemDetails problem;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &problem, &error))
      << error << " in " << reply.body;
  EXPECT_EQ(problem.type(), "urn:verdict:problem:ROOM_UNKNOWN");
  EXPECT_EQ(problem.title(), "Room unknown");
  EXPECT_EQ(problem.status(), 404u);
  EXPECT_EQ(problem.detail(), detail);
  EXPECT_EQ(problem.instance(), instance);
  EXPECT_EQ(problem.code(), "ROOM_UNKNOWN");
  EXPECT_FALSE(problem.retryable());
  EXPECT_EQ(reply.body.find('\n'), std::string::npos) << "one line: " << reply.body;
}

TEST(WireTest, ContentTypesAndReplyFormats) {
  using wire::BodyFormat;
  EXPECT_EQ(wire::FormatOfContentType("application/json; charset=utf-8"), BodyFormat::kJson);
  EXPECT_EQ(wire::FormatOfContentType("Application/X-Protobuf"), BodyFormat::kProtobuf);
  EXPECT_EQ(wire::FormatOfContentType("text/plain"), std::nullopt);
  EXPECT_EQ(wire::FormatOfContentType(""), std::nullopt);
  EXPECT_EQ(wire::ReplyFormat("", BodyFormat::kProtobuf, BodyFormat::kJson), BodyFormat::kProtobuf);
  EXPECT_EQ(wire::ReplyFormat("application/json", BodyFormat::kProtobuf, BodyFormat::kJson),
            BodyFormat::kJson);
  EXPECT_EQ(wire::ReplyFormat("*/*", std::nullopt, BodyFormat::kJson), BodyFormat::kJson);
}

TEST(WireTest, JsonUsesProtoFieldNamesAndEnumNames) {
  const std::string json = wire::EncodeBody(MakeResult(3), wire::BodyFormat::kJson).value();
  EXPECT_NE(json.find("\"room_id\":\"3\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"winner_team\":1"), std::string::npos);
  EXPECT_NE(json.find("\"outcome\":\"SETTLED\""), std::string::npos);
  v1::BattleResult back;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(json, wire::BodyFormat::kJson, &back, &error)) << error;
  EXPECT_EQ(Fingerprint(back), Fingerprint(MakeResult(3)));
  EXPECT_EQ(Fingerprint(back).size(), 32u);
  auto other = MakeResult(3);
  other.mutable_players(2)->set_assists(1);
  EXPECT_NE(Fingerprint(other), Fingerprint(back));
}

TEST(WireTest, JsonWritesMapEntriesAndStructKeysInKeyOrder) {
  v1::Reconciliation report;
  for (const char* state : {"unchecked", "lost", "pending", "dead-lettered"}) {
    (*report.mutable_counts())[state] = 1;
  }
  EXPECT_NE(wire::ToJson(report).value().find(
                R"("counts":{"dead-lettered":1,"lost":1,"pending":1,"unchecked":1})"),
            std::string::npos)
      << wire::ToJson(report).value();
  google::protobuf::Struct doc;
  for (const char* key : {"zeta", "mode", "alpha", "rows"}) {
    (*doc.mutable_fields())[key].set_number_value(1);
  }
  EXPECT_EQ(wire::ToJson(doc).value(), R"({"alpha":1,"mode":1,"rows":1,"zeta":1})");
}

TEST(WireTest, ValidUtf8ReplacesEveryByteOutsideWellFormedUtf8) {
  const std::string kReplacement = "\xef\xbf\xbd";
  const std::string valid = "plain caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8e\xb2 \x01\x7f";
  EXPECT_EQ(wire::ValidUtf8(valid), valid);
  EXPECT_EQ(wire::ValidUtf8("a\xff"
                            "b"),
            "a" + kReplacement + "b");
  EXPECT_EQ(wire::ValidUtf8("\x80"), kReplacement);                     // a lone continuation
  EXPECT_EQ(wire::ValidUtf8("caf\xc3"), "caf" + kReplacement);          // cut short
  EXPECT_EQ(wire::ValidUtf8("\xc0\xaf"), kReplacement + kReplacement);  // overlong '/'
  EXPECT_EQ(wire::ValidUtf8("\xe0\x80\xaf"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(wire::ValidUtf8("\xed\xa0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(wire::ValidUtf8("\xf4\x90\x80\x80"),  // above U+10FFFF
            kReplacement + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(wire::ValidUtf8("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");  // U+10FFFF itself
}

// A path that is not UTF-8 still gets a problem body that says it, with the bad bytes replaced.
TEST(ProblemTest, TextThatIsNotUtf8IsReplacedNotDropped) {
  const HttpReply reply = ProblemReply(ErrorCode::kNotFound, "no such endpoint", "/v1/\xff\xfe");
  v1::ProblemDetails problem;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &problem, &error)) << error;
  EXPECT_EQ(problem.instance(), "/v1/\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(WireTest, JsonEncodingThatFailsIsAnErrorNotAnEmptyBody) {
  // An Any of a type nobody knows has no JSON form.
  google::protobuf::Any unknown;
  unknown.set_type_url("type.googleapis.com/verdict.v1.NoSuchMessage");
  unknown.set_value("\x08\x01");
  auto json = wire::EncodeBody(unknown, wire::BodyFormat::kJson);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), StatusCode::kInternal);
  EXPECT_NE(json.status().message().find("google.protobuf.Any"), std::string::npos)
      << json.status().message();
  // The binary form needs no type information.
  EXPECT_TRUE(wire::EncodeBody(unknown, wire::BodyFormat::kProtobuf).ok());
}

TEST(ParseEventsAfterTest, ReadsTheQuery) {
  EXPECT_EQ(*SettlementService::ParseEventsAfter("/v1/events"), std::nullopt)
      << "without after, the feed starts at the beginning of what it holds, not at 0";
  EXPECT_EQ(*SettlementService::ParseEventsAfter("/v1/events?after=0"), 0);
  EXPECT_EQ(*SettlementService::ParseEventsAfter("/v1/events?after=42"), 42);
  EXPECT_EQ(*SettlementService::ParseEventsAfter("/v1/events?x=1&after=7"), 7);
  EXPECT_FALSE(SettlementService::ParseEventsAfter("/v1/events?after=-1").ok());
  EXPECT_FALSE(SettlementService::ParseEventsAfter("/v1/events?after=1x").ok());
  EXPECT_FALSE(SettlementService::ParseEventsAfter("/v1/events?after=").ok());
  EXPECT_EQ(*SettlementService::ParseEventsAfter("/v1/events?afterwards=3"), std::nullopt);
}

TEST(ParseEventsEpochTest, ReadsTheQuery) {
  EXPECT_EQ(*SettlementService::ParseEventsEpoch("/v1/events?after=3"), "");
  EXPECT_EQ(*SettlementService::ParseEventsEpoch("/v1/events?after=3&epoch=0a1b"), "0a1b");
  for (const char* bad : {"/v1/events?epoch=", "/v1/events?epoch=XYZ", "/v1/events?epoch=%20"}) {
    EXPECT_FALSE(SettlementService::ParseEventsEpoch(bad).ok()) << bad;
  }
}

// Where the feed can continue from: every cursor from the trim mark to the head, in its epoch.
TEST(RefuseEventsCursorTest, RefusesWhatTheFeedCannotContinue) {
  const FeedState feed{"00aa", /*head=*/10, /*trimmed_through=*/4, /*oldest=*/5};
  const auto code = [&](int64_t after, const std::string& epoch) -> std::string {
    auto refused = SettlementService::RefuseEventsCursor(feed, after, epoch, "/v1/events");
    if (!refused) return "OK";
    v1::ProblemDetails problem;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(refused->body, wire::BodyFormat::kJson, &problem, &error));
    EXPECT_EQ(problem.feed().head_event_id(), 10u);
    EXPECT_EQ(problem.feed().trimmed_through(), 4u);
    EXPECT_EQ(problem.feed().oldest_event_id(), 5u);
    EXPECT_EQ(problem.feed().epoch(), "00aa");
    return problem.code() + "/" + std::to_string(refused->status);
  };
  EXPECT_EQ(code(4, ""), "OK");
  EXPECT_EQ(code(10, "00aa"), "OK");
  EXPECT_EQ(code(11, ""), "CURSOR_AHEAD/409");
  EXPECT_EQ(code(3, ""), "CURSOR_TRIMMED/410");
  EXPECT_EQ(code(0, "00aa"), "CURSOR_TRIMMED/410");
  EXPECT_EQ(code(5, "00bb"), "EPOCH_CHANGED/409") << "the epoch is judged first";
  // The other problems carry no feed position.
  EXPECT_EQ(ProblemReply(ErrorCode::kRoomUnknown, "x", "/y").body.find("feed"), std::string::npos);
}

// A ladder cursor carries a player id, and only one that could be a player's: a cursor whose id
// is not UTF-8 (a real cursor lower-cased, say) or holds a NUL is not one (400), where the first
// reached PostgreSQL and was refused there (500, SQLSTATE 22021) and the second was cut at its NUL.
TEST(LadderCursorTest, DecodesWhatItEncodesAndOnlyPlayerIds) {
  for (const LadderCursor& c :
       {LadderCursor{1612.5, "p3"}, LadderCursor{-3.25, "\xc3\xa9t\xc3\xa9"},
        LadderCursor{0, std::string(64, 'x')}}) {
    const auto decoded = DecodeLadderCursor(EncodeLadderCursor(c));
    ASSERT_TRUE(decoded.has_value()) << c.player_id;
    EXPECT_EQ(decoded->displayed, c.displayed);
    EXPECT_EQ(decoded->player_id, c.player_id);
  }
  for (const std::string& id : {std::string("\xff\xfe"), std::string("a\0b", 3),
                                std::string("\xc3"), std::string(65, 'x'), std::string()}) {
    EXPECT_FALSE(DecodeLadderCursor(EncodeLadderCursor({1500, id})).has_value())
        << "id of " << id.size() << " bytes";
  }
  // A real cursor lower-cased: its id's bytes are no longer UTF-8.
  const std::string cursor = EncodeLadderCursor({1500, "PLAYER-ONE"});
  std::string lowered = cursor;
  for (char& ch : lowered) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  ASSERT_NE(lowered, cursor);
  EXPECT_FALSE(DecodeLadderCursor(lowered).has_value()) << lowered;
}

// Every status the lobby's SQL answers (sql/functions/) has its own meaning (what each answers is
// ServiceTest's); a status this binary does not know is INTERNAL, never a guess at a final refusal
// (a node dead-letters on one).
TEST(SqlStatusTest, EveryStatusHasItsMeaningAndAnUnknownOneIsInternal) {
  // Each production table: every name reads as its own status, and no two names share one.
  const auto each_reads_back = [](const auto& table) {
    std::set<int> seen;
    for (const auto& [name, status] : table) {
      auto decoded = StatusFromSql(table, "call", name);
      ASSERT_TRUE(decoded.ok()) << name;
      EXPECT_EQ(*decoded, status) << name;
      EXPECT_TRUE(seen.insert(static_cast<int>(status)).second) << name << " shares its status";
    }
  };
  each_reads_back(kSettleStatuses);
  each_reads_back(kAllocateStatuses);
  each_reads_back(kDeclareStatuses);
  each_reads_back(kImportStatuses);
  each_reads_back(kReleaseStatuses);
  for (const char* unknown : {"", "settled", "SETTLED", "locked", "room_unknown "}) {
    auto decoded = StatusFromSql(kSettleStatuses, "settlement", unknown);
    EXPECT_FALSE(decoded.ok()) << "'" << unknown << "' was taken for a known status";
    EXPECT_EQ(decoded.status().code(), StatusCode::kInternal);
    EXPECT_NE(decoded.status().message().find(std::string("'") + unknown + "'"), std::string::npos)
        << decoded.status().message();
  }
  EXPECT_EQ(StatusFromSql(kAllocateStatuses, "allocation", "busy").status().code(),
            StatusCode::kInternal);
}

// The literal's text, element by element; that PostgreSQL reads these doubles back exactly is
// BatchSettlementTest.EventPlayersAreTheJsonbTheDatabaseWouldBuild's to show.
TEST(ArrayLiteralTest, QuotesEveryTextAndWritesEachNumberInFull) {
  pg::ArrayLiteral empty;
  EXPECT_EQ(empty.str(), "{}");

  pg::ArrayLiteral text;
  for (const char* s : {"", "a", "a,b", "{x}", "say \"hi\"", "back\\slash", "\\\"", "NULL"}) {
    text.AddText(s);
  }
  text.AddNull();
  EXPECT_EQ(text.str(), R"({"","a","a,b","{x}","say \"hi\"","back\\slash","\\\"","NULL",NULL})");

  pg::ArrayLiteral numbers;
  numbers.Add(true);
  numbers.Add(false);
  numbers.Add(uint64_t{18446744073709551615u});
  numbers.Add(int64_t{-9223372036854775807 - 1});
  numbers.Add(uint32_t{7});
  EXPECT_EQ(numbers.str(), "{t,f,18446744073709551615,-9223372036854775808,7}");

  pg::ArrayLiteral special;
  special.Add(std::nan(""));
  special.Add(-std::nan(""));
  special.Add(HUGE_VAL);
  special.Add(-HUGE_VAL);
  special.Add(-0.0);
  special.Add(1.5);
  EXPECT_EQ(special.str(), "{NaN,NaN,Infinity,-Infinity,-0,1.5}");

  // Each double as the shortest text strtod (float8in's reader) takes back to the same bits.
  const double hard[] = {
      0.1,      1.0 / 3,     2.0 / 3, 1516.0000000000002, 1e21, 5e-324, 1.7976931348623157e308,
      25.0 / 3, 0.5 + 1e-16, 1e-7};
  for (double x : hard) {
    pg::ArrayLiteral one;
    one.Add(x);
    const std::string literal = one.str();
    const std::string element = literal.substr(1, literal.size() - 2);
    EXPECT_EQ(std::strtod(element.c_str(), nullptr), x) << element;
    EXPECT_LE(element.size(), 24u) << element;
  }
}

TEST(CheckTokensTest, RefusesATokenOfTwoNodesAndANodeTokenThatIsTheAdminToken) {
  EXPECT_TRUE(
      SettlementService::CheckTokens({{"a", "t1"}, {"a", "t2"}, {"b", "t3"}}, "admin").ok());
  EXPECT_EQ(SettlementService::CheckTokens({{"a", "t1"}, {"b", "t1"}}, "admin").code(),
            StatusCode::kInvalidArgument);
  const Status admin = SettlementService::CheckTokens({{"a", "t1"}, {"b", "admin"}}, "admin");
  EXPECT_EQ(admin.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(admin.message().find("node b"), std::string::npos) << admin.message();
  EXPECT_TRUE(SettlementService::CheckTokens({{"a", "t1"}}, "").ok());
}

// A token no header can carry (a newline from a file, a space) is refused, never kept unusable.
TEST(CheckTokensTest, RefusesATokenThatCannotTravelInAHeader) {
  const Status node = SettlementService::CheckTokens({{"a", "t1\n"}}, "admin");
  EXPECT_EQ(node.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(node.message().find("node a"), std::string::npos) << node.message();
  EXPECT_EQ(SettlementService::CheckTokens({{"a", "t1"}}, "two words").code(),
            StatusCode::kInvalidArgument);
}

// The readiness monitor answers from the last probe's verdict, and is not ready while a probe
// runs past its timeout (a database that hangs): with a fake probe and a fake clock.
TEST(ReadinessMonitorTest, AnswersTheLastVerdictAndNotReadyWhileAProbeOutrunsItsTimeout) {
  FakeClock clock;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> probes{0};
  std::atomic<bool> hang{false};
  std::promise<void> hanging;
  ReadinessMonitor monitor(
      [&]() -> Status {
        const int n = ++probes;
        if (hang) {
          hanging.set_value();
          released.wait();
        }
        return n == 2 ? UnavailableError("disk full") : Status::Ok();
      },
      {.interval = std::chrono::hours(1),
       .timeout = std::chrono::milliseconds(5000),
       .clock = &clock});
  EXPECT_EQ(monitor.Current().code(), StatusCode::kUnavailable) << "ready before any probe";
  monitor.Refresh();
  EXPECT_TRUE(monitor.Current().ok());
  monitor.Refresh();
  EXPECT_EQ(monitor.Current().message(), "disk full");
  monitor.Refresh();
  EXPECT_TRUE(monitor.Current().ok());

  hang = true;
  std::thread probe([&] { monitor.Refresh(); });
  hanging.get_future().wait();
  clock.AdvanceMs(5000);
  EXPECT_TRUE(monitor.Current().ok()) << "not ready before the probe's timeout";
  clock.AdvanceMs(1);
  EXPECT_EQ(monitor.Current().code(), StatusCode::kUnavailable);
  release.set_value();
  probe.join();
  EXPECT_TRUE(monitor.Current().ok());
}

// A rating stored before the bounds were kept (issue 49, item 6: an Elo of 1e308 showed as 0 and
// its next room's elo_before as INT64_MIN) shows within them: the API's rating saturates at the
// bounds, and an event's Elo integers at PostgreSQL's integer range (round()::integer) rather
// than wrapping.
TEST(RatingDisplayTest, ARatingBeyondTheBoundsSaturatesAndNeverWraps) {
  EXPECT_EQ(rating::WithinRatingBounds(1e308), rating::kMaxRatingValue);
  EXPECT_EQ(rating::WithinRatingBounds(-3e9), -rating::kMaxRatingValue);
  EXPECT_EQ(rating::WithinRatingBounds(std::nan("")), 0);
  EXPECT_EQ(rating::WithinRatingBounds(1516), 1516);
  v1::PlayerResult player;
  player.set_player_id("p");
  player.set_team(1);
  RatedSeat seat;
  seat.player = &player;
  seat.rank = 1;
  seat.result = "win";
  seat.before.value = -1e308;
  seat.after.value = 3e9;
  const std::string json = EventPlayersJson({&seat}, /*integer_elo=*/true);
  EXPECT_NE(json.find("\"elo_after\": 2147483647"), std::string::npos) << json;
  EXPECT_NE(json.find("\"elo_before\": -2147483648"), std::string::npos) << json;
}

}  // namespace
}  // namespace verdict::lobby
