// POST /v1/settlements:batch and the coalescing of concurrent single settlements, against a real
// PostgreSQL: each item is what the single endpoint would answer; whole-request errors keep
// their status; overlapping batches on two lobby instances settle each room once and never
// deadlock; concurrent single requests share transactions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <latch>
#include <random>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "lobby/pg/array_literal.h"
#include "lobby/settle_calls.h"
#include "lobby/settled_event.h"
#include "tests/lobby/lobby_fixture.h"

namespace verdict::testing {
namespace {

using BatchSettlementTest = LobbyFixture;

TEST_F(BatchSettlementTest, EachItemIsWhatTheSingleEndpointWouldAnswer) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room : {1, 2, 3, 4, 5, 8, 9}) MustAllocate(lobby->port(), room);
  MustAllocate(lobby->port(), 6, "node-b");
  const HttpResponse earlier = Settle(lobby->port(), MakeResult(5));
  ASSERT_EQ(earlier.status, 200);
  ASSERT_EQ(Settle(lobby->port(), MakeResult(8)).status, 200);
  ASSERT_EQ(Settle(lobby->port(), MakeResult(9)).status, 200);

  v1::BattleResult roster = MakeResult(3);
  roster.mutable_players(0)->set_player_id("999");
  v1::BattleResult invalid = MakeResult(4);
  invalid.mutable_players(0)->set_team(7);
  v1::BattleResult other_outcome = MakeResult(8);
  other_outcome.set_outcome(v1::ABORTED);
  other_outcome.set_winner_team(0);
  v1::BattleResult other_payload = MakeResult(9);
  other_payload.mutable_players(0)->set_kills(99);
  const HttpResponse r = PostBatch(
      lobby->port(), {MakeResult(1), MakeResult(2), MakeResult(2), MakeResult(5), MakeResult(6),
                      MakeResult(7), roster, invalid, other_outcome, other_payload});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  std::vector<std::string> codes;
  for (const auto& item : reply.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"SETTLED", "SETTLED", "INVALID_ARGUMENT", "DUPLICATE",
                                             "ROOM_UNKNOWN", "ROOM_UNKNOWN", "ROSTER_MISMATCH",
                                             "INVALID_ARGUMENT", "OUTCOME_CONFLICT",
                                             "IDEMPOTENCY_MISMATCH"}));
  ASSERT_EQ(reply.items_size(), 10);
  EXPECT_EQ(reply.items(0).receipt().room_id(), 1u);
  EXPECT_EQ(reply.items(3).receipt().match_id(), Receipt(earlier).match_id());
  EXPECT_EQ(reply.items(4).problem().status(), 404u);
  EXPECT_FALSE(reply.items(4).problem().retryable());
  EXPECT_EQ(reply.items(6).problem().status(), 422u);
  // JSON names as pinned by the contract.
  EXPECT_NE(r.body.find("{\"problem\":{\"code\":\"ROOM_UNKNOWN\",\"status\":404"),
            std::string::npos)
      << r.body;

  // Rooms 1 and 2 settled, once each, with the same ratings a single settlement gives.
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "5");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT rating::text, ',' ORDER BY rating::text) "
              "FROM player_ratings WHERE player_id::int BETWEEN 11 AND 30"),
            "1484,1516");
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) IN (1, 2)"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms WHERE room_id IN (3, 4, 6)"), "3")
      << "a refused item was touched";
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events"), "5");

  // The whole batch again: every settled item is now a duplicate with its match.
  const v1::SettlementBatchReply again = Items(PostBatch(lobby->port(), {MakeResult(1)}));
  ASSERT_EQ(again.items_size(), 1);
  EXPECT_TRUE(again.items(0).receipt().duplicate());
  EXPECT_EQ(again.items(0).receipt().match_id(), reply.items(0).receipt().match_id());
}

// Every way a roster can differ from the room's seats is ROSTER_MISMATCH and touches nothing,
// beside a right one that settles, in one call of the settlement's roster check.
// Every field of a result reaches its own column: a settled room and an aborted one, settled in
// one call through the lobby, read back from matches, replays and match_players. Each field holds
// values no other field does, so arguments of one type given in each other's places (kills and
// deaths, say, adjacent integer[] parameters) fail here.
TEST_F(BatchSettlementTest, EveryFieldOfAResultIsStoredInItsOwnColumn) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 41);
  MustAllocate(lobby->port(), 42);
  v1::BattleResult settled = MakeResult(41, 1'700'000'000'041);
  settled.set_winner_team(2);
  settled.set_suspect(true);
  settled.set_replay_path("replays/forty-one.bin");
  std::string expected_players;
  for (int i = 0; i < settled.players_size(); ++i) {
    v1::PlayerResult* p = settled.mutable_players(i);
    p->set_kills(100 + i);
    p->set_deaths(200 + i);
    p->set_assists(300 + i);
    p->set_score(5'000'000'000 + i);  // past 32 bits
    p->set_disconnected(i % 3 == 0);
    expected_players += p->player_id() + ":" + std::to_string(p->team()) + "/" +
                        std::to_string(p->kills()) + "/" + std::to_string(p->deaths()) + "/" +
                        std::to_string(p->assists()) + "/" + std::to_string(p->score()) + "/" +
                        (p->disconnected() ? "t" : "f") + "/" + (p->team() == 2 ? "win" : "loss") +
                        " ";
  }
  v1::BattleResult aborted = MakeResult(42, 1'700'000'000'042);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  aborted.set_replay_path("");
  aborted.set_abort_reason("the host went away");
  const HttpResponse r = PostBatch(lobby->port(), {settled, aborted});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  ASSERT_EQ(reply.items_size(), 2);
  EXPECT_EQ(CodeOf(reply.items(0)), "SETTLED") << r.body;
  EXPECT_EQ(CodeOf(reply.items(1)), "SETTLED") << r.body;

  EXPECT_EQ(Q("SELECT string_agg(format('%s:%s/%s/%s/%s/%s/%s/%s', player_id, team, kills, deaths, "
              "assists, score, disconnected, result), ' ' ORDER BY player_id) || ' ' "
              "FROM match_players mp JOIN matches m USING (match_id) WHERE m.room_id = 41"),
            expected_players);
  EXPECT_EQ(Q("SELECT format('%s/%s/%s/%s/%s/%s', room_id, node_id, outcome, winner_team, "
              "suspect, ended_at_ms) || '/' || abort_reason || '/' || "
              "coalesce((SELECT path FROM replays p WHERE p.match_id = m.match_id), 'none') "
              "FROM matches m ORDER BY room_id LIMIT 1"),
            "41/node-a/SETTLED/2/t/1700000000041//replays/forty-one.bin");
  EXPECT_EQ(Q("SELECT format('%s/%s/%s/%s/%s/%s', room_id, node_id, outcome, winner_team, "
              "suspect, ended_at_ms) || '/' || abort_reason || '/' || "
              "coalesce((SELECT path FROM replays p WHERE p.match_id = m.match_id), 'none') "
              "FROM matches m WHERE room_id = 42"),
            "42/node-a/ABORTED/0/f/1700000000042/the host went away/none");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT result, ',') FROM match_players mp JOIN matches m "
              "USING (match_id) WHERE m.room_id = 42"),
            "aborted");
  // Both events, a suspect win and an abort, are stored as json whose text is what jsonb prints
  // for it, which the feed served before migration 007 stored the text.
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT pg_typeof(payload)::text, ',') || '/' || "
              "count(*) FILTER (WHERE payload::text = payload::jsonb::text) "
              "FROM settlement_events"),
            "json/2")
      << Q("SELECT string_agg(payload::text, E'\\n') FROM settlement_events");
  // The receipt's attempt and fingerprint came through too: a redelivery is a duplicate.
  EXPECT_EQ(CodeOf(Items(PostBatch(lobby->port(), {settled})).items(0)), "DUPLICATE");
}

TEST_F(BatchSettlementTest, EveryRosterThatIsNotTheRoomsSeatsIsRefused) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 1; room <= 5; ++room) MustAllocate(lobby->port(), room);
  v1::BattleResult swapped = MakeResult(1);  // two players on each other's team
  swapped.mutable_players(0)->set_team(2);
  swapped.mutable_players(9)->set_team(1);
  v1::BattleResult missing = MakeResult(2);  // a seated player left out
  missing.mutable_players()->RemoveLast();
  v1::BattleResult extra = MakeResult(3);  // an eleventh player, seated in another room
  *extra.add_players() = MakeResult(4).players(0);
  v1::BattleResult foreign = MakeResult(5);  // one player swapped for another room's
  foreign.mutable_players(0)->set_player_id("41");
  const HttpResponse r =
      PostBatch(lobby->port(), {swapped, missing, extra, foreign, MakeResult(4)});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  std::vector<std::string> codes;
  for (const auto& item : reply.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"ROSTER_MISMATCH", "ROSTER_MISMATCH",
                                             "ROSTER_MISMATCH", "ROSTER_MISMATCH", "SETTLED"}));
  EXPECT_EQ(Q("SELECT string_agg(room_id::text, ',' ORDER BY room_id) FROM battle_rooms"),
            "1,2,3,5");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_room_seats"), "40");
  EXPECT_EQ(Q("SELECT string_agg(room_id::text, ',') FROM matches"), "4");
}

TEST_F(BatchSettlementTest, ARoomTheDatabaseRefusesIsRefusedAloneAndTheOthersSettle) {
  // A test-only constraint that one strange result breaks: its check violation fails the one
  // transaction of the whole batch, yet only that room may be refused (for good, as the single
  // endpoint would) and the others must settle.
  db_->Exec("ALTER TABLE match_players ADD CONSTRAINT test_kills_below_1000 CHECK (kills < 1000)");
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room : {41, 42, 43}) MustAllocate(lobby->port(), room);
  v1::BattleResult strange = MakeResult(42);
  strange.mutable_players(0)->set_kills(5000);

  const HttpResponse r = PostBatch(lobby->port(), {MakeResult(41), strange, MakeResult(43)});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  std::vector<std::string> codes;
  for (const auto& item : reply.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"SETTLED", "INTERNAL", "SETTLED"}));
  ASSERT_EQ(reply.items_size(), 3);
  EXPECT_EQ(reply.items(1).problem().status(), 500u);
  EXPECT_FALSE(reply.items(1).problem().retryable());
  EXPECT_EQ(Q("SELECT string_agg(room_id::text, ',' ORDER BY room_id) FROM matches"), "41,43");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_room_seats WHERE room_id = 42"), "10")
      << "the refused room's roster was touched";
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) = 42"), "10");

  // Refused alone, all items refused: still one 200 with the items, not a 503 to retry.
  const HttpResponse alone = PostBatch(lobby->port(), {strange});
  ASSERT_EQ(alone.status, 200) << alone.body;
  ASSERT_EQ(Items(alone).items_size(), 1);
  EXPECT_EQ(CodeOf(Items(alone).items(0)), "INTERNAL");
}

// A mode whose stored declaration this lobby cannot rate by (a parameter no system has, written
// behind the lobby's back) fails the whole call as INTERNAL, its transaction rolled back: no room
// of the call is touched, and each settles once the declaration is one the lobby rates by again.
TEST_F(BatchSettlementTest, AModeTheLobbyCannotRateByFailsTheCallAndWritesNothing) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 51);
  MustAllocate(lobby->port(), 52);
  const std::string declared = Q("SELECT parameters::text FROM modes WHERE mode = 'default'");
  db_->Exec(
      "UPDATE modes SET parameters = parameters || '{\"surprise\": 1}' "
      "WHERE mode = 'default'");
  const DbSnapshot before = Snapshot();
  const HttpResponse refused = Settle(lobby->port(), MakeResult(51));
  EXPECT_EQ(refused.status, 500) << refused.body;
  const HttpResponse batch = PostBatch(lobby->port(), {MakeResult(51), MakeResult(52)});
  ASSERT_EQ(batch.status, 200) << batch.body;
  const v1::SettlementBatchReply items = Items(batch);
  ASSERT_EQ(items.items_size(), 2);
  for (const auto& item : items.items()) EXPECT_EQ(item.problem().status(), 500u) << batch.body;
  EXPECT_EQ(Snapshot(), before);

  db_->Exec("UPDATE modes SET parameters = '" + declared + "' WHERE mode = 'default'");
  const HttpResponse settled = PostBatch(lobby->port(), {MakeResult(51), MakeResult(52)});
  ASSERT_EQ(settled.status, 200) << settled.body;
  const v1::SettlementBatchReply settled_items = Items(settled);
  ASSERT_EQ(settled_items.items_size(), 2);
  for (const auto& item : settled_items.items()) EXPECT_EQ(CodeOf(item), "SETTLED");
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE room_id IN (51, 52)"), "2");
}

// A row lock another session holds on one room's battle_rooms row, or on one of its players,
// makes that room's item alone UNAVAILABLE (after the lock timeout, trying it on its own), as the
// room's advisory lock does: the rest of the batch settles, and the stuck room settles once the
// lock is gone.
TEST_F(BatchSettlementTest, ARowLockedElsewhereFailsOnlyItsRoomsItem) {
  auto lobby = StartLobby({"--lock-timeout-ms", "300"});
  ASSERT_NE(lobby, nullptr);
  for (uint64_t room = 51; room <= 66; ++room) MustAllocate(lobby->port(), room);
  const struct {
    const char* what;
    std::string lock;  // the statement that holds the row
    std::vector<uint64_t> rooms;
    uint64_t stuck;
  } cases[] = {
      {"the room's row",
       "SELECT 1 FROM battle_rooms WHERE room_id = 53 FOR UPDATE",
       {51, 52, 53, 54, 55, 56, 57, 58},
       53},
      {"one of its players' rows",
       "UPDATE players SET created_at = created_at WHERE player_id = '615'",
       {59, 60, 61, 62, 63, 64, 65, 66},
       61},
  };
  for (const auto& c : cases) {
    auto holder = db_->Connect();
    pqxx::work held(*holder);
    held.exec(c.lock);
    std::vector<v1::BattleResult> results;
    for (uint64_t room : c.rooms) results.push_back(MakeResult(room));
    const HttpResponse r = PostBatch(lobby->port(), results);
    EXPECT_EQ(r.status, 200) << c.what << ": " << r.body;
    const v1::SettlementBatchReply reply = r.status == 200 ? Items(r) : v1::SettlementBatchReply();
    for (int i = 0; i < reply.items_size(); ++i) {
      EXPECT_EQ(CodeOf(reply.items(i)), c.rooms[i] == c.stuck ? "UNAVAILABLE" : "SETTLED")
          << c.what << ", room " << c.rooms[i];
    }
    EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts WHERE room_id BETWEEN " +
                std::to_string(c.rooms.front()) + " AND " + std::to_string(c.rooms.back())),
              std::to_string(c.rooms.size() - 1))
        << c.what << ": the other rooms of the batch did not settle";
    EXPECT_EQ(
        Q("SELECT count(*) FROM settlement_receipts WHERE room_id = " + std::to_string(c.stuck)),
        "0");
    held.abort();
    const HttpResponse retry = Settle(lobby->port(), MakeResult(c.stuck));
    EXPECT_EQ(retry.status, 200) << c.what << ": " << retry.body;
  }
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), "16");
}

// A player's rating row another session holds (an operator fixing a rating by hand) makes the
// item of that player's room alone UNAVAILABLE: the rest of the batch commits, a player in two
// of its rooms (a released room and the next one) among them, rated in room order. Once the row
// is free, the room settles, exactly once. (The write's upsert used to wait for the row, and the
// lock timeout failed every room of the batch.)
TEST_F(BatchSettlementTest, ARatingRowLockedElsewhereFailsOnlyItsRoomsItem) {
  auto lobby = StartLobby({"--lock-timeout-ms", "300"});
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  // Players 11..20 and 61..70 rated once, each in room 1 or 6.
  for (uint64_t room : {1, 6}) AllocateAndSettle(port, room);
  // 11..20 in room 2, released, and in room 3; 61..70 in room 7; 41..50, new, in room 4.
  ASSERT_EQ(AllocateRoster(port, MakeAllocation(2, "node-a", 11, 10)).status, 201);
  ASSERT_EQ(HttpCall(port, "POST", "/v1/rooms/2:release", JsonHeaders("admin-token")).status, 200);
  ASSERT_EQ(AllocateRoster(port, MakeAllocation(3, "node-a", 11, 10)).status, 201);
  ASSERT_EQ(AllocateRoster(port, MakeAllocation(7, "node-a", 61, 10)).status, 201);
  MustAllocate(port, 4);
  const std::vector<v1::BattleResult> batch = {ResultOf(MakeAllocation(2, "node-a", 11, 10), 1),
                                               ResultOf(MakeAllocation(3, "node-a", 11, 10), 1),
                                               MakeResult(4),
                                               ResultOf(MakeAllocation(7, "node-a", 61, 10), 2)};

  auto holder = db_->Connect();
  pqxx::work held(*holder);
  held.exec("SELECT 1 FROM player_ratings WHERE player_id = '65' FOR UPDATE");
  const HttpResponse r = PostBatch(port, batch);
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  std::vector<std::string> codes;
  for (const auto& item : reply.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"SETTLED", "SETTLED", "SETTLED", "UNAVAILABLE"}));
  EXPECT_EQ(Q("SELECT string_agg(room_id::text, ',' ORDER BY room_id) FROM settlement_receipts"),
            "1,2,3,4,6");
  // Rooms 2 and 3 in order: each player's second match rated from the first one's after, and
  // the rating stored is the second's after.
  EXPECT_EQ(Q("SELECT count(*) FROM match_players a JOIN matches ma USING (match_id) "
              "JOIN match_players b USING (player_id) JOIN matches mb ON mb.match_id = b.match_id "
              "JOIN player_ratings r USING (player_id) "
              "WHERE ma.room_id = 2 AND mb.room_id = 3 AND b.rating_before = a.rating_after "
              "AND r.rating = b.rating_after AND r.games = 3"),
            "10");
  EXPECT_EQ(Q("SELECT rating || '/' || games FROM player_ratings WHERE player_id = '65'"),
            Q("SELECT rating_after || '/1' FROM match_players JOIN matches USING (match_id) "
              "WHERE room_id = 6 AND player_id = '65'"))
      << "the held player's rating moved";
  held.abort();

  // Free again: the room settles once, and the batch sent again is answered from its receipts.
  const HttpResponse retry = PostBatch(port, batch);
  ASSERT_EQ(retry.status, 200) << retry.body;
  const v1::SettlementBatchReply retried = Items(retry);
  codes.clear();
  for (const auto& item : retried.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"DUPLICATE", "DUPLICATE", "DUPLICATE", "SETTLED"}));
  const HttpResponse again = PostBatch(port, batch);
  const v1::SettlementBatchReply answered_again = Items(again);
  codes.clear();
  for (const auto& item : answered_again.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"DUPLICATE", "DUPLICATE", "DUPLICATE", "DUPLICATE"}));
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE room_id = 7"), "1");
  EXPECT_EQ(Q("SELECT games FROM player_ratings WHERE player_id = '65'"), "2");
}

// The same for a player new to the mode when its room was allocated, rated since (by an earlier
// room, released, that settled after the next was allocated): its rating row exists now, held by
// another session. The settlement's lock step must find it held, not new (a row it took for new
// would be written by the write's upsert, which would wait for the lock, and the lock timeout
// would fail every room of the batch).
TEST_F(BatchSettlementTest, ARatingRowMadeSinceAllocationAndLockedElsewhereFailsOnlyItsRoom) {
  auto lobby = StartLobby({"--lock-timeout-ms", "300"});
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  // 81..90, new, in room 8, released, then in room 9 (still new: room 8 is not settled yet).
  const v1::BattleResult room8 = ResultOf(MakeAllocation(8, "node-a", 81, 10), 1);
  const v1::BattleResult room9 = ResultOf(MakeAllocation(9, "node-a", 81, 10), 2);
  ASSERT_EQ(AllocateRoster(port, MakeAllocation(8, "node-a", 81, 10)).status, 201);
  ASSERT_EQ(HttpCall(port, "POST", "/v1/rooms/8:release", JsonHeaders("admin-token")).status, 200);
  ASSERT_EQ(AllocateRoster(port, MakeAllocation(9, "node-a", 81, 10)).status, 201);
  ASSERT_EQ(Q("SELECT count(*) FROM battle_room_seats WHERE room_id = 9 "
              "AND rating_at_allocation IS NOT NULL"),
            "0")
      << "room 9's players were not new when it was allocated";
  ASSERT_EQ(Settle(port, room8).status, 200);
  MustAllocate(port, 4);

  auto holder = db_->Connect();
  pqxx::work held(*holder);
  ASSERT_EQ(held.exec("SELECT 1 FROM player_ratings WHERE player_id = '85' FOR UPDATE").size(), 1u);
  const HttpResponse r = PostBatch(port, {room9, MakeResult(4)});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  std::vector<std::string> codes;
  for (const auto& item : reply.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"UNAVAILABLE", "SETTLED"}));
  EXPECT_EQ(Q("SELECT games FROM player_ratings WHERE player_id = '85'"), "1");
  held.abort();

  // Free again: room 9 settles once, each player rated from room 8's after.
  const HttpResponse retry = PostBatch(port, {room9, MakeResult(4)});
  ASSERT_EQ(retry.status, 200) << retry.body;
  const v1::SettlementBatchReply retried = Items(retry);
  codes.clear();
  for (const auto& item : retried.items()) codes.push_back(CodeOf(item));
  EXPECT_EQ(codes, (std::vector<std::string>{"SETTLED", "DUPLICATE"}));
  EXPECT_EQ(Q("SELECT count(*) FROM match_players a JOIN matches ma USING (match_id) "
              "JOIN match_players b USING (player_id) JOIN matches mb ON mb.match_id = b.match_id "
              "JOIN player_ratings r USING (player_id) "
              "WHERE ma.room_id = 8 AND mb.room_id = 9 AND b.rating_before = a.rating_after "
              "AND r.rating = b.rating_after AND r.games = 2"),
            "10");
}

TEST_F(BatchSettlementTest, WholeRequestErrorsKeepTheirStatus) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  EXPECT_EQ(PostBatch(lobby->port(), {MakeResult(1)}, "nope").status, 401);
  EXPECT_EQ(PostBatch(lobby->port(), {MakeResult(1)}, "admin-token").status, 401);
  EXPECT_EQ(HttpCall(lobby->port(), "POST", "/v1/settlements:batch",
                     {{"Authorization", "Bearer token-a"}, {"Content-Type", "text/html"}}, "<p>")
                .status,
            415);
  EXPECT_EQ(HttpCall(lobby->port(), "POST", "/v1/settlements:batch", JsonHeaders("token-a"),
                     "{\"results\": [")
                .status,
            400);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/settlements:batch", JsonHeaders("token-a")).status,
            405);
  std::vector<v1::BattleResult> too_many;
  for (uint64_t room = 1; room <= 257; ++room) too_many.push_back(MakeResult(room));
  EXPECT_EQ(PostBatch(lobby->port(), too_many).status, 413);
  // An empty batch is answered with no items.
  const HttpResponse empty = PostBatch(lobby->port(), {});
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(Items(empty).items_size(), 0);

  auto away = LobbyProcess::Start("dbname=verdict_no_such_database");
  ASSERT_NE(away, nullptr);
  const HttpResponse down = PostBatch(away->port(), {MakeResult(1), MakeResult(2)});
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(down.headers.count("retry-after"), 1u);
}

// Many batches with shuffled, overlapping rooms, at two lobby instances at once: every room is
// settled exactly once, every answer is a receipt, and nothing deadlocks.
TEST_F(BatchSettlementTest, OverlappingBatchesOnTwoLobbiesSettleEachRoomOnceWithoutDeadlock) {
  auto a = StartLobby();
  auto b = StartLobby();
  ASSERT_TRUE(a && b);
  constexpr uint64_t kRooms = 60;
  for (uint64_t room = 1; room <= kRooms; ++room) MustAllocate(a->port(), room);
  constexpr int kSenders = 8;
  std::latch start(kSenders);
  std::vector<std::vector<v1::SettlementItem>> answers(kSenders);
  std::vector<int> statuses(kSenders);
  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      std::vector<uint64_t> rooms(kRooms);
      for (uint64_t i = 0; i < kRooms; ++i) rooms[i] = i + 1;
      std::shuffle(rooms.begin(), rooms.end(), std::mt19937(s));
      std::vector<v1::BattleResult> results;
      for (int i = 0; i < 30; ++i) results.push_back(MakeResult(rooms[i]));
      start.arrive_and_wait();
      const HttpResponse r = PostBatch(s % 2 ? b->port() : a->port(), results);
      statuses[s] = r.status;
      if (r.status == 200) {
        const v1::SettlementBatchReply reply = Items(r);
        answers[s].assign(reply.items().begin(), reply.items().end());
      }
    });
  }
  for (auto& t : senders) t.join();
  std::map<uint64_t, std::set<uint64_t>> matches_of_room;
  int first = 0;
  for (int s = 0; s < kSenders; ++s) {
    ASSERT_EQ(statuses[s], 200);
    for (const auto& item : answers[s]) {
      ASSERT_TRUE(item.has_receipt()) << item.ShortDebugString();
      matches_of_room[item.receipt().room_id()].insert(item.receipt().match_id());
      first += item.receipt().duplicate() ? 0 : 1;
    }
  }
  for (const auto& [room, ids] : matches_of_room) EXPECT_EQ(ids.size(), 1u) << "room " << room;
  EXPECT_EQ(static_cast<size_t>(first), matches_of_room.size()) << "a room settled twice";
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), std::to_string(matches_of_room.size()));
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), Q("SELECT count(DISTINCT room_id) FROM matches"));
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
}

// Histogram count of settlement transactions, from /metrics.
int Transactions(uint16_t port) {
  const std::string body = HttpCall(port, "GET", "/metrics").body;
  const std::string name = "verdict_lobby_settle_batch_rooms_count ";
  const size_t at = body.find(name);
  return at == std::string::npos ? -1 : std::stoi(body.substr(at + name.size()));
}

// Fires one single settlement per room, all at once; returns how many were answered 200.
int FireSingles(LobbyFixture& f, uint16_t port, uint64_t first_room, int n) {
  std::latch start(n);
  std::vector<int> statuses(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      statuses[i] = f.Settle(port, MakeResult(first_room + i)).status;
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<int>(std::count(statuses.begin(), statuses.end(), 200));
}

TEST_F(BatchSettlementTest, ConcurrentSingleSettlementsShareTransactions) {
  constexpr int kRequests = 32;
  auto coalescing = StartLobby({"--coalesce-wait-ms", "20", "--settle-concurrency", "1"});
  auto separate = StartLobby({"--coalesce-wait-ms", "0"});
  ASSERT_TRUE(coalescing && separate);
  for (uint64_t room = 1; room <= 2 * kRequests; ++room) MustAllocate(coalescing->port(), room);

  EXPECT_EQ(FireSingles(*this, coalescing->port(), 1, kRequests), kRequests);
  const int shared = Transactions(coalescing->port());
  EXPECT_LT(shared, kRequests) << "no two requests shared a transaction";
  EXPECT_GT(shared, 0);

  EXPECT_EQ(FireSingles(*this, separate->port(), kRequests + 1, kRequests), kRequests);
  EXPECT_EQ(Transactions(separate->port()), kRequests) << "coalescing was not off";
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), std::to_string(2 * kRequests));
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
}

// Every plan PostgreSQL runs on this connection, as auto_explain reports them (as notices).
class PlanCollector final : public pqxx::errorhandler {
 public:
  explicit PlanCollector(pqxx::connection_base& c) : pqxx::errorhandler(c) {}
  bool operator()(const char msg[]) noexcept override {
    plans += msg;
    return true;
  }
  std::string plans;
};

// The write (sql/functions/verdict_settle_write.sql) takes the match players it inserted from
// the insert itself, so nothing reads match_players back, and it touches no row of players (a
// room's players are freed with its seats: migration 005). (When an
// earlier write read them back, how it did hung on match_players.match_id's statistics, and stale
// ones made each call scan the whole table.) The two statements of a settlement of 64 rooms, made
// straight to verdict_settle_prepare and verdict_settle_write in one transaction, with the ratings
// the lobby would compute (two teams of players new to the ladder: 1500, moving 16), their nested
// plans collected with auto_explain: match_players appears only as the insert's target.
TEST_F(BatchSettlementTest, TheWriteReadsNoMatchPlayersBack) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  constexpr int kRooms = 64;
  for (uint64_t room = 1; room <= kRooms; ++room) MustAllocate(lobby->port(), room);

  using lobby::pg::ArrayLiteral;
  ArrayLiteral rooms, nodes, outcomes, winners, suspects, ended, replays, reasons, prints, modes;
  ArrayLiteral events;  // a JSON text a room
  ArrayLiteral player_rooms, ids, teams, ranks, stats, scores, disconnected, results, before, after,
      zeros, rated_modes, games, wins, losses, draws;
  for (uint64_t room = 1; room <= kRooms; ++room) {
    const v1::BattleResult r = MakeResult(room);
    rooms.Add(room);
    nodes.AddText("node-a");
    outcomes.AddText("SETTLED");
    winners.Add(1);
    suspects.Add(false);
    ended.Add(r.ended_at_ms());
    replays.AddText("replays/x");
    reasons.AddText("");
    prints.AddHexBytes(std::string(64, 'a'));
    modes.AddText("default");
    events.AddText("{\"room\":" + std::to_string(room) + "}");  // stored as given
    for (const v1::PlayerResult& p : r.players()) {
      const bool won = p.team() == 1;
      player_rooms.Add(room);
      ids.AddText(p.player_id());
      teams.Add(p.team());
      ranks.Add(won ? 1 : 2);
      stats.Add(1);
      scores.Add(100);
      disconnected.Add(false);
      results.AddText(won ? "win" : "loss");
      before.Add(1500.0);
      after.Add(won ? 1516.0 : 1484.0);
      zeros.Add(0.0);
      rated_modes.AddText("default");
      games.Add(1);
      wins.Add(won ? 1 : 0);
      losses.Add(won ? 0 : 1);
      draws.Add(0);
    }
  }
  decltype(lobby::kSettlePrepare)::Args prepare;
  const auto quoted = [](const ArrayLiteral& a) { return "'" + a.str() + "'"; };
  prepare[lobby::kSettlePrepare["p_room_ids"]] = quoted(rooms);
  prepare[lobby::kSettlePrepare["p_node_ids"]] = quoted(nodes);
  prepare[lobby::kSettlePrepare["p_outcomes"]] = quoted(outcomes);
  prepare[lobby::kSettlePrepare["p_fingerprints"]] = quoted(prints);
  prepare[lobby::kSettlePrepare["p_player_rooms"]] = quoted(player_rooms);
  prepare[lobby::kSettlePrepare["p_player_ids"]] = quoted(ids);
  prepare[lobby::kSettlePrepare["p_teams"]] = quoted(teams);
  prepare[lobby::kSettlePrepare["p_wait"]] = "true";
  decltype(lobby::kSettleWrite)::Args write;
  write[lobby::kSettleWrite["p_room_ids"]] = quoted(rooms);
  write[lobby::kSettleWrite["p_node_ids"]] = quoted(nodes);
  write[lobby::kSettleWrite["p_outcomes"]] = quoted(outcomes);
  write[lobby::kSettleWrite["p_winner_teams"]] = quoted(winners);
  write[lobby::kSettleWrite["p_suspects"]] = quoted(suspects);
  write[lobby::kSettleWrite["p_ended_at_ms"]] = quoted(ended);
  write[lobby::kSettleWrite["p_replay_paths"]] = quoted(replays);
  write[lobby::kSettleWrite["p_abort_reasons"]] = quoted(reasons);
  write[lobby::kSettleWrite["p_fingerprints"]] = quoted(prints);
  write[lobby::kSettleWrite["p_modes"]] = quoted(modes);
  write[lobby::kSettleWrite["p_events"]] = quoted(events);
  write[lobby::kSettleWrite["p_player_rooms"]] = quoted(player_rooms);
  write[lobby::kSettleWrite["p_player_ids"]] = quoted(ids);
  write[lobby::kSettleWrite["p_teams"]] = quoted(teams);
  write[lobby::kSettleWrite["p_ranks"]] = quoted(ranks);
  write[lobby::kSettleWrite["p_kills"]] = quoted(stats);
  write[lobby::kSettleWrite["p_deaths"]] = quoted(stats);
  write[lobby::kSettleWrite["p_assists"]] = quoted(stats);
  write[lobby::kSettleWrite["p_scores"]] = quoted(scores);
  write[lobby::kSettleWrite["p_disconnected"]] = quoted(disconnected);
  write[lobby::kSettleWrite["p_results"]] = quoted(results);
  write[lobby::kSettleWrite["p_ratings_before"]] = quoted(before);
  write[lobby::kSettleWrite["p_ratings_after"]] = quoted(after);
  write[lobby::kSettleWrite["p_deviations_before"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_deviations_after"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_volatilities_before"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_volatilities_after"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_rated_modes"]] = quoted(rated_modes);
  write[lobby::kSettleWrite["p_rated_players"]] = quoted(ids);
  write[lobby::kSettleWrite["p_final_ratings"]] = quoted(after);
  write[lobby::kSettleWrite["p_final_deviations"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_final_volatilities"]] = quoted(zeros);
  write[lobby::kSettleWrite["p_final_displayed"]] = quoted(after);
  write[lobby::kSettleWrite["p_games"]] = quoted(games);
  write[lobby::kSettleWrite["p_wins"]] = quoted(wins);
  write[lobby::kSettleWrite["p_losses"]] = quoted(losses);
  write[lobby::kSettleWrite["p_draws"]] = quoted(draws);
  write[lobby::kSettleWrite["p_placements"]] = quoted(ranks);
  write[lobby::kSettleWrite["p_attempt_id"]] = "7";
  write[lobby::kSettleWrite["p_settled_at_ms"]] = "1700000000000";

  auto conn = db_->Connect();
  PlanCollector collector(*conn);
  pqxx::work tx(*conn);
  tx.exec(
      "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
      " SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice;"
      " SET client_min_messages = notice");
  // The prepare hands out the rooms' new match ids, in room order: the write records them.
  const pqxx::result settle =
      tx.exec("SELECT match_id FROM " + lobby::kSettlePrepare.Call(prepare) +
              " WHERE status = 'settle' AND player_id IS NULL");
  ASSERT_EQ(settle.size(), static_cast<size_t>(kRooms));
  ArrayLiteral match_ids;
  for (const auto& row : settle) match_ids.Add(row[0].as<int64_t>());
  write[lobby::kSettleWrite["p_match_ids"]] = quoted(match_ids);
  collector.plans.clear();  // the write's plans from here
  ASSERT_EQ(tx.exec1("SELECT " + lobby::kSettleWrite.Call(write))[0].as<int>(), kRooms);
  tx.commit();

  // The collector saw the write's plans, and in them match_players only as the insert's target.
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = collector.plans.find(what); at != std::string::npos;
         at = collector.plans.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count(" on players"), 0u) << "the write touched players:\n" << collector.plans;
  EXPECT_EQ(count("Insert on player_ratings"), 1u) << collector.plans;
  EXPECT_EQ(count("Insert on match_players"), 1u) << collector.plans;
  EXPECT_EQ(count(" on match_players"), 1u) << "a plan reads match_players:\n" << collector.plans;

  // What was written is what was given: each player rated once and released, and each event and
  // match as given for its room (the lobby builds the events: the two tests below).
  EXPECT_EQ(Q("SELECT count(*) FROM match_players"), std::to_string(kRooms * 10));
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM players p JOIN match_players mp USING (player_id)"
              " JOIN player_ratings r ON r.player_id = p.player_id"
              " AND r.mode_id = (SELECT mode_id FROM modes WHERE mode = 'default')"
              " WHERE r.rating = mp.rating_after AND r.games = 1 AND r.wins + r.losses = 1"
              " AND verdict_player_room(p.player_id) = 0"),
            std::to_string(kRooms * 10));
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events e JOIN matches m USING (match_id)"
              " WHERE (e.payload->>'room')::bigint = m.room_id"
              " AND m.settled_at = timestamptz 'epoch' + interval '1700000000 seconds'"),
            std::to_string(kRooms));
}

// The event's players, built by the lobby (lobby/settled_event.h), are byte for byte the text of
// the jsonb the write built from the same values before migration 007 (jsonb_agg of
// jsonb_build_object per player, ordered by id in byte order, with Elo's rounded members), which
// the feed served: the event is now stored as that text. On values whose text is easy to get
// wrong: thirds, tiny and huge magnitudes (jsonb prints them without an exponent), a negative
// zero, halves (PostgreSQL rounds them to even), NaN and the infinities, and ids that need
// escaping (jsonb's own escapes, \b and \f by name) or sort differently by byte.
TEST_F(BatchSettlementTest, EventPlayersAreTheTextJsonbPrints) {
  // Ratings are finite (Elo's are rounded to integers); deviations and volatilities take every
  // value.
  const std::vector<double> ratings = {1500,     1516.5, 1483.5,    2.5,         -2.5,
                                       1.0 / 3,  -0.0,   1e-7,      0.1 + 0.2,   123456789.125,
                                       25.0 / 3, 1.5e-5, 1e9 + 0.5, -1483.49999, 3.5};
  const std::vector<double> values = {1e21,  1.0 / 3,  -0.0,         1e-7,     1.5e-5,    0.1 + 0.2,
                                      1e300, 25.0 / 3, std::nan(""), HUGE_VAL, -HUGE_VAL, 5e-324};
  const std::vector<std::string> ids = {
      "b", "a\"quote", "\u00e9t\u00e9", "Z", "back\\", "tab\there", "10", "9", "bell\b\f\x01\x7f/"};
  std::vector<v1::PlayerResult> players(ids.size());
  std::vector<lobby::RatedSeat> seats;
  for (size_t i = 0; i < ids.size(); ++i) {
    players[i].set_player_id(ids[i]);
    players[i].set_team(i % 2 + 1);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto r = [&](size_t k) { return ratings[(i * 2 + k) % ratings.size()]; };
    const auto v = [&](size_t k) { return values[(i * 4 + k) % values.size()]; };
    seats.push_back({1,
                     &players[i],
                     static_cast<uint32_t>(i % 2 + 1),
                     i % 2 ? "loss" : "win",
                     {r(0), v(0), v(1)},
                     {r(1), v(2), v(3)}});
  }
  std::vector<const lobby::RatedSeat*> room;
  for (const lobby::RatedSeat& seat : seats) room.push_back(&seat);

  using lobby::pg::ArrayLiteral;
  ArrayLiteral pid, team, rank, result, before, after, dev_before, dev_after, vol_before, vol_after;
  for (const lobby::RatedSeat& seat : seats) {
    pid.AddText(seat.player->player_id());
    team.Add(seat.player->team());
    rank.Add(seat.rank);
    result.AddText(seat.result);
    const auto add = [](ArrayLiteral& a, double x) {
      if (std::isnan(x)) {
        a.AddText("NaN");
      } else if (std::isinf(x)) {
        a.AddText(x > 0 ? "Infinity" : "-Infinity");
      } else {
        a.Add(x);
      }
    };
    add(before, seat.before.value);
    add(after, seat.after.value);
    add(dev_before, seat.before.deviation);
    add(dev_after, seat.after.deviation);
    add(vol_before, seat.before.volatility);
    add(vol_after, seat.after.volatility);
  }
  auto conn = db_->Connect();
  pqxx::nontransaction tx(*conn);
  for (const bool elo : {false, true}) {
    // The write's expression of 74e874d..migration 007, on the same values, printed by jsonb.
    const std::string printed =
        tx.exec_params1(
              "SELECT (SELECT jsonb_agg(jsonb_build_object("
              "  'player_id', s.pid, 'team', s.team, 'rank', s.rank, 'result', s.result,"
              "  'rating_before', s.rb, 'rating_after', s.ra, 'deviation_before', s.db,"
              "  'deviation_after', s.da, 'volatility_before', s.vb, 'volatility_after', s.va)"
              "  || CASE WHEN $11 THEN jsonb_build_object('elo_before', round(s.rb)::integer,"
              "       'elo_after', round(s.ra)::integer) ELSE '{}'::jsonb END"
              "  ORDER BY s.pid COLLATE \"C\")"
              " FROM unnest($1::text[], $2::smallint[], $3::smallint[], $4::text[], $5::float8[],"
              "             $6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::float8[])"
              "   AS s(pid, team, rank, result, rb, ra, db, da, vb, va))::text",
              pid.str(), team.str(), rank.str(), result.str(), before.str(), after.str(),
              dev_before.str(), dev_after.str(), vol_before.str(), vol_after.str(), elo)[0]
            .as<std::string>();
    EXPECT_EQ(lobby::EventPlayersJson(room, elo), printed) << "elo=" << elo;
  }
}

// The whole event, built by the lobby (lobby/settled_event.h), is byte for byte what the write's
// format() built around the players before the event had one home (verdict_settle_write of
// 1c9338c up to this change), which the feed served and still serves as stored: on a mode that
// needs escaping, each outcome, a suspect room and not, no winner, and ids and times at their
// bounds.
TEST_F(BatchSettlementTest, TheSettledEventIsTheTextTheWriteBuilt) {
  const std::string players = "[{\"rank\": 1, \"team\": 1}]";  // any JSON: placed as it is
  struct Case {
    std::string mode;
    std::string outcome;
    uint64_t room_id, match_id;
    uint32_t winner_team;
    bool suspect;
    int64_t settled_at_ms;
  };
  const std::vector<Case> cases = {
      {"default", "SETTLED", 1, 1, 1, false, 1700000000000},
      {"ranked \"5v5\"\\\t\u00e9\x01", "ABORTED", 42, 7, 0, true, 0},
      {"ffa", "SETTLED", uint64_t{1} << 62, (uint64_t{1} << 63) - 1, 64, true, 253402300799999},
  };
  auto conn = db_->Connect();
  pqxx::nontransaction tx(*conn);
  for (const Case& c : cases) {
    const std::string old_text =
        tx.exec_params1(
              "SELECT format('{\"mode\": %s, \"type\": \"battle.settled\", \"outcome\": %s, "
              "\"players\": %s, \"room_id\": \"%s\", \"suspect\": %s, \"match_id\": \"%s\", "
              "\"winner_team\": %s, \"settled_at_ms\": \"%s\"}', to_json($1::text), "
              "to_json($2::text), $3::text, $4::bigint, to_json($5::boolean), $6::bigint, "
              "$7::smallint, $8::bigint)::json::text",
              c.mode, c.outcome, players, static_cast<int64_t>(c.room_id), c.suspect,
              static_cast<int64_t>(c.match_id), static_cast<int>(c.winner_team), c.settled_at_ms)[0]
            .as<std::string>();
    const std::string built = lobby::SettledEventJson({.mode = c.mode,
                                                       .outcome = c.outcome,
                                                       .room_id = c.room_id,
                                                       .match_id = c.match_id,
                                                       .winner_team = c.winner_team,
                                                       .suspect = c.suspect,
                                                       .settled_at_ms = c.settled_at_ms},
                                                      players);
    EXPECT_EQ(built, old_text) << "mode " << c.mode;
  }
}

TEST_F(BatchSettlementTest, ProtobufBatchesWork) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 1);
  v1::SettlementBatch batch;
  *batch.add_results() = MakeResult(1);
  const HttpResponse r =
      HttpCall(lobby->port(), "POST", "/v1/settlements:batch",
               {{"Content-Type", "application/x-protobuf"}, {"Authorization", "Bearer token-a"}},
               wire::EncodeBody(batch, wire::BodyFormat::kProtobuf).value());
  ASSERT_EQ(r.status, 200);
  v1::SettlementBatchReply reply;
  ASSERT_TRUE(reply.ParseFromString(r.body));
  ASSERT_EQ(reply.items_size(), 1);
  EXPECT_FALSE(reply.items(0).receipt().duplicate());
}

}  // namespace
}  // namespace verdict::testing
