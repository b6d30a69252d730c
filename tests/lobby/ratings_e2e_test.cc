// Ratings through a real verdict-lobby and PostgreSQL: what a settlement does to players' ratings
// and counts when one transaction holds more than one of their rooms (a released room and the
// players' next one), and the chain of before and after that every player's matches must form.
#include <gtest/gtest.h>

#include <string>

#include "tests/lobby/lobby_fixture.h"

namespace verdict::testing {
namespace {

class RatingsTest : public LobbyFixture {
 protected:
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
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE in_battle_room <> 0"), "0");
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
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE in_battle_room <> 0"), "0");
  EXPECT_EQ(AllocateRoster(lobby->port(), MakeAllocation(3, "node-a", 11, 10)).status, 201);
}

}  // namespace
}  // namespace verdict::testing
