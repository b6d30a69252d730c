// Ratings through a real verdict-lobby and PostgreSQL: modes and their rating systems, rooms of
// any shape placed, string player ids, the ladder and imports; what a settlement does to players'
// ratings and counts when one transaction holds more than one of their rooms (a released room and
// the players' next one), and the chain of before and after that every player's matches form.
// The expected values of OpenSkill are the published test vectors of its implementations, quoted
// where each is used.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "lobby/ladder_cursor.h"
#include "tests/lobby/lobby_fixture.h"

namespace verdict::testing {
namespace {

class RatingsTest : public LobbyFixture {
 protected:
  // The player's rating in `mode`: "mu/sigma" as numbers, for comparing to 1e-9.
  std::pair<double, double> MuSigma(const std::string& player, const std::string& mode) const {
    const std::string row =
        Q("SELECT rating || '/' || deviation FROM player_ratings JOIN modes USING (mode_id) "
          "WHERE mode = '" +
          mode + "' AND player_id = '" + player + "'");
    EXPECT_FALSE(row.empty()) << player << " has no rating in " << mode;
    if (row.empty()) return {0, 0};
    return {std::stod(row.substr(0, row.find('/'))), std::stod(row.substr(row.find('/') + 1))};
  }

  void ExpectMuSigma(const std::string& player, const std::string& mode, double mu,
                     double sigma) const {
    const auto [got_mu, got_sigma] = MuSigma(player, mode);
    EXPECT_NEAR(got_mu, mu, 1e-9) << player;
    EXPECT_NEAR(got_sigma, sigma, 1e-9) << player;
  }

  // Allocates room 1 (players 11..20, 11..15 on team 1), releases it to a pending settlement, and
  // allocates room 2 to the same ten players on the same teams: both rooms wait for their results,
  // both rated from 1500 against 1500.
  void ReleaseAndReseat(uint16_t port) {
    MustAllocate(port, 1);
    const HttpResponse released =
        HttpCall(port, "POST", "/v1/rooms/1:release", JsonHeaders("admin-token"));
    ASSERT_EQ(released.status, 200) << released.body;
    ASSERT_EQ(AllocateRoster(port, MakeAllocation(2, "node-a", 11, 10)).status, 201);
  }

  // Each player's matches, in match order, as "before>after" joined by spaces.
  std::string ChainOf(uint64_t player) const {
    return Q(
        "SELECT string_agg(rating_before || '>' || rating_after, ' ' ORDER BY match_id) "
        "FROM match_players WHERE player_id = '" +
        std::to_string(player) + "'");
  }
};

// A released room and the players' next room settled in one transaction (one node batch): both
// matches count, in room order, each from the rating the one before left, and every player ends
// free. (Each player has two source rows for one update there; an UPDATE … FROM applied one of
// them, so the player kept 1516 and 1 game.)
TEST_F(RatingsTest, AReleasedRoomAndTheNextOneInOneBatchBothCount) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ReleaseAndReseat(lobby->port());

  const HttpResponse r =
      PostBatch(lobby->port(), {MakeResult(1), ResultOf(MakeAllocation(2, "node-a", 11, 10), 1)});
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::SettlementBatchReply reply = Items(r);
  ASSERT_EQ(reply.items_size(), 2);
  EXPECT_EQ(CodeOf(reply.items(0)), "SETTLED");
  EXPECT_EQ(CodeOf(reply.items(1)), "SETTLED");

  EXPECT_EQ(Q("SELECT string_agg(DISTINCT rating || '/' || games || '/' || wins, ',') FROM "
              "player_ratings "
              "WHERE player_id::int BETWEEN 11 AND 15"),
            "1532/2/2");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT rating || '/' || games || '/' || losses, ',') FROM "
              "player_ratings "
              "WHERE player_id::int BETWEEN 16 AND 20"),
            "1468/2/2");
  EXPECT_EQ(ChainOf(11), "1500>1516 1516>1532");
  EXPECT_EQ(ChainOf(20), "1500>1484 1484>1468");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0");
  // Free for a next room.
  EXPECT_EQ(AllocateRoster(lobby->port(), MakeAllocation(3, "node-a", 11, 10)).status, 201);
}

// The released room aborted in the transaction that settles the players' next room: the abort
// moves nothing and counts no game, the next room counts, and the players are free, not held by
// the next room's deleted row (which left them PLAYER_BUSY for ever).
TEST_F(RatingsTest, AnAbortOfAReleasedRoomBesideTheNextRoomLeavesThePlayersFree) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ReleaseAndReseat(lobby->port());
  v1::BattleResult aborted = MakeResult(1);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  aborted.set_abort_reason("host lost");

  const HttpResponse r =
      PostBatch(lobby->port(), {aborted, ResultOf(MakeAllocation(2, "node-a", 11, 10), 2)});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(Items(r).items_size(), 2);
  EXPECT_EQ(CodeOf(Items(r).items(0)), "SETTLED");
  EXPECT_EQ(CodeOf(Items(r).items(1)), "SETTLED");

  EXPECT_EQ(Q("SELECT string_agg(DISTINCT rating || '/' || games, ',') FROM player_ratings "
              "WHERE player_id::int BETWEEN 11 AND 15"),
            "1484/1");
  EXPECT_EQ(ChainOf(11), "1500>1500 1500>1484");
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  EXPECT_EQ(AllocateRoster(lobby->port(), MakeAllocation(3, "node-a", 11, 10)).status, 201);
}

// Three teams of sizes 3, 1 and 2, placed in that order, in a mode on OpenSkill's defaults
// (Plackett-Luce, mu 25, sigma 25/3, beta sigma/2, tau 0): the published vector of
// philihp/openskill.js v5.0.1, src/models/__tests__/plackett-luce.test.ts, '3 teams different
// sized players' (line 53), the same in OpenDebates/openskill.py v4.0.0,
// tests/models/test_plackett_luce.py, "# 3 Different Sized Teams" (line 55). Through the HTTP API,
// to 1e-9, and GET /v1/players shows it with its displayed rating, mu - 3 sigma.
TEST_F(RatingsTest, ThreeTeamsOfThreeOneAndTwoGetThePublishedOpenSkillValues) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const HttpResponse declared =
      PutMode(lobby->port(), "squads", R"({"rating": {"system": "openskill"}})");
  ASSERT_EQ(declared.status, 201) << declared.body;
  const v1::RoomAllocation room = Room(1, "squads", {{"a1", "a2", "a3"}, {"b1"}, {"c1", "c2"}});
  MustAllocateRoom(lobby->port(), room);
  const HttpResponse settled = Settle(lobby->port(), Placed(room, {1, 2, 3}));
  ASSERT_EQ(settled.status, 200) << settled.body;
  for (const char* p : {"a1", "a2", "a3"}) {
    ExpectMuSigma(p, "squads", 25.939870821784513, 8.247641552260456);
  }
  ExpectMuSigma("b1", "squads", 27.21366020491262, 8.274321317985242);
  for (const char* p : {"c1", "c2"})
    ExpectMuSigma(p, "squads", 21.84646897330287, 8.213058173195341);

  const HttpResponse player =
      HttpCall(lobby->port(), "GET", "/v1/players/b1", {{"Authorization", "Bearer token-a"}});
  ASSERT_EQ(player.status, 200) << player.body;
  v1::Player read;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(player.body, wire::BodyFormat::kJson, &read, &error)) << error;
  ASSERT_EQ(read.ratings_size(), 1) << player.body;
  EXPECT_EQ(read.ratings(0).mode(), "squads");
  EXPECT_EQ(read.ratings(0).system(), "openskill");
  EXPECT_NEAR(read.ratings(0).displayed(), 27.21366020491262 - 3 * 8.274321317985242, 1e-9);
  EXPECT_EQ(read.ratings(0).games(), 1u);
  EXPECT_EQ(read.ratings(0).losses(), 1u) << "second of three is below first";
  EXPECT_DOUBLE_EQ(read.ratings(0).mean_placement(), 2);
}

// A four-way tie of players new to the mode moves no mean, and shrinks every sigma alike, as
// Plackett-Luce says of ties: philihp/openskill.js v5.0.1, src/__tests__/rate.test.ts,
// 'four-way-tie with newbies' (line 223), through rate() and so with its tau of 25/300.
TEST_F(RatingsTest, AFourWayTieMovesNoMeanAsPlackettLuceSays) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "ffa",
                    R"({"rating": {"system": "openskill",
                                   "parameters": {"tau": 0.08333333333333333}}})")
                .status,
            201);
  const v1::RoomAllocation room = Room(1, "ffa", {{"p1"}, {"p2"}, {"p3"}, {"p4"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 1, 1, 1})).status, 200);
  for (const char* p : {"p1", "p2", "p3", "p4"}) ExpectMuSigma(p, "ffa", 25, 8.263571791259416);
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT result, ',') FROM match_players"), "draw");
}

// A released room is rated from the ratings its players had when it was allocated, and its
// change added to what they have now, for OpenSkill as for Elo (the compensation rule): mu by the
// difference, sigma by the ratio. Two solo players new to a mode meet twice: room 1 is released,
// room 2 settles (p wins), then room 1's late result (p wins again). Each room alone is the
// published 2-player free-for-all (philihp/openskill.js v5.0.1,
// src/models/__tests__/plackett-luce.test.ts, '2p FFA', line 15): 27.63523138347365 and
// 22.36476861652635, sigma 8.065506316323548.
TEST_F(RatingsTest, AReleasedRoomIsRatedFromItsAllocationTimeRatings) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "duel", R"({"rating": {"system": "openskill"}})").status, 201);
  const v1::RoomAllocation first = Room(1, "duel", {{"p"}, {"q"}});
  const v1::RoomAllocation second = Room(2, "duel", {{"p"}, {"q"}});
  MustAllocateRoom(lobby->port(), first);
  ASSERT_EQ(
      HttpCall(lobby->port(), "POST", "/v1/rooms/1:release", JsonHeaders("admin-token")).status,
      200);
  MustAllocateRoom(lobby->port(), second);
  ASSERT_EQ(Settle(lobby->port(), Placed(second, {1, 2})).status, 200);
  const double win = 27.63523138347365, loss = 22.36476861652635, sigma = 8.065506316323548;
  ExpectMuSigma("p", "duel", win, sigma);

  ASSERT_EQ(Settle(lobby->port(), Placed(first, {1, 2})).status, 200);
  const double shrink = sigma / (25.0 / 3.0);
  ExpectMuSigma("p", "duel", win + (win - 25), sigma * shrink);
  ExpectMuSigma("q", "duel", loss + (loss - 25), sigma * shrink);
  EXPECT_EQ(Q("SELECT games FROM player_ratings WHERE player_id = 'p'"), "2");
}

// A redelivery is a duplicate and moves nothing: ratings, counts and the ladder stay.
TEST_F(RatingsTest, ARedeliveryMovesNothing) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "squads", R"({"rating": {"system": "openskill"}})").status, 201);
  const v1::RoomAllocation room = Room(1, "squads", {{"a1", "a2"}, {"b1", "b2"}, {"c1", "c2"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {2, 1, 3})).status, 200);
  const std::string ratings =
      "SELECT string_agg(concat_ws('/', player_id, rating, deviation, displayed, games), ' ' "
      "ORDER BY player_id) FROM player_ratings";
  const std::string before = Q(ratings);
  const HttpResponse again = Settle(lobby->port(), Placed(room, {2, 1, 3}));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(Receipt(again).duplicate());
  EXPECT_EQ(Q(ratings), before);
  EXPECT_EQ(Q("SELECT count(*) FROM match_players"), "6");
}

// Elo over three teams compares every pair by its placements, each pair's change scaled by
// 1/(T - 1): from 1500 each, first gets 32/2 * (1/2 + 1/2) = +16, second 0, third -16; the room
// sums to zero.
TEST_F(RatingsTest, EloOverThreeTeamsComparesEveryPair) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const v1::RoomAllocation room =
      Room(1, "", {{"a1", "a2", "a3"}, {"b1", "b2", "b3"}, {"c1", "c2", "c3"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 2, 3})).status, 200);
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT left(player_id, 1) || rating, ',' ORDER BY "
              "left(player_id, 1) || rating) FROM player_ratings JOIN modes USING (mode_id) "
              "WHERE mode = 'default'"),
            "a1516,b1500,c1484");
  EXPECT_EQ(Q("SELECT sum(rating_after - rating_before) FROM match_players"), "0");
  EXPECT_EQ(Q("SELECT string_agg(DISTINCT result, ',' ORDER BY result) FROM match_players"),
            "loss,win");
}

// A casual mode records matches and counts games, and moves no rating.
TEST_F(RatingsTest, ACasualModeRecordsMatchesAndMovesNoRating) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(
      PutMode(lobby->port(), "casual", R"({"rating": {"system": "elo"}, "rated": false})").status,
      201);
  const v1::RoomAllocation room = Room(1, "casual", {{"a"}, {"b"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 2})).status, 200);
  EXPECT_EQ(Q("SELECT string_agg(player_id || ':' || rating || '/' || games || '/' || wins, ' ' "
              "ORDER BY player_id) FROM player_ratings"),
            "a:1500/1/1 b:1500/1/0");
  EXPECT_EQ(Q("SELECT mode FROM matches"), "casual");
}

// A mode's declaration may change until a room is allocated in it; then it is fixed (a new
// season is a new mode), and declaring it the same again is fine.
TEST_F(RatingsTest, AModesDeclarationIsFixedOnceItHasARoom) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const std::string k16 = R"({"rating": {"system": "elo", "parameters": {"k": 16}}})";
  const std::string k24 = R"({"rating": {"system": "elo", "parameters": {"k": 24}}})";
  EXPECT_EQ(PutMode(lobby->port(), "ranked-s1", k16).status, 201);
  EXPECT_EQ(PutMode(lobby->port(), "ranked-s1", k16).status, 200);
  EXPECT_EQ(PutMode(lobby->port(), "ranked-s1", k24).status, 200) << "no room yet: may change";
  MustAllocateRoom(lobby->port(), Room(1, "ranked-s1", {{"a"}, {"b"}}));
  const HttpResponse refused = PutMode(lobby->port(), "ranked-s1", k16);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(Member(refused, "code"), "MODE_IN_USE");
  EXPECT_EQ(PutMode(lobby->port(), "ranked-s1", k24).status, 200) << "the same again";
  const HttpResponse read =
      HttpCall(lobby->port(), "GET", "/v1/modes/ranked-s1", {{"Authorization", "Bearer token-a"}});
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_NE(read.body.find("\"k\":24"), std::string::npos) << read.body;
  EXPECT_NE(read.body.find("\"initial_rating\":1500"), std::string::npos) << read.body;
  EXPECT_NE(read.body.find("\"in_use\":true"), std::string::npos) << read.body;
  EXPECT_EQ(PutMode(lobby->port(), "ranked-s2", k16).status, 201);
  // Glicko-2 rates two players: its shape is two teams of one, and a wider one is refused.
  EXPECT_EQ(PutMode(lobby->port(), "chess", R"({"rating": {"system": "glicko2"}})").status, 201);
  const HttpResponse wide = PutMode(
      lobby->port(), "chess2", R"({"rating": {"system": "glicko2"}, "shape": {"max_teams": 3}})");
  EXPECT_EQ(wide.status, 400) << wide.body;
  EXPECT_EQ(AllocateRoster(lobby->port(), Room(2, "chess", {{"a2", "b2"}, {"c2"}})).status, 400);
  // Not the admin: 401.
  EXPECT_EQ(HttpCall(lobby->port(), "PUT", "/v1/modes/other", JsonHeaders("token-a"), k16).status,
            401);
}

// A ladder cursor's text after `player_id`, whatever its bytes, as the lobby writes one.
std::string CursorAfter(const std::string& player_id) {
  return lobby::EncodeLadderCursor({.displayed = 1600, .player_id = player_id});
}

// The ladder pages best first by the displayed rating (Glicko-2's r - 2 RD here), a page at a
// time by its cursor, every player once; a cursor that is not one is 400, a mode not declared 404.
TEST_F(RatingsTest, TheLeaderboardPagesByTheDisplayedRating) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "chess", R"({"rating": {"system": "glicko2"}})").status, 201);
  // r - 2 RD: p1 1700 - 2*50 = 1600, p2 1800 - 2*150 = 1500, p3 1650 - 2*20 = 1610, p4 and p5 1500.
  const std::vector<std::tuple<std::string, double, double>> imports = {
      {"p1", 1700, 50}, {"p2", 1800, 150}, {"p3", 1650, 20}, {"p4", 1600, 50}, {"p5", 1600, 50}};
  for (const auto& [player, r, rd] : imports) {
    const HttpResponse imported =
        HttpCall(lobby->port(), "PUT", "/v1/players/" + player + "/ratings/chess",
                 JsonHeaders("admin-token"),
                 R"({"rating": )" + std::to_string(r) + R"(, "deviation": )" + std::to_string(rd) +
                     R"(, "volatility": 0.06})");
    ASSERT_EQ(imported.status, 200) << imported.body;
  }
  std::vector<std::string> order;
  std::string next;
  for (int page = 0; page < 5; ++page) {
    const HttpResponse r =
        HttpCall(lobby->port(), "GET",
                 "/v1/modes/chess/leaderboard?limit=2" + (next.empty() ? "" : "&after=" + next),
                 {{"Authorization", "Bearer token-a"}});
    ASSERT_EQ(r.status, 200) << r.body;
    v1::Leaderboard board;
    std::string error;
    ASSERT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &board, &error)) << error;
    for (const auto& e : board.entries()) order.push_back(e.player_id());
    next = board.next();
    if (next.empty()) break;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"p3", "p1", "p5", "p4", "p2"}))
      << "displayed desc, then id desc";
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/modes/chess/leaderboard?after=!!",
                     {{"Authorization", "Bearer token-a"}})
                .status,
            400);
  // A cursor's id must be a player id: bytes that are not UTF-8 were a 500 (PostgreSQL's 22021),
  // and a NUL a page after the id cut there.
  for (const std::string& id : {std::string("\xff\xfe"), std::string("p3\0zzz", 6)}) {
    const HttpResponse bad = HttpCall(
        lobby->port(), "GET", "/v1/modes/chess/leaderboard?limit=2&after=" + CursorAfter(id),
        {{"Authorization", "Bearer token-a"}});
    EXPECT_EQ(bad.status, 400) << bad.body;
  }
  // The control: the same cursor with a player id is a page.
  EXPECT_EQ(HttpCall(lobby->port(), "GET",
                     "/v1/modes/chess/leaderboard?limit=2&after=" + CursorAfter("p3"),
                     {{"Authorization", "Bearer token-a"}})
                .status,
            200);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/modes/chess/leaderboard?limit=0",
                     {{"Authorization", "Bearer token-a"}})
                .status,
            400);
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/modes/nope/leaderboard",
                     {{"Authorization", "Bearer token-a"}})
                .status,
            404);
}

// An imported rating is what the player's next room is rated from; an import is refused while
// the player is in a room (409 PLAYER_BUSY) and when the mode's system cannot take it (400).
TEST_F(RatingsTest, AnImportIsRefusedWhileThePlayerIsInARoom) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const auto import = [&](const std::string& player, const std::string& body) {
    return HttpCall(lobby->port(), "PUT", "/v1/players/" + player + "/ratings/default",
                    JsonHeaders("admin-token"), body);
  };
  ASSERT_EQ(import("vet", R"({"rating": 1700})").status, 200);
  EXPECT_EQ(import("vet", R"({"rating": 1700.5})").status, 400) << "Elo ratings are integers";
  EXPECT_EQ(HttpCall(lobby->port(), "PUT", "/v1/players/vet/ratings/default",
                     JsonHeaders("token-a"), R"({"rating": 1700})")
                .status,
            401);
  const v1::RoomAllocation room = Room(1, "", {{"vet"}, {"new"}});
  MustAllocateRoom(lobby->port(), room);
  const HttpResponse busy = import("vet", R"({"rating": 2000})");
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_EQ(Member(busy, "code"), "PLAYER_BUSY");
  EXPECT_EQ(Q("SELECT rating_at_allocation FROM battle_room_seats WHERE player_id = 'vet'"),
            "1700");
  // 1700 against 1500, the favourite wins: E = 0.7597, +round(32 * 0.2403) = +8.
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 2})).status, 200);
  EXPECT_EQ(Q("SELECT rating FROM player_ratings WHERE player_id = 'vet'"), "1708");
  EXPECT_EQ(import("vet", R"({"rating": 2000})").status, 200) << "free again";
  EXPECT_EQ(Q("SELECT rating || '/' || games FROM player_ratings WHERE player_id = 'vet'"),
            "2000/1")
      << "an import keeps the counts";
}

// A mode whose parameters leave the range its system's arithmetic is proven for is refused when it
// is declared (issue 49: a glicko2 tau of 1e-30 was accepted, and each of its rooms then spun for
// ever inside its settlement's transaction).
TEST_F(RatingsTest, AModeBeyondTheRangeItsMathConvergesInIsRefused) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const HttpResponse tiny = PutMode(
      lobby->port(), "blitz", R"({"rating": {"system": "glicko2", "parameters": {"tau": 1e-30}}})");
  EXPECT_EQ(tiny.status, 400) << tiny.body;
  EXPECT_NE(Member(tiny, "detail").find("parameters.tau"), std::string::npos) << tiny.body;
  EXPECT_EQ(Q("SELECT count(*) FROM modes WHERE mode = 'blitz'"), "0");
  for (const char* body :
       {R"({"rating": {"system": "elo", "parameters": {"k": 1e300}}})",
        R"({"rating": {"system": "elo", "parameters": {"initial_rating": 3e9}}})",
        R"({"rating": {"system": "openskill", "parameters": {"sigma": 1e308}}})",
        R"({"rating": {"system": "glicko2", "parameters": {"initial_volatility": 1e-300}}})"}) {
    EXPECT_EQ(PutMode(lobby->port(), "blitz", body).status, 400) << body;
  }
  ASSERT_EQ(PutMode(lobby->port(), "blitz",
                    R"({"rating": {"system": "glicko2", "parameters": {"tau": 0.3}}})")
                .status,
            201);
  const v1::RoomAllocation room = Room(1, "blitz", {{"a"}, {"b"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 2})).status, 200);
}

// A mode an earlier build stored with a parameter beyond today's ranges (an Elo K of 2000, when
// up to 1000 may be declared now) still settles and takes imports, rated by the parameters it
// was declared with: the ranges are for new declarations, and every iteration is bounded anyway.
TEST_F(RatingsTest, AModeStoredBeyondTodaysRangesStillSettles) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "legacy", R"({"rating": {"system": "elo"}})").status, 201);
  db_->Exec(
      "UPDATE modes SET parameters = jsonb_set(parameters, '{k}', '2000') "
      "WHERE mode = 'legacy'");
  EXPECT_EQ(
      PutMode(lobby->port(), "fresh", R"({"rating": {"system": "elo", "parameters": {"k": 2000}}})")
          .status,
      400)
      << "a new declaration keeps today's range";
  const v1::RoomAllocation room = Room(1, "legacy", {{"a"}, {"b"}});
  MustAllocateRoom(lobby->port(), room);
  const HttpResponse settled = Settle(lobby->port(), Placed(room, {1, 2}));
  ASSERT_EQ(settled.status, 200) << settled.body;
  // Even odds, K 2000: 2000 * (1 - 1/2) = 1000 points each way.
  EXPECT_EQ(Q("SELECT string_agg(player_id || ':' || rating, ' ' ORDER BY player_id) FROM "
              "player_ratings"),
            "a:2500 b:500");
  const HttpResponse imported = HttpCall(lobby->port(), "PUT", "/v1/players/c/ratings/legacy",
                                         JsonHeaders("admin-token"), R"({"rating": 1700})");
  EXPECT_EQ(imported.status, 200) << imported.body;
}

// What an import must be (issue 49): an Elo of 3e9 showed as the int32 -1294967296, 1e308 as 0 and
// its next room's elo_before as INT64_MIN; an OpenSkill sigma of 1e308 made the displayed rating
// the JSON string "-Infinity". Each is now 400 naming the field, and the bounds themselves show as
// they are.
TEST_F(RatingsTest, ImportsBeyondTheBoundsOfTheirSystemAreRefused) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "ffa", R"({"rating": {"system": "openskill"}})").status, 201);
  const auto import = [&](const std::string& mode, const std::string& body) {
    return HttpCall(lobby->port(), "PUT", "/v1/players/vet/ratings/" + mode,
                    JsonHeaders("admin-token"), body);
  };
  const std::vector<std::pair<std::string, std::string>> refused{
      {"default", R"({"rating": 3e9})"},
      {"default", R"({"rating": 1e308})"},
      {"default", R"({"rating": -2147483649})"},
      {"ffa", R"({"rating": 25, "deviation": 1e308})"},
      {"ffa", R"({"rating": 25, "deviation": 1e-300})"},
      {"ffa", R"({"rating": 1e300, "deviation": 8})"},
  };
  for (const auto& [mode, body] : refused) {
    const HttpResponse r = import(mode, body);
    EXPECT_EQ(r.status, 400) << mode << " " << body << ": " << r.body;
  }
  EXPECT_EQ(Q("SELECT count(*) FROM player_ratings WHERE player_id = 'vet'"), "0");

  ASSERT_EQ(import("default", R"({"rating": 1000000})").status, 200);
  ASSERT_EQ(import("ffa", R"({"rating": 25, "deviation": 1000000})").status, 200);
  const HttpResponse player =
      HttpCall(lobby->port(), "GET", "/v1/players/vet", {{"Authorization", "Bearer token-a"}});
  ASSERT_EQ(player.status, 200) << player.body;
  v1::Player p;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(player.body, wire::BodyFormat::kJson, &p, &error)) << error;
  EXPECT_EQ(p.elo(), 1000000);
  for (const auto& r : p.ratings()) {
    if (r.mode() == "ffa") {
      EXPECT_EQ(r.displayed(), 25 - 3e6);
    }
  }
  EXPECT_EQ(player.body.find("Infinity"), std::string::npos) << player.body;
}

// An import accepted while a released room of the player still waits (issue 49): the room was
// rated from the rating it was allocated with, and its change lands on the imported rating, as on
// any rating the player has when a late room settles (docs/modes.md, "The compensation rule").
// The import says where the player stands; the match, played before it and settled after, still
// counts once. With tau > 0 the room grew sigma from 0.01 (the rating at allocation) to about
// 0.0839: the old rule multiplied the imported sigma 8 by that ratio, to 67.1; the room now adds
// its variance, 0.0839^2 - 0.01^2, to 8^2.
TEST_F(RatingsTest, AnImportWhileAReleasedRoomWaitsIsWhereTheRoomLands) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(PutMode(lobby->port(), "duel",
                    R"({"rating": {"system": "openskill", "parameters": {"tau": 0.0833}}})")
                .status,
            201);
  const auto import = [&](const std::string& body) {
    return HttpCall(lobby->port(), "PUT", "/v1/players/p/ratings/duel", JsonHeaders("admin-token"),
                    body);
  };
  ASSERT_EQ(import(R"({"rating": 25, "deviation": 0.01})").status, 200);
  const v1::RoomAllocation room = Room(1, "duel", {{"p"}, {"q"}});
  MustAllocateRoom(lobby->port(), room);
  ASSERT_EQ(
      HttpCall(lobby->port(), "POST", "/v1/rooms/1:release", JsonHeaders("admin-token")).status,
      200);
  EXPECT_EQ(Q("SELECT rating_at_allocation FROM battle_room_seats WHERE player_id = 'p'"), "25");
  const HttpResponse reimported = import(R"({"rating": 30, "deviation": 8})");
  ASSERT_EQ(reimported.status, 200)
      << "a released room does not hold its players: " << reimported.body;

  ASSERT_EQ(Settle(lobby->port(), Placed(room, {1, 2})).status, 200);
  const auto [mu, sigma] = MuSigma("p", "duel");
  EXPECT_GT(mu, 30) << "the win counts, on top of the import";
  EXPECT_LT(mu, 30.01) << "a player as sure as sigma 0.01 moves little";
  EXPECT_GT(sigma, 8);
  EXPECT_LE(sigma, std::sqrt(64 + 0.0833 * 0.0833)) << "the room added at most tau^2 of variance";
  EXPECT_EQ(Q("SELECT rating_before FROM match_players WHERE player_id = 'p'"), "30")
      << "the room landed on the imported rating";
}

// Player ids are strings of 1 to 64 bytes of UTF-8; an integer is its decimal string, so a
// roster given with the number 42 settles with the string "42". Every endpoint and the feed show
// the string; a path takes it percent-encoded.
TEST_F(RatingsTest, PlayerIdsAreStringsAndAnIntegerIsItsDecimalString) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const std::string uuid = "550e8400-e29b-41d4-a716-446655440000";
  const std::string steam = "steam:76561197960287930";
  const std::string kanji = "\xe5\x90\x8d\xe5\x89\x8d";  // 名前
  const std::string allocation = R"({"room_id": 1, "node_id": "node-a", "seats": [
      {"player_id": ")" + uuid + R"(", "team": 1}, {"player_id": 42, "team": 1},
      {"player_id": ")" + steam + R"(", "team": 2}, {"player_id": ")" +
                                 kanji + R"(", "team": 2}]})";
  const HttpResponse allocated =
      HttpCall(lobby->port(), "POST", "/v1/rooms", JsonHeaders("admin-token"), allocation);
  ASSERT_EQ(allocated.status, 201) << allocated.body;
  const std::string result = R"({"room_id": 1, "outcome": "SETTLED", "winner_team": 2,
      "ended_at_ms": 1700000000000, "players": [
      {"player_id": ")" + uuid +
                             R"(", "team": 1}, {"player_id": "42", "team": 1},
      {"player_id": ")" + steam +
                             R"(", "team": 2}, {"player_id": ")" + kanji + R"(", "team": 2}]})";
  const HttpResponse settled =
      HttpCall(lobby->port(), "POST", "/v1/settlements", JsonHeaders("token-a"), result);
  ASSERT_EQ(settled.status, 200) << settled.body;
  EXPECT_EQ(Q("SELECT rating FROM player_ratings WHERE player_id = '" + steam + "'"), "1516");
  EXPECT_EQ(Q("SELECT rating FROM player_ratings WHERE player_id = '42'"), "1484");
  const HttpResponse read = HttpCall(lobby->port(), "GET", "/v1/players/steam%3A76561197960287930",
                                     {{"Authorization", "Bearer token-a"}});
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_NE(read.body.find("\"player_id\":\"" + steam + "\""), std::string::npos) << read.body;
  EXPECT_NE(read.body.find("\"elo\":1516"), std::string::npos) << read.body;
  EXPECT_EQ(HttpCall(lobby->port(), "GET", "/v1/players/%E5%90%8D%E5%89%8D",
                     {{"Authorization", "Bearer token-a"}})
                .status,
            200);
  // The feed's event: the mode, and each player's id and rating change.
  const std::string payload = Q("SELECT payload::text FROM settlement_events");
  EXPECT_NE(payload.find("\"mode\": \"default\""), std::string::npos) << payload;
  EXPECT_NE(payload.find("\"player_id\": \"" + uuid + "\""), std::string::npos) << payload;
  EXPECT_NE(payload.find("\"rating_after\": 1516"), std::string::npos) << payload;
  EXPECT_NE(payload.find("\"elo_after\": 1484"), std::string::npos) << payload;
}

// Bad input gets 400 (or 422 for a roster that does not match) naming the field, and leaves
// nothing written: one case each of issue 39's list.
struct BadInput {
  std::string name;
  std::string path;  // "/v1/rooms" or "/v1/settlements"
  std::function<std::string()> body;
  int status;
  std::string field;  // in the problem's detail
};

class BadInputTest : public RatingsTest, public ::testing::WithParamInterface<BadInput> {};

std::string Json(const google::protobuf::Message& m) {
  return wire::EncodeBody(m, wire::BodyFormat::kJson).value();
}

// Room 1 of the default mode, teams of two (players 11, 12 against 13, 14), allocated before each
// settlement case.
v1::RoomAllocation Roster() { return MakeAllocation(1, "node-a", 11, 4); }

v1::BattleResult WithPlacements(std::vector<std::pair<uint32_t, uint32_t>> ranks) {
  v1::BattleResult r = ResultOf(Roster(), 0);
  r.clear_winner_team();
  for (const auto& [team, rank] : ranks) {
    v1::TeamPlacement* p = r.add_placements();
    p->set_team(team);
    p->set_rank(rank);
  }
  return r;
}

v1::RoomAllocation AllocationWith(std::function<void(v1::RoomAllocation&)> change) {
  v1::RoomAllocation a = MakeAllocation(2, "node-a", 21, 4);
  change(a);
  return a;
}

TEST_P(BadInputTest, IsRefusedNamingTheFieldAndChangesNothing) {
  const BadInput& c = GetParam();
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocateRoom(lobby->port(), Roster());
  ASSERT_EQ(PutMode(lobby->port(), "one-on-one",
                    R"({"rating": {"system": "elo"}, "shape": {"max_team_size": 1}})")
                .status,
            201);
  const DbSnapshot before = Snapshot();
  const std::string players = Q("SELECT count(*) FROM players");
  const HttpResponse r =
      HttpCall(lobby->port(), "POST", c.path,
               JsonHeaders(c.path == "/v1/rooms" ? "admin-token" : "token-a"), c.body());
  EXPECT_EQ(r.status, c.status) << r.body;
  EXPECT_NE(Member(r, "detail").find(c.field), std::string::npos) << r.body;
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Q("SELECT count(*) FROM players"), players);
}

INSTANTIATE_TEST_SUITE_P(
    Issue39, BadInputTest,
    ::testing::Values(
        BadInput{"TeamMissingFromThePlacements", "/v1/settlements",
                 [] {
                   return Json(WithPlacements({{1, 1}}));
                 },
                 400, "placements"},
        BadInput{"TeamRankedTwice", "/v1/settlements",
                 [] {
                   return Json(WithPlacements({{1, 1}, {1, 2}}));
                 },
                 400, "ranked twice"},
        BadInput{"RankOutOfRange", "/v1/settlements",
                 [] {
                   return Json(WithPlacements({{1, 1}, {2, 3}}));
                 },
                 400, "rank"},
        BadInput{"NeitherPlacementsNorWinner", "/v1/settlements",
                 [] {
                   v1::BattleResult r = ResultOf(Roster(), 0);
                   r.clear_winner_team();
                   return Json(r);
                 },
                 400, "winner_team"},
        BadInput{"EmptyTeam", "/v1/rooms",
                 [] {
                   return Json(AllocationWith([](v1::RoomAllocation& a) {
                     for (auto& s : *a.mutable_seats()) {
                       if (s.team() == 2) s.set_team(3);
                     }
                   }));
                 },
                 400, "team 2 is empty"},
        BadInput{
            "ModeNotDeclared", "/v1/rooms",
            [] { return Json(AllocationWith([](v1::RoomAllocation& a) { a.set_mode("nope"); })); },
            400, "mode"},
        BadInput{"ShapeTheModeDoesNotAccept", "/v1/rooms",
                 [] {
                   return Json(
                       AllocationWith([](v1::RoomAllocation& a) { a.set_mode("one-on-one"); }));
                 },
                 400, "seats"},
        BadInput{"EmptyPlayerId", "/v1/rooms",
                 [] {
                   return Json(AllocationWith(
                       [](v1::RoomAllocation& a) { a.mutable_seats(0)->set_player_id(""); }));
                 },
                 400, "player_id"},
        BadInput{"PlayerIdOf65Bytes", "/v1/rooms",
                 [] {
                   return Json(AllocationWith([](v1::RoomAllocation& a) {
                     a.mutable_seats(0)->set_player_id(std::string(65, 'p'));
                   }));
                 },
                 400, "64"},
        BadInput{"PlayerIdNotUtf8", "/v1/rooms",
                 [] {
                   return std::string(R"({"room_id": 2, "node_id": "node-a", "seats": [)") +
                          R"({"player_id": "a)" + "\xff" +
                          R"(", "team": 1}, {"player_id": "b", "team": 2}]})";
                 },
                 400, "UTF-8"},
        BadInput{"SamePlayerOnTwoTeams", "/v1/rooms",
                 [] {
                   return Json(AllocationWith(
                       [](v1::RoomAllocation& a) { a.mutable_seats(3)->set_player_id("21"); }));
                 },
                 400, "two seats"},
        BadInput{"RosterOfAnotherShape", "/v1/settlements",
                 [] {
                   v1::BattleResult r = ResultOf(Roster(), 1);
                   r.mutable_players(1)->set_team(2);  // 1v3 against the allocated 2v2
                   return Json(r);
                 },
                 422, "roster"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.name; });

}  // namespace
}  // namespace verdict::testing
