// The lobby's request handling (SettlementService) through its one entry, Handle(), on the fake
// store (tests/support/fake_store.h): every refusal and status of allocation, settlement (single
// and batch), release, abort, rating import, mode declaration and the leaderboard, and every
// store call failing. A test of a call's statuses takes the production answer table
// (lobby/answers.h), makes the fake answer each status in turn and checks the reply against the
// table, so a status without its answer fails here. No database and no waiting: the fake answers
// at once and the settlements run on the calling thread, so every request is answered before
// Handle returns.
#include "lobby/settlement_service.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lobby/answers.h"
#include "lobby/pg_statuses.h"
#include "proto/wire.h"
#include "tests/support/fake_store.h"
#include "tests/support/results.h"

namespace verdict::lobby {
namespace {

using verdict::testing::FakeStore;
using verdict::testing::MakeAllocation;
using verdict::testing::ResultOf;
using Call = FakeStore::Call;

constexpr char kAdminToken[] = "admin-token";
constexpr char kNodeA[] = "node-a";
constexpr char kNodeAToken[] = "node-a-token";
constexpr char kNodeB[] = "node-b";
constexpr char kNodeBToken[] = "node-b-token";
// Not the default, so that a reply that ignores the option shows.
constexpr int kRetryAfterS = 7;

std::string Json(const google::protobuf::Message& message) {
  return wire::EncodeBody(message, wire::BodyFormat::kJson).value();
}

template <typename M>
M BodyOf(const HttpReply& reply) {
  M message;
  const Status decoded = wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &message);
  EXPECT_TRUE(decoded.ok()) << decoded.ToString() << ": " << reply.body;
  return message;
}

std::optional<std::string> RetryAfterOf(const HttpReply& reply) {
  for (const auto& [name, value] : reply.headers) {
    if (name == "Retry-After") return value;
  }
  return std::nullopt;
}

// The fields of a problem a client acts on, whole: its HTTP status, code and detail, and the
// Retry-After of one it may retry.
struct Refusal {
  int status = 0;
  std::string code;
  std::string detail;
  std::optional<std::string> retry_after;
  bool operator==(const Refusal&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Refusal& r) {
  return out << r.status << " " << r.code << " \"" << r.detail << "\" Retry-After "
             << r.retry_after.value_or("none");
}

Refusal RefusalIn(const HttpReply& reply) {
  const auto problem = BodyOf<v1::ProblemDetails>(reply);
  EXPECT_EQ(problem.status(), static_cast<uint32_t>(reply.status)) << reply.body;
  return {reply.status, problem.code(), problem.detail(), RetryAfterOf(reply)};
}

// The refusal `code` with `detail` is, as the service sends it.
Refusal Expected(ErrorCode code, const std::string& detail) {
  const server::ErrorInfo& info = InfoOf(code);
  return {info.http_status, info.code, detail,
          info.retryable ? std::optional<std::string>(std::to_string(kRetryAfterS)) : std::nullopt};
}

// The refusal `answer` says, its detail filled from `fields`.
Refusal Expected(const Answer& answer, const AnswerFields& fields) {
  return Expected(answer.problem, FillDetail(answer.detail, fields));
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() : service_(ServiceStores::Of(store_), nullptr, Options(), registry_) {}

  ServiceOptions Options() {
    ServiceOptions options;
    options.node_tokens = {{kNodeA, kNodeAToken}, {kNodeB, kNodeBToken}};
    options.admin_token = kAdminToken;
    options.retry_after_s = kRetryAfterS;
    options.settlement.clock = &store_.clock();
    return options;
  }

  // The reply to one request, which is sent before Handle returns.
  HttpReply Send(const std::string& method, const std::string& target, const std::string& token,
                 std::string body = "", std::string content_type = "application/json") {
    std::optional<HttpReply> reply;
    service_.Handle(HttpRequest{method, target, std::move(content_type), "application/json",
                                "Bearer " + token, std::move(body)},
                    nullptr, [&](HttpReply r) { reply = std::move(r); });
    EXPECT_TRUE(reply.has_value()) << method << " " << target << " was not answered";
    return reply.value_or(HttpReply{0, "", "", {}});
  }

  HttpReply Allocate(const v1::RoomAllocation& allocation, const std::string& token = kAdminToken) {
    return Send("POST", "/v1/rooms", token, Json(allocation));
  }
  HttpReply Settle(const v1::BattleResult& result, const std::string& token = kNodeAToken) {
    return Send("POST", wire::kSettlementsPath, token, Json(result));
  }
  HttpReply SettleBatch(const std::vector<v1::BattleResult>& results,
                        const std::string& token = kNodeAToken) {
    v1::SettlementBatch batch;
    for (const v1::BattleResult& r : results) *batch.add_results() = r;
    return Send("POST", wire::kSettlementsBatchPath, token, Json(batch));
  }
  HttpReply Receipt(uint64_t room, const std::string& token = kNodeAToken) {
    return Send("GET", "/v1/settlements/" + std::to_string(room), token);
  }
  HttpReply Release(uint64_t room, const std::string& token = kAdminToken) {
    return Send("POST", "/v1/rooms/" + std::to_string(room) + ":release", token);
  }
  HttpReply Abort(uint64_t room, const std::string& reason = "the host crashed",
                  const std::string& token = kAdminToken) {
    v1::RoomAbort abort;
    abort.set_reason(reason);
    return Send("POST", "/v1/rooms/" + std::to_string(room) + ":abort", token, Json(abort));
  }
  HttpReply Import(const std::string& player, const std::string& mode, double rating,
                   const std::string& token = kAdminToken) {
    v1::RatingImport import;
    import.set_rating(rating);
    return Send("PUT", "/v1/players/" + player + "/ratings/" + mode, token, Json(import));
  }
  HttpReply Declare(const std::string& mode, double k, const std::string& token = kAdminToken) {
    return Send("PUT", "/v1/modes/" + mode, token, Json(EloMode(k)));
  }
  static v1::Mode EloMode(double k) {
    v1::Mode mode;
    mode.mutable_rating()->set_system("elo");
    (*mode.mutable_rating()->mutable_parameters())["k"] = k;
    return mode;
  }

  // A room of node-a with four players of its own, allocated; its SETTLED result, team 1
  // winning.
  v1::BattleResult AllocatedRoom() {
    const uint64_t room = ++last_room_;
    const v1::RoomAllocation allocation = MakeAllocation(room, kNodeA, room * 10, 4);
    EXPECT_EQ(Allocate(allocation).status, 201) << "room " << room;
    return ResultOf(allocation, 1);
  }
  // The reply `send` gets while the store answers `status`.
  template <typename E>
  HttpReply Forcing(E status, const std::function<HttpReply()>& send) {
    store_.Force(status);
    HttpReply reply = send();
    store_.Unforce();
    return reply;
  }
  // A room id not used before.
  uint64_t NewRoom() { return ++last_room_; }

  // The count of `name` with `label`="`value`" in the service's metrics.
  uint64_t Counted(const std::string& name, const std::string& label, std::string_view value) {
    const std::string text = registry_.RenderText();
    const std::string line = name + "{" + label + "=\"" + std::string(value) + "\"} ";
    const size_t at = text.find(line);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + line.size()));
  }

  FakeStore store_;
  metrics::Registry registry_;
  SettlementService service_;
  uint64_t last_room_ = 1000;
};

// ---- The tables

// Every status the store answers has exactly one answer: those of the SQL (pg_statuses_test holds
// each table equal to what its function returns), and kSettled, which the commit makes.
template <typename E, size_t N, size_t M>
void ExpectOneAnswerEach(const SqlStatus<E> (&statuses)[N], const StatusAnswer<E> (&answers)[M]) {
  EXPECT_EQ(N, M) << "a table of answers holds a status the store never answers, or lacks one";
  for (const SqlStatus<E>& status : statuses) {
    int found = 0;
    for (const StatusAnswer<E>& answer : answers) found += answer.status == status.status;
    EXPECT_EQ(found, 1) << status.name;
  }
}

TEST(AnswerTablesTest, EveryStatusTheStoreAnswersHasOneAnswer) {
  ExpectOneAnswerEach(kAllocateStatuses, kAllocationAnswers);
  ExpectOneAnswerEach(kSettleStatuses, kSettlementAnswers);
  ExpectOneAnswerEach(kReleaseStatuses, kReleaseAnswers);
  ExpectOneAnswerEach(kDeclareStatuses, kDeclareAnswers);
  ExpectOneAnswerEach(kImportStatuses, kImportAnswers);
}

// Each answer is a success with its HTTP status, or a refusal whose detail names only fields
// there are.
template <typename E, size_t N>
void ExpectWellFormed(const StatusAnswer<E> (&answers)[N]) {
  const AnswerFields all{"1", "p", "m", "SETTLED", "why"};
  for (const StatusAnswer<E>& entry : answers) {
    const Answer& a = entry.answer;
    SCOPED_TRACE(static_cast<int>(entry.status));
    if (a.success) {
      EXPECT_TRUE(a.success >= 200 && a.success < 300) << a.success;
      EXPECT_TRUE(a.detail.empty());
      continue;
    }
    EXPECT_FALSE(a.detail.empty());
    EXPECT_EQ(FillDetail(a.detail, all).find_first_of("{}"), std::string::npos) << a.detail;
  }
}

TEST(AnswerTablesTest, EachAnswerIsASuccessOrARefusalOfKnownFields) {
  ExpectWellFormed(kAllocationAnswers);
  ExpectWellFormed(kSettlementAnswers);
  ExpectWellFormed(kReleaseAnswers);
  ExpectWellFormed(kDeclareAnswers);
  ExpectWellFormed(kImportAnswers);
  ExpectWellFormed(kVoidAnswers);
}

TEST(AnswerTablesTest, FillDetailPutsEachFieldInPlaceOfItsName) {
  const AnswerFields fields{.room = "7", .player = "p{1}", .detail = "no"};
  EXPECT_EQ(FillDetail("room {room}: {player} says {detail}", fields), "room 7: p{1} says no");
  EXPECT_EQ(FillDetail("{mode}", fields), "");
  EXPECT_EQ(FillDetail("{nope} and {room", fields), "{nope} and {room");
  EXPECT_EQ(FillDetail("", fields), "");
}

// Every settlement reply, single, batch item or abort, is made by RefusalOf from the table.
TEST(AnswerTablesTest, RefusalOfIsTheSettlementTables) {
  for (const auto& [status, answer] : kSettlementAnswers) {
    SettleOutcome outcome;
    outcome.status = status;
    outcome.receipt.set_outcome(v1::ABORTED);
    const auto refusal = RefusalOf(outcome);
    ASSERT_EQ(refusal.has_value(), answer.success == 0) << static_cast<int>(status);
    if (!refusal) continue;
    EXPECT_EQ(refusal->code, answer.problem);
    EXPECT_EQ(refusal->detail, FillDetail(answer.detail, {.outcome = "ABORTED"}));
  }
}

// ---- Allocation: POST /v1/rooms

TEST_F(ServiceTest, AllocationAnswersEachStatusAsItsTableSays) {
  for (const auto& [status, answer] : kAllocationAnswers) {
    SCOPED_TRACE(static_cast<int>(status));
    const v1::RoomAllocation allocation = MakeAllocation(NewRoom(), kNodeA, last_room_ * 10, 4);
    const uint64_t counted = Counted("verdict_lobby_allocations_total", "code", LabelOf(answer));
    const HttpReply reply = Forcing(status, [&] { return Allocate(allocation); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    EXPECT_EQ(Counted("verdict_lobby_allocations_total", "code", LabelOf(answer)), counted + 1);
    if (answer.success) {
      const auto allocated = BodyOf<v1::RoomAllocation>(reply);
      EXPECT_EQ(allocated.room_id(), allocation.room_id());
      EXPECT_EQ(allocated.mode(), "default") << "answered without the mode it is played in";
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.room = std::to_string(allocation.room_id()),
                                                  .player = allocation.seats(0).player_id(),
                                                  .detail = FakeStore::kForcedDetail}));
  }
}

// The statuses as the store comes to them, in the SQL's order.
TEST_F(ServiceTest, AllocationOfRoomsAndTheirPlayers) {
  const v1::RoomAllocation first = MakeAllocation(1, kNodeA, 11, 4);
  EXPECT_EQ(Allocate(first).status, 201);
  EXPECT_EQ(Allocate(first).status, 200) << "the same allocation again is a duplicate";

  v1::RoomAllocation other_node = first;
  other_node.set_node_id(kNodeB);
  EXPECT_EQ(RefusalIn(Allocate(other_node)),
            Expected(ErrorCode::kRoomExists,
                     "room 1 is already allocated differently; room ids are never reused"));

  const v1::RoomAllocation sharing = MakeAllocation(2, kNodeA, 13, 4);
  EXPECT_EQ(RefusalIn(Allocate(sharing)),
            Expected(ErrorCode::kPlayerBusy, "player 13 is already in another battle"));

  v1::RoomAllocation undeclared = MakeAllocation(3, kNodeA, 31, 4);
  undeclared.set_mode("ranked");
  EXPECT_EQ(RefusalIn(Allocate(undeclared)),
            Expected(ErrorCode::kInvalidArgument, "mode: mode ranked is not declared"));

  v1::Mode duel;
  duel.mutable_rating()->set_system("elo");
  duel.mutable_shape()->set_max_team_size(1);
  ASSERT_EQ(Send("PUT", "/v1/modes/duel", kAdminToken, Json(duel)).status, 201);
  v1::RoomAllocation crowd = MakeAllocation(4, kNodeA, 41, 4);
  crowd.set_mode("duel");
  EXPECT_EQ(RefusalIn(Allocate(crowd)),
            Expected(ErrorCode::kInvalidArgument,
                     "seats: mode duel accepts 2 to 100 teams of 1 to 1 players; this room has 2 "
                     "teams of 2 to 2"));

  ASSERT_EQ(Settle(ResultOf(first, 1)).status, 200);
  EXPECT_EQ(
      RefusalIn(Allocate(first)),
      Expected(ErrorCode::kRoomIdReused, "room 1 was settled before; room ids are never reused"));
  EXPECT_EQ(Allocate(sharing).status, 201) << "the settlement freed its players";
}

TEST_F(ServiceTest, AllocationRefusedBeforeTheStore) {
  const v1::RoomAllocation allocation = MakeAllocation(5, kNodeA, 51, 4);
  EXPECT_EQ(RefusalIn(Allocate(allocation, kNodeAToken)),
            Expected(ErrorCode::kUnauthenticated, "allocating rooms needs the admin token"));
  EXPECT_EQ(RefusalIn(Allocate(allocation, "no-such-token")),
            Expected(ErrorCode::kUnauthenticated,
                     "a valid bearer token is required (Authorization: Bearer TOKEN)"));
  EXPECT_EQ(RefusalIn(Send("POST", "/v1/rooms", kAdminToken, Json(allocation), "text/plain")),
            Expected(ErrorCode::kUnsupportedMediaType,
                     "send application/x-protobuf or application/json"));
  EXPECT_EQ(RefusalIn(Send("POST", "/v1/rooms", kAdminToken, "{")).code, "INVALID_ARGUMENT");
  v1::RoomAllocation empty = allocation;
  empty.clear_seats();
  EXPECT_EQ(RefusalIn(Allocate(empty)).code, "INVALID_ARGUMENT");
  v1::RoomAllocation stranger = allocation;
  stranger.set_node_id("node-z");
  EXPECT_EQ(RefusalIn(Allocate(stranger)),
            Expected(ErrorCode::kInvalidArgument, "node node-z has no token on this lobby"));
  EXPECT_FALSE(store_.GetRoom(5).value().has_value()) << "a refused allocation reached the store";
}

// ---- Settlement: POST /v1/settlements and :batch

// A forced busy is answered only to a transaction of several rooms, which does not wait for
// locks: the rooms are then settled each on its own, waiting (SettlementSchedulerTest), so a
// busy room never reaches a reply; RefusalOfIsTheSettlementTables covers its answer.
TEST_F(ServiceTest, SettlementAnswersEachStatusAsItsTableSays) {
  for (const auto& [status, answer] : kSettlementAnswers) {
    if (status == SettleStatus::kBusy) continue;
    SCOPED_TRACE(static_cast<int>(status));
    const v1::BattleResult result = AllocatedRoom();
    const uint64_t counted = Counted("verdict_lobby_settlements_total", "code", LabelOf(answer));
    const HttpReply reply = Forcing(status, [&] { return Settle(result); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    EXPECT_EQ(Counted("verdict_lobby_settlements_total", "code", LabelOf(answer)), counted + 1);
    if (answer.success) {
      const auto receipt = BodyOf<v1::SettlementReceipt>(reply);
      EXPECT_EQ(receipt.room_id(), result.room_id());
      EXPECT_EQ(receipt.duplicate(), status == SettleStatus::kDuplicate);
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.outcome = "ABORTED"}));
  }
}

TEST_F(ServiceTest, BatchItemsAnswerEachStatusAsTheTableSays) {
  for (const auto& [status, answer] : kSettlementAnswers) {
    if (status == SettleStatus::kBusy) continue;
    SCOPED_TRACE(static_cast<int>(status));
    const v1::BattleResult result = AllocatedRoom();
    const HttpReply reply = Forcing(status, [&] { return SettleBatch({result}); });
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto items = BodyOf<v1::SettlementBatchReply>(reply);
    ASSERT_EQ(items.items_size(), 1);
    const v1::SettlementItem& item = items.items(0);
    if (answer.success) {
      EXPECT_EQ(item.receipt().room_id(), result.room_id());
      continue;
    }
    EXPECT_EQ(item.problem().code(), InfoOf(answer.problem).code);
    EXPECT_EQ(item.problem().status(), static_cast<uint32_t>(HttpStatusOf(answer)));
    EXPECT_EQ(item.problem().retryable(), InfoOf(answer.problem).retryable);
    EXPECT_EQ(item.problem().detail(), FillDetail(answer.detail, {.outcome = "ABORTED"}));
  }
}

TEST_F(ServiceTest, BusyRoomsOfABatchAreSettledEachOnItsOwn) {
  const v1::BattleResult first = AllocatedRoom();
  const v1::BattleResult second = AllocatedRoom();
  store_.Force(SettleStatus::kBusy);
  const HttpReply reply = SettleBatch({first, second});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto items = BodyOf<v1::SettlementBatchReply>(reply);
  ASSERT_EQ(items.items_size(), 2);
  EXPECT_EQ(items.items(0).receipt().room_id(), first.room_id());
  EXPECT_EQ(items.items(1).receipt().room_id(), second.room_id());
  EXPECT_EQ(store_.settle_calls(), 3) << "the batch, then each room alone";
}

// What the fake does as the SQL does, through the service: each status as it comes.
TEST_F(ServiceTest, SettlementOfARoomAndItsRepeats) {
  const v1::BattleResult result = AllocatedRoom();
  const uint64_t room = result.room_id();
  const HttpReply settled = Settle(result);
  ASSERT_EQ(settled.status, 200) << settled.body;
  const auto receipt = BodyOf<v1::SettlementReceipt>(settled);
  EXPECT_FALSE(receipt.duplicate());

  const HttpReply again = Settle(result);
  ASSERT_EQ(again.status, 200);
  EXPECT_TRUE(BodyOf<v1::SettlementReceipt>(again).duplicate());
  EXPECT_EQ(BodyOf<v1::SettlementReceipt>(again).match_id(), receipt.match_id());

  v1::BattleResult aborted = result;
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  aborted.set_abort_reason("lost");
  EXPECT_EQ(
      RefusalIn(Settle(aborted)),
      Expected(ErrorCode::kOutcomeConflict, "the room was already settled with outcome SETTLED"));
  v1::BattleResult later = result;
  later.set_ended_at_ms(result.ended_at_ms() + 1);
  EXPECT_EQ(RefusalIn(Settle(later)),
            Expected(ErrorCode::kIdempotencyMismatch,
                     "the room was already settled with a different payload"));
  v1::BattleResult of_b = result;
  of_b.set_node_id(kNodeB);
  EXPECT_EQ(RefusalIn(Settle(of_b, kNodeBToken)),
            Expected(ErrorCode::kRoomUnknown, "the room is not allocated to this node"));

  EXPECT_TRUE(BodyOf<v1::SettlementReceipt>(Receipt(room)).duplicate());
  store_.Expire(room);
  const std::string expired(kOriginalExpiredDetail);
  EXPECT_EQ(RefusalIn(Settle(result)), Expected(ErrorCode::kOriginalExpired, expired));
  EXPECT_EQ(RefusalIn(Receipt(room)), Expected(ErrorCode::kOriginalExpired, expired));
  EXPECT_EQ(RefusalIn(Receipt(room, kNodeBToken)),
            Expected(ErrorCode::kRoomUnknown, "no settlement of this room is visible to you"));

  v1::BattleResult swapped = AllocatedRoom();
  swapped.mutable_players(0)->set_team(2);
  swapped.mutable_players(3)->set_team(1);
  EXPECT_EQ(RefusalIn(Settle(swapped)),
            Expected(ErrorCode::kRosterMismatch,
                     "the players and teams differ from the room's allocated roster"));
  v1::BattleResult never = result;
  never.set_room_id(NewRoom());
  EXPECT_EQ(RefusalIn(Settle(never)).code, "ROOM_UNKNOWN");
}

TEST_F(ServiceTest, SettlementRefusedBeforeTheStore) {
  const v1::BattleResult result = AllocatedRoom();
  const std::string settle = wire::kSettlementsPath;
  EXPECT_EQ(RefusalIn(Settle(result, kAdminToken)),
            Expected(ErrorCode::kUnauthenticated, "settling needs a node token"));
  EXPECT_EQ(RefusalIn(Send("POST", settle, kNodeAToken, Json(result), "text/csv")),
            Expected(ErrorCode::kUnsupportedMediaType,
                     "send application/x-protobuf or application/json"));
  EXPECT_EQ(RefusalIn(Send("POST", settle, kNodeAToken, "[1]")).code, "INVALID_ARGUMENT");
  v1::BattleResult empty = result;
  empty.clear_players();
  EXPECT_EQ(RefusalIn(Settle(empty)).code, "INVALID_ARGUMENT");
  EXPECT_EQ(RefusalIn(Settle(result, kNodeBToken)),
            Expected(ErrorCode::kInvalidArgument,
                     "node_id in the body is not the node the token belongs to"));
  EXPECT_EQ(RefusalIn(Send("GET", settle, kNodeAToken)).code, "METHOD_NOT_ALLOWED");

  const std::string batch = wire::kSettlementsBatchPath;
  EXPECT_EQ(RefusalIn(SettleBatch({result}, kAdminToken)),
            Expected(ErrorCode::kUnauthenticated, "settling needs a node token"));
  EXPECT_EQ(RefusalIn(Send("POST", batch, kNodeAToken, "", "text/csv")).code,
            "UNSUPPORTED_MEDIA_TYPE");
  EXPECT_EQ(RefusalIn(Send("POST", batch, kNodeAToken, "{")).code, "INVALID_ARGUMENT");
  EXPECT_EQ(store_.settle_calls(), 0);
}

// Items refused before the store are refused on their own; the rest settle.
TEST_F(ServiceTest, BatchItemsRefusedBeforeTheStore) {
  const v1::BattleResult result = AllocatedRoom();
  v1::BattleResult empty = AllocatedRoom();
  empty.clear_players();
  const HttpReply reply = SettleBatch({result, result, empty});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto items = BodyOf<v1::SettlementBatchReply>(reply);
  ASSERT_EQ(items.items_size(), 3);
  EXPECT_EQ(items.items(0).receipt().room_id(), result.room_id());
  EXPECT_EQ(items.items(1).problem().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(items.items(1).problem().detail(),
            "room " + std::to_string(result.room_id()) + " appears earlier in this batch");
  EXPECT_EQ(items.items(2).problem().code(), "INVALID_ARGUMENT");

  const HttpReply none = SettleBatch({empty});
  ASSERT_EQ(none.status, 200) << "nothing reached the store, so nothing was unavailable";
  EXPECT_EQ(BodyOf<v1::SettlementBatchReply>(none).items(0).problem().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(SettleBatch({}).status, 200);
  EXPECT_EQ(store_.settle_calls(), 1);
}

// A batch every item of which the store could not answer now is answered as a single settlement
// would be: 503, retry it all. One item answered is enough for a 200 with each item's answer.
TEST_F(ServiceTest, ABatchIsUnavailableWhenEveryItemThatReachedTheStoreIs) {
  const v1::BattleResult first = AllocatedRoom();
  const v1::BattleResult second = AllocatedRoom();
  v1::BattleResult invalid = AllocatedRoom();
  invalid.clear_players();
  store_.Fail(Call::kSettleBattles, UnavailableError("the database is away"));
  EXPECT_EQ(RefusalIn(SettleBatch({first, second, invalid})),
            Expected(ErrorCode::kUnavailable, "the database cannot settle now"));
  store_.Fail(Call::kSettleBattles, Status::Ok());

  store_.FailRoom(first.room_id(), UnavailableError("no receipt after an unknown commit"));
  const HttpReply some = SettleBatch({first, second});
  ASSERT_EQ(some.status, 200) << some.body;
  const auto items = BodyOf<v1::SettlementBatchReply>(some);
  EXPECT_EQ(items.items(0).problem().code(), "UNAVAILABLE");
  EXPECT_TRUE(items.items(0).problem().retryable());
  EXPECT_EQ(items.items(1).receipt().room_id(), second.room_id());
  store_.FailRoom(first.room_id(), Status::Ok());

  // A failure a retry would meet again is each item's own answer, never the whole batch's.
  store_.Fail(Call::kSettleBattles, InternalError("a check violation"));
  const HttpReply refused = SettleBatch({first});
  ASSERT_EQ(refused.status, 200) << refused.body;
  EXPECT_EQ(BodyOf<v1::SettlementBatchReply>(refused).items(0).problem().code(), "INTERNAL");
}

// ---- Release and abort: POST /v1/rooms/{room_id}:release and :abort

TEST_F(ServiceTest, ReleaseAnswersEachStatusAsItsTableSays) {
  for (const auto& [status, answer] : kReleaseAnswers) {
    SCOPED_TRACE(static_cast<int>(status));
    const uint64_t room = AllocatedRoom().room_id();
    const uint64_t counted = Counted("verdict_lobby_room_actions_total", "action", "release");
    const HttpReply reply = Forcing(status, [&] { return Release(room); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    EXPECT_EQ(Counted("verdict_lobby_room_actions_total", "action", "release"),
              counted + (answer.success ? 1 : 0));
    if (answer.success) {
      EXPECT_EQ(BodyOf<v1::RoomRelease>(reply).room_id(), room);
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {}));
  }
}

// POST /v1/matches/{match_id}:void answers each status of the store by kVoidAnswers, names the
// match in its detail, and counts each answer; what it does to ratings is void_test's.
TEST_F(ServiceTest, VoidAnswersEachStatusAsItsTableSays) {
  const std::string body = R"({"reason": "a cheater", "policy": "compensate"})";
  for (const auto& [status, answer] : kVoidAnswers) {
    SCOPED_TRACE(static_cast<int>(status));
    const uint64_t counted = Counted("verdict_lobby_voids_total", "code", LabelOf(answer));
    const HttpReply reply =
        Forcing(status, [&] { return Send("POST", "/v1/matches/7:void", kAdminToken, body); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer)) << reply.body;
    EXPECT_EQ(Counted("verdict_lobby_voids_total", "code", LabelOf(answer)), counted + 1);
    if (answer.success) {
      const auto voided = BodyOf<v1::MatchVoid>(reply);
      EXPECT_EQ(voided.match_id(), 7u);
      EXPECT_EQ(voided.policy(), "compensate");
      EXPECT_EQ(voided.duplicate(), status == VoidStatus::kDuplicate);
      continue;
    }
    if (status == VoidStatus::kTooLarge) {
      EXPECT_EQ(RefusalIn(reply),
                Expected(answer.problem,
                         "a replay of match 7 would rate again more than 1000 later matches, over "
                         "the limit of 1000 (--void-replay-limit); void it with \"compensate\", "
                         "or raise the limit"));
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.detail = "match 7"}));
  }
}

TEST_F(ServiceTest, AVoidNeedsTheAdminTokenAPolicyAndAReason) {
  EXPECT_EQ(RefusalIn(Send("POST", "/v1/matches/7:void", kNodeAToken,
                           R"({"reason": "a cheater", "policy": "replay"})")),
            Expected(ErrorCode::kUnauthenticated, "a void needs the admin token"));
  EXPECT_EQ(RefusalIn(Send("POST", "/v1/rooms/7:void", kAdminToken,
                           R"({"reason": "a cheater", "policy": "rewind"})")),
            Expected(ErrorCode::kInvalidArgument,
                     "policy must be \"replay\" (as if the match had never been played) or "
                     "\"compensate\" (each player's change inverted)"));
  EXPECT_EQ(RefusalIn(Send("POST", "/v1/matches/7:void", kAdminToken, R"({"policy": "replay"})")),
            Expected(ErrorCode::kInvalidArgument, "reason is required"));
  EXPECT_EQ(Send("POST", "/v1/matches/7:undo", kAdminToken, "{}").status, 404);
  EXPECT_EQ(Send("POST", "/v1/matches/x:void", kAdminToken, "{}").status, 400);
}

TEST_F(ServiceTest, ReleaseFreesThePlayersOnceAndTheRoomStillSettles) {
  const v1::BattleResult result = AllocatedRoom();
  const uint64_t room = result.room_id();
  EXPECT_EQ(RefusalIn(Release(room, kNodeAToken)),
            Expected(ErrorCode::kUnauthenticated, "release needs the admin token"));
  const auto first = BodyOf<v1::RoomRelease>(Release(room));
  EXPECT_EQ(first.players_released(), 4u);
  EXPECT_EQ(first.released_at_ms(), store_.clock().NowMs());
  store_.clock().AdvanceMs(5000);
  const auto second = BodyOf<v1::RoomRelease>(Release(room));
  EXPECT_EQ(second.players_released(), 0u);
  EXPECT_EQ(second.released_at_ms(), first.released_at_ms());

  v1::RoomAllocation next = MakeAllocation(NewRoom(), kNodeA, room * 10, 4);
  EXPECT_EQ(Allocate(next).status, 201) << "the released room still held its players";
  EXPECT_EQ(Settle(result).status, 200);
  EXPECT_EQ(RefusalIn(Release(room)),
            Expected(ErrorCode::kRoomUnknown, "the room is not allocated"));
}

TEST_F(ServiceTest, AbortOfAnAllocatedRoomAnswersEachSettlementStatusAsTheTableSays) {
  for (const auto& [status, answer] : kSettlementAnswers) {
    if (status == SettleStatus::kBusy) continue;
    SCOPED_TRACE(static_cast<int>(status));
    const uint64_t room = AllocatedRoom().room_id();
    const HttpReply reply = Forcing(status, [&] { return Abort(room); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    if (answer.success) {
      EXPECT_EQ(BodyOf<v1::SettlementReceipt>(reply).room_id(), room);
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.outcome = "SETTLED"}));
  }
}

TEST_F(ServiceTest, AbortOfARoomInEachState) {
  const v1::BattleResult result = AllocatedRoom();
  const uint64_t room = result.room_id();
  const std::string path = "/v1/rooms/" + std::to_string(room) + ":abort";
  EXPECT_EQ(RefusalIn(Abort(room, "why", kNodeAToken)),
            Expected(ErrorCode::kUnauthenticated, "abort needs the admin token"));
  EXPECT_EQ(RefusalIn(Send("POST", path, kAdminToken, "reason", "text/plain")).code,
            "UNSUPPORTED_MEDIA_TYPE");
  EXPECT_EQ(RefusalIn(Send("POST", path, kAdminToken, "{")).code, "INVALID_ARGUMENT");
  EXPECT_EQ(RefusalIn(Abort(room, "")),
            Expected(ErrorCode::kInvalidArgument, "reason is required"));

  const uint64_t aborts = Counted("verdict_lobby_room_actions_total", "action", "abort");
  const HttpReply aborted = Abort(room);
  ASSERT_EQ(aborted.status, 200) << aborted.body;
  EXPECT_EQ(BodyOf<v1::SettlementReceipt>(aborted).outcome(), v1::ABORTED);
  EXPECT_EQ(Counted("verdict_lobby_room_actions_total", "action", "abort"), aborts + 1);
  const HttpReply again = Abort(room, "another reason");
  ASSERT_EQ(again.status, 200) << "an aborted room is aborted, whatever the reason";
  EXPECT_TRUE(BodyOf<v1::SettlementReceipt>(again).duplicate());
  EXPECT_EQ(
      RefusalIn(Settle(result)),
      Expected(ErrorCode::kOutcomeConflict, "the room was already settled with outcome ABORTED"));

  const v1::BattleResult played = AllocatedRoom();
  ASSERT_EQ(Settle(played).status, 200);
  EXPECT_EQ(
      RefusalIn(Abort(played.room_id())),
      Expected(ErrorCode::kOutcomeConflict, "the room was already settled with outcome SETTLED"));
  store_.Expire(played.room_id());
  EXPECT_EQ(RefusalIn(Abort(played.room_id())),
            Expected(ErrorCode::kOriginalExpired,
                     "the room was settled, and its receipt is past retention"));
  EXPECT_EQ(RefusalIn(Abort(NewRoom())),
            Expected(ErrorCode::kRoomUnknown, "the room is not allocated"));
}

// ---- Players, modes and ladders

TEST_F(ServiceTest, ImportAnswersEachStatusAsItsTableSays) {
  for (const auto& [status, answer] : kImportAnswers) {
    SCOPED_TRACE(static_cast<int>(status));
    const HttpReply reply = Forcing(status, [&] { return Import("p1", "default", 1600); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    if (answer.success) {
      EXPECT_EQ(BodyOf<v1::ModeRating>(reply).rating(), 1600);
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.player = "p1", .mode = "default"}));
  }
}

TEST_F(ServiceTest, ImportOfARatingBetweenRooms) {
  EXPECT_EQ(RefusalIn(Import("p1", "default", 1600, kNodeAToken)),
            Expected(ErrorCode::kUnauthenticated, "importing a rating needs the admin token"));
  EXPECT_EQ(
      RefusalIn(Send("PUT", "/v1/players/p1/ratings/default", kAdminToken, "", "text/x")).code,
      "UNSUPPORTED_MEDIA_TYPE");
  EXPECT_EQ(RefusalIn(Import("p1", "ranked", 1600)),
            Expected(ErrorCode::kNotFound, "mode ranked is not declared"));
  EXPECT_EQ(RefusalIn(Import("p1", "default", 1600.5)),
            Expected(ErrorCode::kInvalidArgument,
                     "value: an elo rating is a whole number (a elo rating)"));

  const v1::BattleResult result = AllocatedRoom();
  const std::string seated = result.players(0).player_id();
  EXPECT_EQ(RefusalIn(Import(seated, "default", 1600)).code, "PLAYER_BUSY");
  ASSERT_EQ(Settle(result).status, 200);
  ASSERT_EQ(Import(seated, "default", 1600).status, 200);
  const auto player = BodyOf<v1::Player>(Send("GET", "/v1/players/" + seated, kNodeAToken));
  ASSERT_EQ(player.ratings_size(), 1);
  EXPECT_EQ(player.ratings(0).rating(), 1600);
  EXPECT_EQ(RefusalIn(Send("GET", "/v1/players/nobody", kNodeAToken)),
            Expected(ErrorCode::kNotFound, "no such player"));
}

TEST_F(ServiceTest, DeclarationAnswersEachStatusAsItsTableSays) {
  for (const auto& [status, answer] : kDeclareAnswers) {
    SCOPED_TRACE(static_cast<int>(status));
    const HttpReply reply = Forcing(status, [&] { return Declare("ranked", 24); });
    EXPECT_EQ(reply.status, HttpStatusOf(answer));
    if (answer.success) {
      EXPECT_EQ(BodyOf<v1::Mode>(reply).mode(), "ranked");
      continue;
    }
    EXPECT_EQ(RefusalIn(reply), Expected(answer, {.mode = "ranked"}));
  }
}

TEST_F(ServiceTest, DeclarationOfAModeIsFixedOnceInUse) {
  EXPECT_EQ(RefusalIn(Declare("ranked", 24, kNodeAToken)),
            Expected(ErrorCode::kUnauthenticated, "declaring a mode needs the admin token"));
  v1::Mode chess;
  chess.mutable_rating()->set_system("chess");
  EXPECT_EQ(RefusalIn(Send("PUT", "/v1/modes/ranked", kAdminToken, Json(chess))).code,
            "INVALID_ARGUMENT");
  EXPECT_EQ(RefusalIn(Send("GET", "/v1/modes/ranked", kNodeAToken)),
            Expected(ErrorCode::kNotFound, "mode ranked is not declared"));

  EXPECT_EQ(Declare("ranked", 24).status, 201);
  EXPECT_EQ(Declare("ranked", 24).status, 200);
  const HttpReply changed = Declare("ranked", 16);
  ASSERT_EQ(changed.status, 200);
  EXPECT_EQ(BodyOf<v1::Mode>(changed).rating().parameters().at("k"), 16);
  EXPECT_EQ(
      BodyOf<v1::Mode>(Send("GET", "/v1/modes/ranked", kNodeAToken)).rating().parameters().at("k"),
      16);

  v1::RoomAllocation room = MakeAllocation(NewRoom(), kNodeA, last_room_ * 10, 4);
  room.set_mode("ranked");
  ASSERT_EQ(Allocate(room).status, 201);
  EXPECT_EQ(RefusalIn(Declare("ranked", 32)),
            Expected(ErrorCode::kModeInUse,
                     "mode ranked has rooms, so its declaration is fixed: declare a new mode (a "
                     "new season is a new mode)"));
  EXPECT_EQ(Declare("ranked", 16).status, 200) << "the same declaration is no change";
}

TEST_F(ServiceTest, LeaderboardPagesAndItsRefusals) {
  const std::string board = "/v1/modes/default/leaderboard";
  EXPECT_EQ(RefusalIn(Send("GET", "/v1/modes/ranked/leaderboard", kNodeAToken)),
            Expected(ErrorCode::kNotFound, "mode ranked is not declared"));
  for (const char* limit : {"0", "1001", "x", "", "2x"}) {
    EXPECT_EQ(RefusalIn(Send("GET", board + "?limit=" + limit, kNodeAToken)),
              Expected(ErrorCode::kInvalidArgument, "limit must be an integer from 1 to 1000"))
        << limit;
  }
  EXPECT_EQ(RefusalIn(Send("GET", board + "?after=***", kNodeAToken)),
            Expected(ErrorCode::kInvalidArgument,
                     "after must be the `next` of an earlier page of this leaderboard"));

  ASSERT_EQ(Import("p1", "default", 1400).status, 200);
  ASSERT_EQ(Import("p2", "default", 1600).status, 200);
  ASSERT_EQ(Import("p3", "default", 1500).status, 200);
  const auto top = BodyOf<v1::Leaderboard>(Send("GET", board + "?limit=2", kNodeAToken));
  ASSERT_EQ(top.entries_size(), 2);
  EXPECT_EQ(top.entries(0).player_id(), "p2");
  EXPECT_EQ(top.entries(1).player_id(), "p3");
  ASSERT_FALSE(top.next().empty());
  const auto rest =
      BodyOf<v1::Leaderboard>(Send("GET", board + "?limit=2&after=" + top.next(), kNodeAToken));
  ASSERT_EQ(rest.entries_size(), 1);
  EXPECT_EQ(rest.entries(0).player_id(), "p1");
  EXPECT_TRUE(rest.next().empty());
}

// ---- Every store call failing

class StoreFailureTest : public ServiceTest {
 protected:
  // One request of an endpoint that reaches `call`, the store call it fails at.
  struct StoreCall {
    const char* name;
    Call call;
    std::function<HttpReply(StoreFailureTest&)> send;
  };

  std::vector<StoreCall> Calls() {
    return {
        {"allocation", Call::kAllocateRoom,
         [](StoreFailureTest& t) {
           return t.Allocate(MakeAllocation(t.NewRoom(), kNodeA, t.last_room_ * 10, 4));
         }},
        {"settlement", Call::kSettleBattles,
         [](StoreFailureTest& t) { return t.Settle(t.AllocatedRoom()); }},
        {"receipt", Call::kGetReceipt, [](StoreFailureTest& t) { return t.Receipt(t.NewRoom()); }},
        {"receipt past retention", Call::kReceiptExpired,
         [](StoreFailureTest& t) { return t.Receipt(t.NewRoom()); }},
        {"release", Call::kReleaseRoom, [](StoreFailureTest& t) { return t.Release(t.NewRoom()); }},
        {"abort: the room", Call::kGetRoom,
         [](StoreFailureTest& t) { return t.Abort(t.NewRoom()); }},
        {"abort: its receipt", Call::kGetReceipt,
         [](StoreFailureTest& t) { return t.Abort(t.NewRoom()); }},
        {"abort: past retention", Call::kReceiptExpired,
         [](StoreFailureTest& t) { return t.Abort(t.NewRoom()); }},
        {"abort: the settlement", Call::kSettleBattles,
         [](StoreFailureTest& t) { return t.Abort(t.AllocatedRoom().room_id()); }},
        {"player", Call::kGetPlayer,
         [](StoreFailureTest& t) { return t.Send("GET", "/v1/players/p1", kNodeAToken); }},
        {"import: the mode", Call::kGetMode,
         [](StoreFailureTest& t) { return t.Import("p1", "default", 1500); }},
        {"import", Call::kImportRating,
         [](StoreFailureTest& t) { return t.Import("p1", "default", 1500); }},
        {"declaration", Call::kDeclareMode,
         [](StoreFailureTest& t) { return t.Declare("ranked", 24); }},
        {"mode", Call::kGetMode,
         [](StoreFailureTest& t) { return t.Send("GET", "/v1/modes/default", kNodeAToken); }},
        {"leaderboard", Call::kGetLeaderboard,
         [](StoreFailureTest& t) {
           return t.Send("GET", "/v1/modes/default/leaderboard", kNodeAToken);
         }},
    };
  }

  // Each endpoint's reply when `call` fails with `failure`.
  void ExpectEachFailureAnswered(const Status& failure, ErrorCode code) {
    for (const StoreCall& c : Calls()) {
      SCOPED_TRACE(c.name);
      store_.Fail(c.call, failure);
      const HttpReply reply = c.send(*this);
      store_.Fail(c.call, Status::Ok());
      EXPECT_EQ(RefusalIn(reply), Expected(code, failure.message()));
    }
  }
};

TEST_F(StoreFailureTest, EveryStoreCallUnavailableIs503WithRetryAfter) {
  ExpectEachFailureAnswered(UnavailableError("the database is not migrated yet"),
                            ErrorCode::kUnavailable);
}

TEST_F(StoreFailureTest, EveryStoreCallInternalIs500) {
  ExpectEachFailureAnswered(InternalError("a check violation"), ErrorCode::kInternal);
}

}  // namespace
}  // namespace verdict::lobby
