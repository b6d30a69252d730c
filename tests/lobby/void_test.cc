// Voids of settled matches through a real verdict-lobby and PostgreSQL (docs/design.md §5,
// "Voiding a match"): `compensate` gives the compensation rule's arithmetic, worked by hand;
// `replay` leaves every rating as a ladder that never played the match has it, in every system
// (the oracle is that ladder, settled in a mode of its own); a void is made once, whoever asks
// and however often; bad voids change nothing; and every player's chain of ratings stays
// continuous (the fault suite's invariant, tests/fault/invariants.h), which a replay that
// forgets a match breaks (the negative control).
#include <gtest/gtest.h>

#include <latch>
#include <sstream>
#include <thread>

#include "tests/fault/invariants.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

class VoidTest : public LobbyFixture {
 protected:
  void PutMode(uint16_t port, const std::string& mode, const std::string& rating_json) {
    const HttpResponse r = HttpCall(port, "PUT", "/v1/modes/" + mode, JsonHeaders("admin-token"),
                                    "{\"rating\": " + rating_json + "}");
    ASSERT_EQ(r.status, 201) << r.body;
  }

  // Allocates `room` in `mode`, `winner` against `loser`, and settles it with `winner` first;
  // returns its match id.
  uint64_t Duel(uint16_t port, uint64_t room, const std::string& mode, const std::string& winner,
                const std::string& loser) {
    v1::RoomAllocation a;
    a.set_room_id(room);
    a.set_node_id("node-a");
    a.set_mode(mode);
    for (const std::string& player : {winner, loser}) {
      v1::Seat* seat = a.add_seats();
      seat->set_player_id(player);
      seat->set_team(static_cast<uint32_t>(a.seats_size()));
    }
    const HttpResponse allocated = AllocateRoster(port, a);
    EXPECT_EQ(allocated.status, 201) << allocated.body;
    const HttpResponse settled = Settle(port, ResultOf(a, 1));
    EXPECT_EQ(settled.status, 200) << settled.body;
    return Receipt(settled).match_id();
  }

  HttpResponse Void(uint16_t port, const std::string& what, const std::string& policy,
                    const std::string& token = "admin-token") {
    return HttpCall(port, "POST", what + ":void", JsonHeaders(token),
                    "{\"reason\": \"a cheater\", \"policy\": \"" + policy + "\"}");
  }

  static v1::MatchVoid Voided(const HttpResponse& r) {
    v1::MatchVoid v;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &v, &error)) << error << r.body;
    return v;
  }

  // rating/deviation/volatility games/wins/losses/draws/placements of `player` in `mode`.
  std::vector<double> Rating(const std::string& player, const std::string& mode) const {
    const std::string row =
        Q("SELECT concat_ws(' ', rating, deviation, volatility, games, wins, losses, draws, "
          "placements) FROM player_ratings JOIN modes USING (mode_id) WHERE mode = '" +
          mode + "' AND player_id = '" + player + "'");
    std::vector<double> values;
    std::istringstream in(row);
    for (double v; in >> v;) values.push_back(v);
    EXPECT_EQ(values.size(), 8u) << player << " in " << mode << ": " << row;
    return values;
  }

  std::vector<std::string> ChainViolations() const {
    auto conn = db_->Connect();
    pqxx::read_transaction tx(*conn);
    return RatingChainViolations(tx);
  }

  // Counts a refused void must leave as they were.
  std::string VoidCounts() const {
    return Q(
        "SELECT concat_ws('/', (SELECT count(*) FROM match_voids), "
        "(SELECT count(*) FROM match_void_players), "
        "(SELECT count(*) FROM match_rating_revisions))");
  }
};

// Elo, K = 32. Match 1: a beats b from 1500 each, +16 and -16. Match 2: c (1500) beats a (1516):
// a's expected score is 1/(1 + 10^((1500 - 1516)/400)) = 0.52298, so a moves by
// round(32 (0 - 0.52298)) = -17, to 1499, and c to 1517. Voiding match 1 by compensation moves
// each of its players by before - after from where it stands now: a 1499 - 16 = 1483, b 1484 + 16
// = 1500; c keeps match 2's 1517. a keeps one game (a loss), b none.
TEST_F(VoidTest, CompensateMovesEachPlayerByTheInverseOfItsChange) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  PutMode(lobby->port(), "duel", R"({"system": "elo", "parameters": {"k": 32}})");
  const uint64_t first = Duel(lobby->port(), 1, "duel", "a", "b");
  Duel(lobby->port(), 2, "duel", "c", "a");
  ASSERT_EQ(Rating("a", "duel"), (std::vector<double>{1499, 0, 0, 2, 1, 1, 0, 3}));

  const HttpResponse r = Void(lobby->port(), "/v1/matches/" + std::to_string(first), "compensate");
  ASSERT_EQ(r.status, 200) << r.body;
  const v1::MatchVoid voided = Voided(r);
  EXPECT_FALSE(voided.duplicate());
  EXPECT_EQ(voided.policy(), "compensate");
  EXPECT_EQ(voided.reason(), "a cheater");
  EXPECT_EQ(voided.room_id(), 1u);
  EXPECT_EQ(voided.mode(), "duel");
  ASSERT_EQ(voided.players_size(), 2);
  EXPECT_EQ(voided.players(0).player_id(), "a");
  EXPECT_EQ(voided.players(0).rating_before(), 1499);
  EXPECT_EQ(voided.players(0).rating_after(), 1483);
  EXPECT_EQ(voided.players(1).player_id(), "b");
  EXPECT_EQ(voided.players(1).rating_before(), 1484);
  EXPECT_EQ(voided.players(1).rating_after(), 1500);

  EXPECT_EQ(Rating("a", "duel"), (std::vector<double>{1483, 0, 0, 1, 0, 1, 0, 2}));
  EXPECT_EQ(Rating("b", "duel"), (std::vector<double>{1500, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Rating("c", "duel"), (std::vector<double>{1517, 0, 0, 1, 1, 0, 0, 1}));
  // The match stays in the history, marked voided; the feed tells it.
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "2");
  EXPECT_EQ(Q("SELECT reason || '/' || policy FROM match_voids WHERE match_id = " +
              std::to_string(first)),
            "a cheater/compensate");
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events WHERE payload->>'type' = 'battle.voided' "
              "AND (payload->>'match_id')::bigint = " +
              std::to_string(first)),
            "1");
  EXPECT_EQ(ChainViolations(), std::vector<std::string>());

  // A settlement after the void lands on the rating the void left, and the chain holds.
  Duel(lobby->port(), 3, "duel", "a", "b");
  EXPECT_EQ(ChainViolations(), std::vector<std::string>());
}

// A void takes the match's games off its players' counts, and with them the games a provisional
// mode counts: a player who reached the mode's provisional games with the voided match is
// provisional again, and off the ladder (issue 51: provisional players).
TEST_F(VoidTest, AVoidedGameCountsTowardTheProvisionalGamesAgain) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const HttpResponse declared =
      HttpCall(lobby->port(), "PUT", "/v1/modes/duel", JsonHeaders("admin-token"),
               R"({"rating": {"system": "elo"}, "provisional_games": 1})");
  ASSERT_EQ(declared.status, 201) << declared.body;
  const uint64_t match = Duel(lobby->port(), 1, "duel", "a", "b");
  ASSERT_EQ(
      Q("SELECT string_agg(player_id || ':' || provisional, ',' ORDER BY player_id) "
        "FROM player_ratings WHERE mode_id = (SELECT mode_id FROM modes WHERE mode = 'duel')"),
      "a:false,b:false");

  ASSERT_EQ(Void(lobby->port(), "/v1/matches/" + std::to_string(match), "compensate").status, 200);
  EXPECT_EQ(Q("SELECT string_agg(player_id || ':' || provisional || ':' || provisional_left, ',' "
              "ORDER BY player_id) FROM player_ratings "
              "WHERE mode_id = (SELECT mode_id FROM modes WHERE mode = 'duel')"),
            "a:true:1,b:true:1");
  const HttpResponse ladder =
      HttpCall(lobby->port(), "GET", "/v1/modes/duel/leaderboard", JsonHeaders("admin-token"));
  ASSERT_EQ(ladder.status, 200) << ladder.body;
  EXPECT_EQ(ladder.body.find("\"player_id\""), std::string::npos) << ladder.body;
}

// The oracle: settle A, B, C and D sharing players in one mode and void B by replay; settle only
// A, C and D in a fresh mode of the same declaration. Every player's rating, deviation,
// volatility and counts agree to 1e-9, in every system; the history's chain is continuous, the
// values the replay changed are kept, and a redelivery of B's result is still a duplicate that
// rates nothing.
TEST_F(VoidTest, ReplayLeavesTheRatingsOfALadderThatNeverPlayedTheMatch) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const std::vector<std::pair<std::string, std::string>> systems = {
      {"elo", R"({"system": "elo", "parameters": {"k": 32}})"},
      {"openskill", R"({"system": "openskill"})"},
      {"glicko2", R"({"system": "glicko2"})"},
  };
  uint64_t room = 100;
  for (const auto& [name, declaration] : systems) {
    SCOPED_TRACE(name);
    const std::string played = name + "-played", oracle = name + "-oracle";
    PutMode(lobby->port(), played, declaration);
    PutMode(lobby->port(), oracle, declaration);
    // A: p1 beats p2. B (voided): p2 beats p3. C: p3 beats p1. D: p4 beats p2. B's players are p2
    // and p3; C shares p3 and brings p1, D shares p2 and brings p4: both are rated again.
    Duel(lobby->port(), ++room, played, "p1", "p2");
    const uint64_t b_room = ++room;
    const uint64_t b = Duel(lobby->port(), b_room, played, "p2", "p3");
    Duel(lobby->port(), ++room, played, "p3", "p1");
    Duel(lobby->port(), ++room, played, "p4", "p2");
    Duel(lobby->port(), ++room, oracle, "p1", "p2");
    Duel(lobby->port(), ++room, oracle, "p3", "p1");
    Duel(lobby->port(), ++room, oracle, "p4", "p2");

    const HttpResponse r = Void(lobby->port(), "/v1/matches/" + std::to_string(b), "replay");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Voided(r).matches_replayed(), 2u);
    EXPECT_EQ(Voided(r).players_size(), 4) << r.body;
    for (const std::string player : {"p1", "p2", "p3", "p4"}) {
      const std::vector<double> got = Rating(player, played), want = Rating(player, oracle);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << player << i;
    }
    EXPECT_EQ(ChainViolations(), std::vector<std::string>());
    EXPECT_EQ(Q("SELECT count(DISTINCT match_id) FROM match_rating_revisions "
                "WHERE void_match_id = " +
                std::to_string(b)),
              "2");

    // B's receipt stays: its result again is a duplicate of the original match, rating nothing.
    const std::string before =
        Q("SELECT string_agg(rating::text, ',' ORDER BY player_id) "
          "FROM player_ratings");
    v1::RoomAllocation roster;
    roster.set_room_id(b_room);
    roster.set_node_id("node-a");
    for (const std::string player : {"p2", "p3"}) {
      v1::Seat* seat = roster.add_seats();
      seat->set_player_id(player);
      seat->set_team(static_cast<uint32_t>(roster.seats_size()));
    }
    const HttpResponse again = Settle(lobby->port(), ResultOf(roster, 1));
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_TRUE(Receipt(again).duplicate());
    EXPECT_EQ(Receipt(again).match_id(), b);
    EXPECT_EQ(Q("SELECT string_agg(rating::text, ',' ORDER BY player_id) FROM player_ratings"),
              before);
  }
}

// A void of a match voided before answers the first void, by match or by room, whatever policy it
// asks; two voids racing at two lobbies make one.
TEST_F(VoidTest, ASecondVoidAnswersTheFirstAndChangesNothing) {
  auto one = StartLobby();
  auto two = StartLobby();
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  PutMode(one->port(), "duel", R"({"system": "elo"})");
  Duel(one->port(), 1, "duel", "a", "b");
  const uint64_t match = Duel(one->port(), 2, "duel", "b", "c");
  Duel(one->port(), 3, "duel", "c", "a");

  std::latch start(2);
  HttpResponse answers[2];
  std::thread racers[2];
  for (int i = 0; i < 2; ++i) {
    racers[i] = std::thread([&, i] {
      start.arrive_and_wait();
      answers[i] =
          Void((i == 0 ? one : two)->port(), "/v1/matches/" + std::to_string(match), "replay");
    });
  }
  for (std::thread& t : racers) t.join();
  ASSERT_EQ(answers[0].status, 200) << answers[0].body;
  ASSERT_EQ(answers[1].status, 200) << answers[1].body;
  EXPECT_NE(Voided(answers[0]).duplicate(), Voided(answers[1]).duplicate())
      << answers[0].body << answers[1].body;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_events WHERE payload->>'type' = 'battle.voided'"),
            "1");
  const v1::MatchVoid first = Voided(answers[Voided(answers[0]).duplicate() ? 1 : 0]);

  const DbSnapshot snapshot = Snapshot();
  const std::string counts = VoidCounts();
  const HttpResponse again = Void(two->port(), "/v1/rooms/2", "compensate");
  ASSERT_EQ(again.status, 200) << again.body;
  v1::MatchVoid expected = first;
  expected.set_duplicate(true);
  EXPECT_EQ(Voided(again).DebugString(), expected.DebugString());
  EXPECT_EQ(Snapshot(), snapshot);
  EXPECT_EQ(VoidCounts(), counts);
  EXPECT_EQ(ChainViolations(), std::vector<std::string>());
}

// A void and the settlement of a room of an affected player, racing: both hold, in either order,
// and every chain stays continuous. The test holds the player's row lock while both requests
// queue behind it (seen in pg_stat_activity, not timed), one first, then the other, and lets them
// go: the queue's order is the order they take the player. When the settlement goes first, its
// match is new to the void's set, and brings a player the void had not locked: the void takes its
// locks again, all of them.
TEST_F(VoidTest, AVoidAndASettlementOfAnAffectedPlayerBothHold) {
  auto lobby = StartLobby({"--lock-timeout-ms", "20000", "--statement-timeout-ms", "30000"});
  ASSERT_NE(lobby, nullptr);
  PutMode(lobby->port(), "duel", R"({"system": "openskill"})");
  uint64_t room = 10;
  for (const bool void_first : {true, false}) {
    SCOPED_TRACE(void_first ? "the void first" : "the settlement first");
    const std::string a = void_first ? "a1" : "a2", b = a + "b", c = a + "c", d = a + "d";
    const uint64_t voided = Duel(lobby->port(), ++room, "duel", a, b);
    Duel(lobby->port(), ++room, "duel", d, a);
    v1::RoomAllocation pending;
    pending.set_room_id(++room);
    pending.set_node_id("node-a");
    pending.set_mode("duel");
    for (const std::string& player : {a, c}) {
      v1::Seat* seat = pending.add_seats();
      seat->set_player_id(player);
      seat->set_team(static_cast<uint32_t>(pending.seats_size()));
    }
    ASSERT_EQ(AllocateRoster(lobby->port(), pending).status, 201);

    auto holder = db_->Connect();
    pqxx::work held(*holder);
    held.exec("SELECT 1 FROM players WHERE player_id = '" + a + "' FOR UPDATE");
    const auto waiting = [&](int n) {
      return WaitUntil([&] {
        return Q("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND wait_event_type = 'Lock'") == std::to_string(n);
      });
    };
    HttpResponse void_reply, settle_reply;
    std::thread first, second;
    const auto start_void = [&] {
      return std::thread([&] {
        void_reply = Void(lobby->port(), "/v1/matches/" + std::to_string(voided), "replay");
      });
    };
    const auto start_settle = [&] {
      return std::thread([&] { settle_reply = Settle(lobby->port(), ResultOf(pending, 1)); });
    };
    first = void_first ? start_void() : start_settle();
    ASSERT_TRUE(waiting(1));
    second = void_first ? start_settle() : start_void();
    ASSERT_TRUE(waiting(2));
    held.commit();
    first.join();
    second.join();
    ASSERT_EQ(void_reply.status, 200) << void_reply.body;
    ASSERT_EQ(settle_reply.status, 200) << settle_reply.body;
    EXPECT_EQ(Voided(void_reply).matches_replayed(), void_first ? 1u : 2u) << void_reply.body;
    EXPECT_EQ(ChainViolations(), std::vector<std::string>());
  }
}

// Each bad void is refused with its own code, and writes nothing.
TEST_F(VoidTest, BadVoidsAreRefusedAndChangeNothing) {
  auto lobby = StartLobby({"--void-replay-limit", "1"});
  ASSERT_NE(lobby, nullptr);
  PutMode(lobby->port(), "duel", R"({"system": "elo"})");
  const uint64_t first = Duel(lobby->port(), 1, "duel", "a", "b");
  Duel(lobby->port(), 2, "duel", "b", "c");
  Duel(lobby->port(), 3, "duel", "c", "a");
  MustAllocate(lobby->port(), 4);
  v1::BattleResult aborted = MakeResult(4);
  aborted.set_outcome(v1::ABORTED);
  aborted.set_winner_team(0);
  ASSERT_EQ(Settle(lobby->port(), aborted).status, 200);
  const std::string match = "/v1/matches/" + std::to_string(first);

  const DbSnapshot snapshot = Snapshot();
  const std::string counts = VoidCounts();
  struct Case {
    std::string path, policy, token;
    int status;
    std::string code;
  };
  const Case cases[] = {
      {"/v1/matches/999", "replay", "admin-token", 404, "NOT_FOUND"},
      {"/v1/rooms/999", "compensate", "admin-token", 404, "NOT_FOUND"},
      {"/v1/rooms/4", "compensate", "admin-token", 409, "NOT_VOIDABLE"},
      {match, "rewind", "admin-token", 400, "INVALID_ARGUMENT"},
      {match, "replay", "token-a", 401, "UNAUTHENTICATED"},
      // Two later matches to rate again, over the limit of one.
      {match, "replay", "admin-token", 409, "VOID_TOO_LARGE"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.policy);
    const HttpResponse r = Void(lobby->port(), c.path, c.policy, c.token);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(Member(r, "code"), c.code);
    if (c.code == "VOID_TOO_LARGE") {
      EXPECT_NE(Member(r, "detail").find("would rate again 2 later matches"), std::string::npos)
          << r.body;
    }
    EXPECT_EQ(Snapshot(), snapshot);
    EXPECT_EQ(VoidCounts(), counts);
  }
  const HttpResponse no_reason = HttpCall(lobby->port(), "POST", match + ":void",
                                          JsonHeaders("admin-token"), R"({"policy": "replay"})");
  EXPECT_EQ(no_reason.status, 400) << no_reason.body;
  EXPECT_EQ(Snapshot(), snapshot);
  EXPECT_EQ(VoidCounts(), counts);
}

// The negative control of the chain's invariant: a replay that forgets the last match of its set
// (a test-only failpoint) leaves that match rated from a rating the player no longer had, and
// the check names it.
TEST_F(VoidTest, AReplayThatForgetsALaterMatchBreaksTheChain) {
  auto lobby = StartLobby({}, {{"VERDICT_FAILPOINTS", "void.replay_forget_one=error"}});
  ASSERT_NE(lobby, nullptr);
  PutMode(lobby->port(), "duel", R"({"system": "elo"})");
  const uint64_t voided = Duel(lobby->port(), 1, "duel", "a", "b");
  Duel(lobby->port(), 2, "duel", "c", "a");
  const uint64_t forgotten = Duel(lobby->port(), 3, "duel", "a", "d");
  const HttpResponse r = Void(lobby->port(), "/v1/matches/" + std::to_string(voided), "replay");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<std::string> broken = ChainViolations();
  ASSERT_FALSE(broken.empty());
  EXPECT_NE(broken.front().find("match " + std::to_string(forgotten)), std::string::npos)
      << broken.front();
}

}  // namespace
}  // namespace verdict::testing
