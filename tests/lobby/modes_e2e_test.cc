// A mode's life over seasons, through a real verdict-lobby and PostgreSQL (docs/modes.md):
// provisional players, who are shown but left off the ladder until they have played the mode's
// provisional games, and the ladder's index that keeps a page one range of it; a mode closed to
// new rooms whose ladder stays readable; a season seeded from the one before by a soft reset;
// ratings that age while their players are idle, at the next match and by the maintenance's
// pass; and the refusals of bad declarations, each leaving nothing written. The Elo arithmetic is
// quoted where it is used (E = 1 / (1 + 10^((Rb - Ra) / 400)), each change round(K (S - E))).
#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "lobby/pg_ladder.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

class ModesTest : public LobbyFixture {
 protected:
  // GET /v1/modes/{mode}/leaderboard?QUERY, decoded.
  v1::Leaderboard Ladder(uint16_t port, const std::string& mode, const std::string& query = "") {
    const HttpResponse r = HttpCall(port, "GET", "/v1/modes/" + mode + "/leaderboard" + query,
                                    {{"Authorization", "Bearer token-a"}});
    EXPECT_EQ(r.status, 200) << r.body;
    v1::Leaderboard board;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &board, &error)) << error;
    return board;
  }

  static std::vector<std::string> PlayersOf(const v1::Leaderboard& board) {
    std::vector<std::string> ids;
    for (const auto& entry : board.entries()) ids.push_back(entry.player_id());
    return ids;
  }

  // The player's rating in `mode` as GET /v1/players/{player_id} answers it.
  v1::ModeRating RatingOf(uint16_t port, const std::string& player, const std::string& mode) {
    const HttpResponse r =
        HttpCall(port, "GET", "/v1/players/" + player, {{"Authorization", "Bearer token-a"}});
    EXPECT_EQ(r.status, 200) << r.body;
    v1::Player read;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &read, &error)) << error;
    for (const auto& rating : read.ratings()) {
      if (rating.mode() == mode) return rating;
    }
    ADD_FAILURE() << player << " has no rating in " << mode << ": " << r.body;
    return {};
  }

  v1::Mode ModeOf(const HttpResponse& r) {
    v1::Mode mode;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.body, wire::BodyFormat::kJson, &mode, &error)) << error;
    return mode;
  }

  void Import(uint16_t port, const std::string& player, const std::string& mode,
              const std::string& json) {
    const HttpResponse r = HttpCall(port, "PUT", "/v1/players/" + player + "/ratings/" + mode,
                                    JsonHeaders("admin-token"), json);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // Plays a 1v1 of `mode` in `room`, `winner` beating `loser`.
  void Play(uint16_t port, uint64_t room, const std::string& mode, const std::string& winner,
            const std::string& loser) {
    const v1::RoomAllocation a = Room(room, mode, {{winner}, {loser}});
    MustAllocateRoom(port, a);
    const HttpResponse settled = Settle(port, Placed(a, {1, 2}));
    ASSERT_EQ(settled.status, 200) << settled.body;
  }

  // Everything a refused declaration must leave as it was.
  std::string ModesAsStored() const {
    return Q(
        "SELECT count(*) || '/' || coalesce(string_agg(mode || ':' || parameters::text || ':' || "
        "provisional_games || ':' || closed || ':' || coalesce(seed_mode_id::text, '-') || ':' "
        "|| declared_at, ',' ORDER BY mode), '') FROM modes");
  }
};

// A player with fewer games than the mode's provisional_games is shown as provisional and left
// off the ladder unless asked for; an import with no games is provisional too, so it no longer
// tops the ladder. Counted down by each settlement: two games and the players rank.
TEST_F(ModesTest, ProvisionalPlayersAreShownAndLeftOffTheLadderUntilTheyHavePlayedEnough) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  const HttpResponse declared =
      PutMode(port, "ladder", R"({"rating": {"system": "elo"}, "provisional_games": 2})");
  ASSERT_EQ(declared.status, 201) << declared.body;
  EXPECT_EQ(ModeOf(declared).provisional_games(), 2u);
  Import(port, "star", "ladder", R"({"rating": 2000})");
  Play(port, 1, "ladder", "a", "b");  // 1500 v 1500: E = 0.5, +16 and -16

  EXPECT_TRUE(RatingOf(port, "star", "ladder").provisional());
  EXPECT_TRUE(RatingOf(port, "a", "ladder").provisional()) << "one game of two";
  EXPECT_TRUE(PlayersOf(Ladder(port, "ladder")).empty());
  const v1::Leaderboard all = Ladder(port, "ladder", "?include_provisional=true");
  EXPECT_EQ(PlayersOf(all), (std::vector<std::string>{"star", "a", "b"}));
  ASSERT_EQ(all.entries_size(), 3);
  EXPECT_TRUE(all.entries(0).rating().provisional());

  // 1516 v 1484: E = 1 / (1 + 10^(-32/400)) = 0.5459, +round(32 * 0.4541) = +15.
  Play(port, 2, "ladder", "a", "b");
  EXPECT_FALSE(RatingOf(port, "a", "ladder").provisional());
  EXPECT_EQ(RatingOf(port, "a", "ladder").rating(), 1531);
  EXPECT_FALSE(RatingOf(port, "b", "ladder").provisional());
  EXPECT_TRUE(RatingOf(port, "star", "ladder").provisional());
  EXPECT_EQ(PlayersOf(Ladder(port, "ladder")), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Q("SELECT string_agg(player_id || ':' || provisional_left, ',' ORDER BY player_id) "
              "FROM player_ratings JOIN modes USING (mode_id) WHERE mode = 'ladder'"),
            "a:0,b:0,star:2");

  // Paged a player at a time, the whole ladder merges its two parts in one order.
  std::vector<std::string> paged;
  std::string next;
  for (int page = 0; page < 5; ++page) {
    const v1::Leaderboard board =
        Ladder(port, "ladder",
               "?include_provisional=true&limit=1" + (next.empty() ? "" : "&after=" + next));
    for (const auto& entry : board.entries()) paged.push_back(entry.player_id());
    next = board.next();
    if (next.empty()) break;
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"star", "a", "b"}));
  EXPECT_EQ(HttpCall(port, "GET", "/v1/modes/ladder/leaderboard?include_provisional=yes",
                     {{"Authorization", "Bearer token-a"}})
                .status,
            400);
}

// Every node of an EXPLAIN (FORMAT JSON) plan that reads player_ratings, into `reads`.
void RatingReadsIn(const google::protobuf::Struct& node,
                   std::vector<const google::protobuf::Struct*>& reads) {
  const auto relation = node.fields().find("Relation Name");
  if (relation != node.fields().end() && relation->second.string_value() == "player_ratings") {
    reads.push_back(&node);
  }
  const auto plans = node.fields().find("Plans");
  if (plans == node.fields().end()) return;
  for (const auto& child : plans->second.list_value().values()) {
    RatingReadsIn(child.struct_value(), reads);
  }
}

// A page of the ladder reads one range of its index (mode, provisional, displayed, player), with
// no row read and thrown away, however many provisional players rate above the ranked ones, and
// the whole ladder two such ranges merged: never a scan of the table, never more rows than the
// page from either range. Checked on the statements the lobby prepares, each planned generic and
// custom, over 4,000 provisional players above 4,000 ranked ones.
TEST_F(ModesTest, ALadderPageReadsOneIndexRangeWhateverTheProvisionalPlayersAboveIt) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  ASSERT_EQ(
      PutMode(lobby->port(), "big", R"({"rating": {"system": "elo"}, "provisional_games": 5})")
          .status,
      201);
  db_->Exec(
      "INSERT INTO player_ratings (mode_id, player_id, rating, displayed, provisional_left, "
      "provisional) SELECT m.mode_id, 'n' || g, 3000 + g, 3000 + g, 5, true "
      "FROM modes m, generate_series(1, 4000) g WHERE m.mode = 'big';"
      "INSERT INTO player_ratings (mode_id, player_id, rating, displayed, games, wins) "
      "SELECT m.mode_id, 'r' || g, 1000 + g, 1000 + g, 5, 5 "
      "FROM modes m, generate_series(1, 4000) g WHERE m.mode = 'big';"
      "ANALYZE player_ratings;");
  auto conn = db_->Connect();
  for (const auto& [name, text] : lobby::LadderStatements()) {
    if (name.rfind("ladder_", 0) == 0)
      pqxx::nontransaction(*conn).exec("PREPARE " + name + " AS " + text);
  }
  for (const char* plans : {"force_generic_plan", "force_custom_plan"}) {
    pqxx::work tx(*conn);
    tx.exec(std::string("SET LOCAL plan_cache_mode = ") + plans);
    for (const std::string call :
         {"ladder_top('big', 50)", "ladder_after('big', 50, 2000, 'r1000')",
          "ladder_all_top('big', 50)", "ladder_all_after('big', 50, 3500, 'n500')"}) {
      const std::string plan =
          tx.exec1("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE " + call)[0].as<std::string>();
      SCOPED_TRACE(std::string(plans) + " " + call + ": " + plan);
      google::protobuf::ListValue parsed;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(plan, &parsed).ok());
      std::vector<const google::protobuf::Struct*> reads;
      RatingReadsIn(parsed.values(0).struct_value().fields().at("Plan").struct_value(), reads);
      EXPECT_FALSE(reads.empty());
      for (const google::protobuf::Struct* read : reads) {
        const auto& node = read->fields();
        EXPECT_EQ(node.at("Index Name").string_value(), "player_ratings_ladder");
        EXPECT_EQ(node.count("Rows Removed by Filter"), 0u) << "rows read and thrown away";
        EXPECT_LE(node.at("Actual Rows").number_value(), 50);
      }
    }
    const pqxx::result top = tx.exec("EXECUTE ladder_top('big', 2)");
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0][0].as<std::string>(), "r4000") << "the best ranked, under 4,000 provisional";
  }
}

// A closed mode refuses new rooms (409 MODE_CLOSED, nothing written); its rooms allocated before
// still settle, its ladder and players stay readable, a declaration that leaves `closed` out (a
// modes file at the next start) leaves it closed, and `false` reopens it.
TEST_F(ModesTest, AClosedModeRefusesNewRoomsAndStaysReadable) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  const std::string s3 = R"({"rating": {"system": "elo"}})";
  ASSERT_EQ(PutMode(port, "ranked-s3", s3).status, 201);
  const v1::RoomAllocation before = Room(1, "ranked-s3", {{"a"}, {"b"}});
  MustAllocateRoom(port, before);

  const HttpResponse closed = PutMode(port, "ranked-s3", R"({"closed": true})");
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_TRUE(ModeOf(closed).closed());
  EXPECT_TRUE(ModeOf(closed).in_use());
  EXPECT_EQ(ModeOf(closed).rating().system(), "elo") << "the declaration stays";
  const DbSnapshot snapshot = Snapshot();
  const HttpResponse refused = AllocateRoster(port, Room(2, "ranked-s3", {{"c"}, {"d"}}));
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(Member(refused, "code"), "MODE_CLOSED");
  EXPECT_NE(Member(refused, "detail").find("ranked-s3 is closed"), std::string::npos);
  EXPECT_EQ(Snapshot(), snapshot);
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE player_id IN ('c', 'd')"), "0");

  ASSERT_EQ(Settle(port, Placed(before, {1, 2})).status, 200) << "a room allocated before";
  EXPECT_EQ(PlayersOf(Ladder(port, "ranked-s3")), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(RatingOf(port, "a", "ranked-s3").rating(), 1516);
  EXPECT_EQ(PutMode(port, "ranked-s3", s3).status, 200);
  EXPECT_EQ(Q("SELECT closed FROM modes WHERE mode = 'ranked-s3'"), "t")
      << "a declaration without `closed` leaves it";
  const HttpResponse changed =
      PutMode(port, "ranked-s3", R"({"rating": {"system": "elo", "parameters": {"k": 16}},
                                     "closed": false})");
  EXPECT_EQ(changed.status, 409) << "in use: a changed declaration changes nothing";
  EXPECT_EQ(Q("SELECT closed FROM modes WHERE mode = 'ranked-s3'"), "t");

  const HttpResponse reopened = PutMode(port, "ranked-s3", R"({"closed": false})");
  ASSERT_EQ(reopened.status, 200) << reopened.body;
  EXPECT_FALSE(ModeOf(reopened).closed());
  MustAllocateRoom(port, Room(2, "ranked-s3", {{"c"}, {"d"}}));

  // A mode declared closed is never marked in use by a refused room.
  ASSERT_EQ(PutMode(port, "later", R"({"rating": {"system": "elo"}, "closed": true})").status, 201);
  EXPECT_EQ(AllocateRoster(port, Room(3, "later", {{"e"}, {"f"}})).status, 409);
  EXPECT_EQ(Q("SELECT in_use FROM modes WHERE mode = 'later'"), "f");

  const HttpResponse unknown = PutMode(port, "nope", R"({"closed": true})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(Q("SELECT count(*) FROM modes WHERE mode = 'nope'"), "0");
  EXPECT_EQ(PutMode(port, "ranked-s3", R"({"closed": true, "provisional_games": 3})").status, 400)
      << "only `closed` may be given without a rating";
}

// A mode stored before provisional games, closing and seeds existed (the "default" mode, made by
// migration 003) is declared again unchanged once in use: a modes file that declares it at every
// start still starts.
TEST_F(ModesTest, AModeStoredBeforeTheNewOptionsIsDeclaredAgainUnchanged) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  MustAllocate(lobby->port(), 1);
  EXPECT_EQ(Q("SELECT in_use FROM modes WHERE mode = 'default'"), "t");
  const HttpResponse again = PutMode(lobby->port(), "default",
                                     R"({"rating": {"system": "elo", "parameters": {"k": 32}}})");
  EXPECT_EQ(again.status, 200) << again.body;
}

// A season seeded from the last: each player's first rating in it is its last in the earlier
// mode, drawn halfway to the mean 1500 (keep 0.5), written when its first room of the season is
// allocated, and what that room is rated from. The earlier season's ratings stay.
TEST_F(ModesTest, ASeasonSeedsEachPlayersFirstRatingFromItsLastInTheSeasonBefore) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  ASSERT_EQ(PutMode(port, "s1", R"({"rating": {"system": "elo"}})").status, 201);
  Play(port, 1, "s1", "a", "b");  // 1516 and 1484
  ASSERT_EQ(PutMode(port, "s1", R"({"closed": true})").status, 200);
  const HttpResponse declared = PutMode(
      port, "s2",
      R"({"rating": {"system": "elo"}, "seed_from": {"mode": "s1", "soft_reset": {"keep": 0.5}}})");
  ASSERT_EQ(declared.status, 201) << declared.body;
  const v1::Mode s2 = ModeOf(declared);
  EXPECT_EQ(s2.seed_from().mode(), "s1");
  EXPECT_EQ(s2.seed_from().soft_reset().keep(), 0.5);
  EXPECT_EQ(s2.seed_from().soft_reset().mean(), 1500) << "the mode's initial rating";

  const v1::RoomAllocation room = Room(2, "s2", {{"a"}, {"b"}});
  MustAllocateRoom(port, room);
  // 1500 + 0.5 (1516 - 1500) = 1508; 1500 + 0.5 (1484 - 1500) = 1492.
  EXPECT_EQ(Q("SELECT string_agg(player_id || ':' || rating_at_allocation, ',' ORDER BY "
              "player_id) FROM battle_room_seats WHERE room_id = 2"),
            "a:1508,b:1492");
  EXPECT_EQ(RatingOf(port, "a", "s2").rating(), 1508);
  EXPECT_EQ(RatingOf(port, "a", "s2").games(), 0u);
  EXPECT_EQ(AllocateRoster(port, room).status, 200) << "a retried allocation seeds nothing again";
  EXPECT_EQ(RatingOf(port, "a", "s2").rating(), 1508);
  MustAllocateRoom(port, Room(3, "s2", {{"c"}, {"d"}}));  // new to both seasons
  EXPECT_EQ(Q("SELECT count(*) FROM player_ratings JOIN modes USING (mode_id) "
              "WHERE mode = 's2' AND player_id IN ('c', 'd')"),
            "0");

  // 1508 v 1492: E = 1 / (1 + 10^(-16/400)) = 0.5230, +round(32 * 0.4770) = +15.
  ASSERT_EQ(Settle(port, Placed(room, {1, 2})).status, 200);
  EXPECT_EQ(RatingOf(port, "a", "s2").rating(), 1523);
  EXPECT_EQ(RatingOf(port, "b", "s2").rating(), 1477);
  EXPECT_EQ(RatingOf(port, "a", "s1").rating(), 1516) << "the last season stays";
}

// A soft reset raises an uncertainty to the stated value and never lowers one: Glicko-2 players
// at RD 60 and 300, reset with keep 0.5 and deviation 200, start at RD 200 and 300, each rating
// halfway to 1500, its volatility kept.
TEST_F(ModesTest, ASeasonsSoftResetRaisesTheDeviationToTheStatedValue) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  ASSERT_EQ(PutMode(port, "chess-s1", R"({"rating": {"system": "glicko2"}})").status, 201);
  Import(port, "p", "chess-s1", R"({"rating": 1700, "deviation": 60, "volatility": 0.06})");
  Import(port, "q", "chess-s1", R"({"rating": 1400, "deviation": 300, "volatility": 0.05})");
  ASSERT_EQ(PutMode(port, "chess-s2", R"({"rating": {"system": "glicko2"}, "seed_from":
                    {"mode": "chess-s1", "soft_reset": {"keep": 0.5, "deviation": 200}}})")
                .status,
            201);
  MustAllocateRoom(port, Room(1, "chess-s2", {{"p"}, {"q"}}));
  const v1::ModeRating p = RatingOf(port, "p", "chess-s2");
  EXPECT_EQ(p.rating(), 1600);
  EXPECT_EQ(p.deviation(), 200);
  EXPECT_EQ(p.volatility(), 0.06);
  EXPECT_EQ(p.displayed(), 1600 - 2 * 200);
  const v1::ModeRating q = RatingOf(port, "q", "chess-s2");
  EXPECT_EQ(q.rating(), 1450);
  EXPECT_EQ(q.deviation(), 300);
  EXPECT_EQ(q.volatility(), 0.05);
}

// Inactivity, Glicko-2 with one-day rating periods. A rating of RD 50 and volatility 0.06 whose
// last match was 120 days ago grows by Glickman's step 6 period by period, phi' = sqrt(phi^2 +
// sigma^2) (M. E. Glickman, "Example of the Glicko-2 system", step 6), to RD 124.6469 (the
// reference value of issue 51), its rating and volatility kept.
class InactivityTest : public ModesTest {
 protected:
  static constexpr double kAgedDeviation = 124.6469;

  // Declares "chess" (Glicko-2, one-day periods), plays a first match of a and b, and makes both
  // ratings 1500, RD 50, volatility 0.06: b's as its match left it now, a's 120 days and an hour
  // ago.
  void IdleFor120Days(uint16_t port) {
    ASSERT_EQ(PutMode(port, "chess",
                      R"({"rating": {"system": "glicko2", "parameters": {"period_days": 1}}})")
                  .status,
              201);
    Play(port, 1, "chess", "a", "b");
    db_->Exec(
        "UPDATE player_ratings SET rating = 1500, deviation = 50, volatility = 0.06, "
        "displayed = 1400, last_match_at = CASE player_id WHEN 'a' THEN now() - "
        "interval '120 days 1 hour' ELSE now() END");
  }

  // The deviation a's second match was rated from, as its history records it.
  std::string DeviationBeforeSecondMatch(const std::string& player) const {
    return Q(
        "SELECT round(mp.deviation_before::numeric, 4) FROM match_players mp "
        "JOIN matches m USING (match_id) WHERE m.room_id = 2 AND mp.player_id = '" +
        player + "'");
  }
};

// Before a player's next match is rated, its rating ages for the time since its last match: the
// match is rated from RD 124.6469, and its opponent, who played today, from its own.
TEST_F(InactivityTest, AnIdleRatingAgesBeforeItsNextMatchIsRated) {
  auto lobby = StartLobby({"--inactivity-per-tick", "0"});
  ASSERT_NE(lobby, nullptr);
  IdleFor120Days(lobby->port());
  Play(lobby->port(), 2, "chess", "a", "b");
  EXPECT_EQ(DeviationBeforeSecondMatch("a"), "124.6469");
  EXPECT_EQ(DeviationBeforeSecondMatch("b"), "50.0000") << "played today";
  EXPECT_EQ(Q("SELECT aged_through IS NULL AND last_match_at > now() - interval '1 hour' "
              "FROM player_ratings WHERE player_id = 'a'"),
            "t")
      << "a match: the rating ages from it again";
}

// The maintenance's inactivity pass ages the idle rating so that the ladder shows it, records how
// far it aged, and the next match does not age the same days again.
TEST_F(InactivityTest, ThePassAgesAnIdleRatingOnTheLadderAndTheNextMatchDoesNotAgeItAgain) {
  auto lobby = StartLobby({"--maintenance-interval", "100ms"});
  ASSERT_NE(lobby, nullptr);
  IdleFor120Days(lobby->port());
  ASSERT_TRUE(WaitUntil([&] {
    return Q("SELECT deviation > 100 FROM player_ratings WHERE player_id = 'a'") == "t";
  }));
  const v1::ModeRating aged = RatingOf(lobby->port(), "a", "chess");
  EXPECT_NEAR(aged.deviation(), kAgedDeviation, 1e-4);
  EXPECT_EQ(aged.rating(), 1500);
  EXPECT_EQ(aged.volatility(), 0.06);
  EXPECT_NEAR(aged.displayed(), 1500 - 2 * kAgedDeviation, 1e-3);
  const v1::Leaderboard ladder = Ladder(lobby->port(), "chess");
  ASSERT_EQ(ladder.entries_size(), 2);
  EXPECT_EQ(ladder.entries(1).player_id(), "a") << "the aged rating ranks below";
  EXPECT_EQ(Q("SELECT abs(extract(epoch FROM aged_through - last_match_at) - 120 * 86400) < "
              "0.001 FROM player_ratings WHERE player_id = 'a'"),
            "t")
      << "aged through 120 whole days after its last match (to the millisecond)";

  Play(lobby->port(), 2, "chess", "a", "b");
  EXPECT_EQ(DeviationBeforeSecondMatch("a"), "124.6469") << "aged once, not twice";
}

// Bad declarations of seasons, provisional games and inactivity are 400 naming the field, and
// each leaves every mode as it was.
TEST_F(ModesTest, BadSeasonsProvisionalGamesAndInactivityAreRefusedAndWriteNothing) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const uint16_t port = lobby->port();
  ASSERT_EQ(PutMode(port, "chess", R"({"rating": {"system": "glicko2"}})").status, 201);
  ASSERT_EQ(PutMode(port, "s1", R"({"rating": {"system": "elo"}})").status, 201);
  ASSERT_EQ(PutMode(port, "s2", R"({"rating": {"system": "elo"}})").status, 201);
  const std::string stored = ModesAsStored();
  struct Bad {
    std::string mode, body, field;
  };
  const std::vector<Bad> bad = {
      {"s2", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "nope"}})", "seed_from.mode"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "nope"}})", "seed_from.mode"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "chess"}})", "seed_from.mode"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "s3"}})", "seed_from.mode"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "s1",
                 "soft_reset": {"keep": 1.5}}})",
       "seed_from.soft_reset.keep"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "s1",
                 "soft_reset": {"keep": -0.1}}})",
       "seed_from.soft_reset.keep"},
      {"s3", R"({"rating": {"system": "elo"}, "seed_from": {"mode": "s1",
                 "soft_reset": {"deviation": 50}}})",
       "seed_from.soft_reset.deviation"},
      {"s3", R"({"rating": {"system": "elo"}, "provisional_games": 1000001})", "provisional_games"},
      {"blitz", R"({"rating": {"system": "glicko2", "parameters": {"period_days": 0}}})",
       "parameters.period_days"},
      {"blitz", R"({"rating": {"system": "glicko2", "parameters": {"period_days": 3651}}})",
       "parameters.period_days"},
      {"blitz", R"({"rating": {"system": "openskill", "parameters": {"tau_idle": -1}}})",
       "parameters.tau_idle"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.mode + " " + b.body);
    const HttpResponse r = PutMode(port, b.mode, b.body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(Member(r, "detail").find(b.field), std::string::npos) << r.body;
    EXPECT_EQ(ModesAsStored(), stored);
  }
}

}  // namespace
}  // namespace verdict::testing
