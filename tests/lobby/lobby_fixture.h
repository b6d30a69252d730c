// LobbyFixture: a fresh migrated database and helpers to start verdict-lobby processes on it,
// allocate rooms, post settlements, subscribe to the feed, read problem bodies and look at the
// tables. Used by the lobby's integration tests, which run against a real PostgreSQL.
#pragma once

#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proto/wire.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/results.h"
#include "tests/support/test_database.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::testing {

// Counts that any rejected request must leave exactly as they were.
struct DbSnapshot {
  std::string matches, match_players, receipts, events, replays, rooms, seats, rating_sum,
      games_sum, in_battle;
  bool operator==(const DbSnapshot&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const DbSnapshot& s) {
  return os << "{matches=" << s.matches << " receipts=" << s.receipts << " events=" << s.events
            << " rooms=" << s.rooms << " rating_sum=" << s.rating_sum << " games=" << s.games_sum
            << " in_battle=" << s.in_battle << "}";
}

class LobbyFixture : public ::testing::Test {
 public:
  void SetUp() override {
    VERDICT_NEED_DATABASE();
    db_ = std::make_unique<TestDatabase>();
    const CommandResult migrated = RunCommand({LobbyBinary(), "--db", db_->conninfo(), "migrate"});
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out;
  }

  std::unique_ptr<LobbyProcess> StartLobby(const std::vector<std::string>& args = {},
                                           const std::map<std::string, std::string>& env = {}) {
    auto lobby = LobbyProcess::Start(db_->conninfo(), args, env);
    EXPECT_NE(lobby, nullptr);
    return lobby;
  }

  static std::map<std::string, std::string> JsonHeaders(const std::string& token) {
    return {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + token}};
  }

  // Allocates `room_id` to `node` with the ten players of MakeResult(room_id).
  HttpResponse Allocate(uint16_t port, uint64_t room_id, const std::string& node = "node-a") {
    const v1::RoomAllocation a = MakeAllocation(room_id, node, room_id * 10 + 1, 10);
    return HttpCall(port, "POST", "/v1/rooms", JsonHeaders("admin-token"),
                    wire::EncodeBody(a, wire::BodyFormat::kJson).value());
  }

  // POST /v1/rooms of `a`, as the admin.
  HttpResponse AllocateRoster(uint16_t port, const v1::RoomAllocation& a) {
    return HttpCall(port, "POST", "/v1/rooms", JsonHeaders("admin-token"),
                    wire::EncodeBody(a, wire::BodyFormat::kJson).value());
  }

  // PUT /v1/modes/{mode} of `json`, as the admin.
  HttpResponse PutMode(uint16_t port, const std::string& mode, const std::string& json) {
    return HttpCall(port, "PUT", "/v1/modes/" + mode, JsonHeaders("admin-token"), json);
  }

  // A room of `mode` seating `teams` (team 1 first), for node-a.
  static v1::RoomAllocation Room(uint64_t room, const std::string& mode,
                                 const std::vector<std::vector<std::string>>& teams) {
    v1::RoomAllocation a;
    a.set_room_id(room);
    a.set_node_id("node-a");
    a.set_mode(mode);
    for (size_t t = 0; t < teams.size(); ++t) {
      for (const std::string& player : teams[t]) {
        v1::Seat* seat = a.add_seats();
        seat->set_player_id(player);
        seat->set_team(static_cast<uint32_t>(t + 1));
      }
    }
    return a;
  }

  // `a`'s roster placed by `ranks` (team 1's first).
  static v1::BattleResult Placed(const v1::RoomAllocation& a, const std::vector<uint32_t>& ranks) {
    v1::BattleResult r = ResultOf(a, 0);
    r.clear_winner_team();
    for (size_t t = 0; t < ranks.size(); ++t) {
      v1::TeamPlacement* p = r.add_placements();
      p->set_team(static_cast<uint32_t>(t + 1));
      p->set_rank(ranks[t]);
    }
    return r;
  }

  void MustAllocateRoom(uint16_t port, const v1::RoomAllocation& a) {
    const HttpResponse r = AllocateRoster(port, a);
    ASSERT_EQ(r.status, 201) << r.body;
  }

  void MustAllocate(uint16_t port, uint64_t room_id, const std::string& node = "node-a") {
    const HttpResponse r = Allocate(port, room_id, node);
    ASSERT_EQ(r.status, 201) << r.body << r.error;
  }

  HttpResponse Settle(uint16_t port, const v1::BattleResult& result,
                      const std::string& token = "token-a") {
    return HttpCall(port, "POST", "/v1/settlements", JsonHeaders(token),
                    wire::EncodeBody(result, wire::BodyFormat::kJson).value());
  }

  // Allocates and settles `room` (MakeResult's roster, node a); returns its match id.
  uint64_t AllocateAndSettle(uint16_t port, uint64_t room) {
    MustAllocate(port, room);
    const HttpResponse r = Settle(port, MakeResult(room));
    EXPECT_EQ(r.status, 200) << r.body;
    return Receipt(r).match_id();
  }

  static v1::SettlementReceipt Receipt(const HttpResponse& r) {
    v1::SettlementReceipt receipt;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &receipt, &error))
        << error << " in " << r.body;
    return receipt;
  }

  // GET /v1/events with the headers of a WebSocket upgrade, as a plain HTTP exchange: a refusal
  // is its problem, an accepted one 101.
  HttpResponse Subscribe(uint16_t port, const std::string& query,
                         const std::string& token = "admin-token") {
    return HttpCall(port, "GET", "/v1/events" + query,
                    {{"Authorization", "Bearer " + token},
                     {"Connection", "Upgrade"},
                     {"Upgrade", "websocket"},
                     {"Sec-WebSocket-Version", "13"},
                     {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
                    "", std::chrono::seconds(5));
  }

  std::string Q(const std::string& sql) const { return db_->Scalar(sql); }

  DbSnapshot Snapshot() const {
    return {Q("SELECT count(*) FROM matches"),
            Q("SELECT count(*) FROM match_players"),
            Q("SELECT count(*) FROM settlement_receipts"),
            Q("SELECT count(*) FROM settlement_events"),
            Q("SELECT count(*) FROM replays"),
            Q("SELECT count(*) FROM battle_rooms"),
            Q("SELECT count(*) FROM battle_room_seats"),
            Q("SELECT coalesce(sum(rating), 0) FROM player_ratings"),
            Q("SELECT coalesce(sum(games), 0) FROM player_ratings"),
            Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0")};
  }

  std::unique_ptr<TestDatabase> db_;
};

// A problem body's members.
inline google::protobuf::Struct Problem(const HttpResponse& r) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.body, &parsed).ok()) << r.body;
  return parsed;
}

// A member of a problem body, or of its "feed" object ("feed.epoch").
inline std::string Member(const HttpResponse& r, const std::string& name) {
  google::protobuf::Struct problem = Problem(r);
  std::string key = name;
  if (name.starts_with("feed.")) {
    const auto feed = problem.fields().find("feed");
    if (feed == problem.fields().end()) return "";
    google::protobuf::Struct inner = feed->second.struct_value();
    problem.Swap(&inner);
    key = name.substr(5);
  }
  const auto it = problem.fields().find(key);
  if (it == problem.fields().end()) return "";
  return it->second.has_string_value() ? it->second.string_value()
                                       : std::to_string(it->second.number_value());
}

// POST /v1/settlements:batch of `results` as the node with `token`, in JSON.
inline HttpResponse PostBatch(uint16_t port, const std::vector<v1::BattleResult>& results,
                              const std::string& token = "token-a") {
  v1::SettlementBatch batch;
  for (const auto& r : results) *batch.add_results() = r;
  return HttpCall(port, "POST", "/v1/settlements:batch", LobbyFixture::JsonHeaders(token),
                  wire::EncodeBody(batch, wire::BodyFormat::kJson).value());
}

// The items of a batch reply (JSON).
inline v1::SettlementBatchReply Items(const HttpResponse& r) {
  v1::SettlementBatchReply reply;
  std::string error;
  EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &reply, &error))
      << error << " in " << r.body;
  return reply;
}

// What a batch item says: SETTLED, DUPLICATE or its problem's code.
inline std::string CodeOf(const v1::SettlementItem& item) {
  return item.has_receipt() ? (item.receipt().duplicate() ? "DUPLICATE" : "SETTLED")
                            : item.problem().code();
}

}  // namespace verdict::testing
